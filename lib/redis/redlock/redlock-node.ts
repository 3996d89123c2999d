import { LockConnectionError } from '../../errors/lock-connection.error';
import type { RedisConnectionOption } from '../../options/distributed-lock-module-options.interface';
import { monotonicNow } from '../../time/clock';
import { CommandDeadlines } from '../command-deadlines';
import { ConnectionState } from '../connection-state';
import type { LockRedisKeys } from '../lock-redis-keys';
import { runBoundedScript } from '../bounded-script';
import { CommandArg, isNoScript, LuaScript, ScriptRunner } from '../lua-script';
import { createRedisConnection, RedisClient, socketOf } from '../redis-connection';
import { aclRefusalOf } from '../permission-check';
import { WriteBatcher } from '../write-batcher';
import { REDLOCK_SCRIPTS } from './redlock-scripts';

/**
 * One independent Redis master of a Redlock set: its connection (ours or the user's), the state
 * that admits or refuses calls at once (a node known to be down costs nothing), and its own bound
 * per call, far below the lease (see redlockNodeTimeout).
 */
export class RedlockNode {
  readonly client: RedisClient;
  readonly owned: boolean;
  readonly state: ConnectionState;
  private readonly deadlines: CommandDeadlines;
  private readonly scripts: ScriptRunner;
  /** Many locks in flight: their commands to this node leave in few socket writes, as in single mode. */
  private readonly writes: WriteBatcher;
  /**
   * A call answered NOSCRIPT fails; it is not sent again as EVAL. That retry would leave one round
   * trip later, behind calls sent since, and a node must run one acquisition's calls in the order
   * they were sent: a give-back overtaken by a later attempt would delete the lock that attempt
   * counted (RedlockStore.acquire). The call did not run, which a failed call allows for; the next
   * call of every script goes as EVAL (the node's cache is gone: a SCRIPT FLUSH; after a restart
   * the new connection starts over with EVAL anyway).
   */
  private readonly failOnNoScript = (error: unknown): boolean => {
    if (isNoScript(error)) this.scripts.forgetSent();
    return false;
  };

  /** Set when this node turned out not to be an independent master (a Cluster member found after startup): it never votes. */
  private refusal?: Error;

  constructor(option: RedisConnectionOption, commandTimeout: number, nodeTimeout: number) {
    const { client, owned } = createRedisConnection(option, commandTimeout);
    this.client = client;
    this.owned = owned;
    this.state = new ConnectionState(client, owned);
    this.deadlines = new CommandDeadlines(nodeTimeout, this.state);
    this.scripts = new ScriptRunner(client);
    this.writes = new WriteBatcher(client);
  }

  /** The socket calls go out on now (socketOf): a reply on another one to an older call is a replay. */
  get connection(): unknown {
    return socketOf(this.client);
  }

  /** `Redis at 127.0.0.1:6379`, as messages name it. */
  get target(): string {
    return this.state.target;
  }

  /**
   * From now on every lock call and probe to this node fails at once with `why`, as a node that is down does:
   * its votes never count, so the remaining nodes decide (a majority of all N, unchanged).
   */
  refuse(why: string): void {
    this.refusal ??= new LockConnectionError(why, 'redlock node');
  }

  /**
   * One script call, bounded by this node's deadline. `late` gets the reply of a call the deadline already failed:
   * a client you pass may send it again after a reconnect, so it can still run here (see late-answers.ts).
   */
  run<T = unknown>(
    script: LuaScript,
    operation: string,
    keys: LockRedisKeys,
    args: CommandArg[],
    parse?: (reply: unknown) => T,
    late?: (reply: unknown) => void,
  ): Promise<T> {
    if (this.refusal) return Promise.reject(this.refusal);
    this.writes.beforeSend(this.deadlines.inFlight > 0);
    return runBoundedScript(this.deadlines, this.scripts, script, operation, keys, args, parse, this.failOnNoScript, late);
  }

  /**
   * The health probe (REDLOCK_PROBE_SCRIPT, `args` as it takes them): its round trip, and the ms this
   * node still gives no votes (0: it votes). Order does not matter to it, so a NOSCRIPT is answered
   * with the script's text at once.
   */
  async probe(args: readonly CommandArg[]): Promise<{ ms: number; recoveringFor: number }> {
    if (this.refusal) throw this.refusal;
    const sentAt = monotonicNow();
    const recoveringFor = await this.deadlines.bound(
      'health probe',
      (attempt) => this.scripts.run(REDLOCK_SCRIPTS.probe, args, attempt),
      Number,
      isNoScript,
    );
    return { ms: monotonicNow() - sentAt, recoveringFor };
  }

  /** Startup: what Redis refuses this node's user of what every lock call does (permission-check.ts), or undefined. */
  aclRefusal(keyPrefix: string): Promise<LockConnectionError | undefined> {
    return aclRefusalOf(this.client, this.deadlines, keyPrefix);
  }

  /** `INFO <section>`, bounded like every call. */
  info(section: string): Promise<string> {
    return this.deadlines.bound('info', () => (this.client as { info(section: string): Promise<string> }).info(section));
  }

  /** `LASTSAVE`, bounded like every call. */
  lastSave(): Promise<number> {
    return this.deadlines.bound('lastsave', () => (this.client as { lastsave(): Promise<number> }).lastsave());
  }
}
