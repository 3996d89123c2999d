import { createHash } from 'node:crypto';
import Redis, { Cluster, Command, type Pipeline, type RedisOptions } from 'ioredis';
import { socketOf, type RedisClient } from './redis-connection';

/** What ioredis' `pipeline.exec()` resolves to: one [error, reply] per command. */
export type PipelineResults = Array<[Error | null, unknown]>;

/**
 * A Lua script called by its SHA1. EVALSHA names the exact text, so a client shared with another
 * copy or version of this library can never run someone else's script under our name (which a
 * name-based `defineCommand` would allow), and it skips a layer of ioredis per call.
 */
export interface LuaScript {
  readonly lua: string;
  readonly sha: string;
  /** As text: see CommandArg. */
  readonly numberOfKeys: string;
}

/**
 * An argument of a script call. Text only: ioredis copies (`Array#flat`) and converts every argument
 * of every command, and an all-string list takes the fast path of both (measured: 0.5 µs less per
 * command than the same list with numbers in it).
 */
export type CommandArg = string;

export function luaScript(numberOfKeys: number, lua: string): LuaScript {
  return { lua, numberOfKeys: String(numberOfKeys), sha: createHash('sha1').update(lua).digest('hex') };
}

/**
 * Redis does not have the script cached: first use on this server, restart, failover, SCRIPT FLUSH,
 * or, on a Cluster, the first call of a script on every node but the first one it was sent to (also
 * after a slot moved): scripts are remembered per client, not per node.
 */
export function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

type Call = (...args: CommandArg[]) => Promise<unknown>;

/** What a Command is constructed with when its arguments are set afterwards (see evalshaCommand). */
const NO_ARGS: CommandArg[] = [];

/**
 * An EVALSHA as ioredis' public Command, built as its generated `evalsha` method builds it (same reply
 * encoding, key prefix and error stack) minus its argument shuffling (1 µs less per call), for a
 * client's `sendCommand` or a pipeline's. The constructor copies its arguments with Array#flat, about
 * 90 ns per argument on Node 20 (1.2 µs for an acquire's 13); ours are flat text already, so they are
 * set afterwards. Not with a key prefix: then the constructor must see the keys to prefix them.
 */
function evalshaCommand(options: RedisOptions, script: LuaScript, args: readonly CommandArg[]): Command {
  const evalshaArgs = [script.sha, script.numberOfKeys, ...args];
  const keyPrefix = options.keyPrefix;
  const command = new Command('evalsha', keyPrefix ? evalshaArgs : NO_ARGS, {
    replyEncoding: 'utf8',
    keyPrefix,
    errorStack: options.showFriendlyErrorStack ? new Error() : undefined,
  });
  if (!keyPrefix) command.args = evalshaArgs;
  return command;
}

/**
 * Runs scripts on one client. The first call of each script goes as EVAL (the server caches it),
 * later ones as EVALSHA. Sending EVAL first, rather than EVALSHA and EVAL after a NOSCRIPT reply,
 * keeps every call in the order it was sent: an owner-checked clean-up sent after a release must
 * run after it, not one round trip later behind commands sent since. Only when the server lost its
 * cache later (restart, failover), or a Cluster call reaches a node that never ran the script, does a
 * call take the NOSCRIPT detour.
 */
export class ScriptRunner {
  private readonly sent = new Set<LuaScript>();
  /**
   * The socket `sent` was sent on. A new one (ioredis reconnected: often a restarted server, which
   * lost its script cache) starts over with EVAL, instead of a NOSCRIPT detour per script.
   */
  private sentOn?: unknown;
  /**
   * A client made by this copy of ioredis takes our Command objects; one from another copy (a user's
   * nested node_modules) only gets calls through its own methods.
   */
  private readonly ownCommands: boolean;

  constructor(private readonly client: RedisClient) {
    this.ownCommands = client instanceof Redis || client instanceof Cluster;
  }

  /**
   * Attempt 0: EVAL on first use, else EVALSHA. Attempt 1 (after `isNoScript`: the server lost its
   * cache): EVAL. The caller decides on the retry, so a call costs no extra promise for it.
   */
  run(script: LuaScript, args: readonly CommandArg[], attempt = 0): Promise<unknown> {
    const commands = this.client as unknown as { evalsha: Call; eval: Call };
    if (this.sendsText(script, attempt)) return commands.eval(script.lua, script.numberOfKeys, ...args);
    if (!this.ownCommands) return commands.evalsha(script.sha, script.numberOfKeys, ...args);
    return this.client.sendCommand(evalshaCommand((this.client as Redis).options, script, args)) as Promise<unknown>;
  }

  /**
   * `script`, then WAIT with `waitArgs`, in one pipeline (one write, one round trip). WAIT counts
   * the replicas that have every write this connection made so far, the script's included.
   * Resolves with [script reply, replicas that confirmed]; a failed script rejects with its error
   * (so a NOSCRIPT can be retried as `attempt` 1, like run()).
   */
  async runThenWait(script: LuaScript, args: readonly CommandArg[], waitArgs: readonly CommandArg[], attempt = 0): Promise<[unknown, number]> {
    const pipeline = (this.client as Redis).pipeline();
    if (this.sendsText(script, attempt)) pipeline.eval(script.lua, script.numberOfKeys, ...args);
    else pipeline.evalsha(script.sha, script.numberOfKeys, ...args);
    pipeline.call('WAIT', ...waitArgs);
    const [[scriptError, reply], [waitError, acks]] = ((await pipeline.exec()) ?? []) as PipelineResults;
    if (scriptError) throw scriptError;
    if (waitError) throw waitError;
    return [reply, Number(acks)];
  }

  /** The server lost its script cache (a NOSCRIPT reply the caller does not retry): every script's next call goes as EVAL. */
  forgetSent(): void {
    this.sent.clear();
  }

  /**
   * Whether a call of `script` goes as EVAL (its text): the first on this client, or `attempt` 1
   * after a NOSCRIPT. Either way the server has it cached afterwards, so later calls go by SHA1.
   */
  private sendsText(script: LuaScript, attempt: number): boolean {
    const socket = socketOf(this.client);
    if (socket !== this.sentOn) {
      this.sent.clear();
      this.sentOn = socket;
    }
    if (attempt === 0 && this.sent.has(script)) return false;
    this.sent.add(script);
    return true;
  }

  /**
   * `script` once per argument list, in one pipeline (one round trip, single Redis only). Commands
   * of a pipeline run in order, so on first use the first entry goes as EVAL and caches the script
   * for the EVALSHAs behind it; if the server lost its cache since, the round is sent again that way.
   * `send` bounds each round trip. With `waitArgs`, a WAIT closes the pipeline (see runThenWait).
   */
  async runPipelined(
    script: LuaScript,
    argLists: ReadonlyArray<readonly CommandArg[]>,
    send: (exec: () => Promise<PipelineResults>) => Promise<PipelineResults>,
    waitArgs?: readonly CommandArg[],
  ): Promise<PipelineResults> {
    const client = this.client as Redis;
    const round = (loadFirst: boolean) => {
      const pipeline = client.pipeline();
      argLists.forEach((args, i) => {
        if (i === 0 && loadFirst) pipeline.eval(script.lua, script.numberOfKeys, ...args);
        else if (this.ownCommands) (pipeline as Pipeline).sendCommand(evalshaCommand(client.options, script, args));
        else pipeline.evalsha(script.sha, script.numberOfKeys, ...args);
      });
      // Its reply (replicas that confirmed all of the above) comes last in the results.
      if (waitArgs) pipeline.call('WAIT', ...waitArgs);
      return send(async () => (await pipeline.exec()) ?? []);
    };
    const results = await round(this.sendsText(script, 0));
    return results.some(([error]) => isNoScript(error)) ? round(true) : results;
  }
}
