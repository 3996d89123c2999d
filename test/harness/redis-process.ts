/**
 * A real redis-server per suite, started as a foreground child on a free loopback port, so fault
 * tests can freeze (SIGSTOP), crash (SIGKILL) and restart it by PID without touching the system
 * Redis or any other suite's server.
 */
import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import Redis, { RedisOptions } from 'ioredis';
import * as os from 'os';
import * as path from 'path';
import { freePort } from './free-port';
import { killSurvivors, track, untrack } from './reaper';
import { ClientSet, closeClient, HARNESS_CLIENT_DEFAULTS } from './redis-clients';
import { waitForPing } from './redis-ping';

// Plain CommonJS shared with `npm test`'s pretest, so the lookup rules live in one place.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { findRedisServer, NOT_INSTALLED } = require('../../scripts/ensure-redis.js') as {
  findRedisServer: () => string | null;
  NOT_INSTALLED: string;
};

export { killSurvivors };

export interface RedisProcessOptions {
  /** Extra redis-server arguments, appended after the harness defaults (so they win). */
  args?: string[];
  /** Fixed port; by default a free one is picked (and re-picked if someone grabs it first). */
  port?: number;
  /**
   * Text of a config file, written into the server's own tmp dir and passed first on the command
   * line. A Sentinel (`args: ['--sentinel']`) needs one: it rewrites its config file as it learns.
   */
  config?: string;
  /**
   * AOF on, fsynced before every reply (`--appendfsync always`), in one data dir kept across
   * restart() and kill9(): a restarted server has every write it acknowledged (a restart without
   * persistence loses locks by design). stop() removes the dir. Default: no persistence, and every
   * incarnation starts empty.
   */
  persistent?: boolean;
}

/** "A Redis" for suites that need no fault injection: a started process or an external REDIS_URL. */
export interface SharedRedis {
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** True when it is REDIS_URL: not ours, so never flushed, paused or stopped by the harness. */
  readonly external: boolean;
  /** An ioredis client the harness disconnects in stop(). */
  client(opts?: RedisOptions): Redis;
  stop(): Promise<void>;
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

const HOST = '127.0.0.1';
const START_TIMEOUT_MS = 10_000;
const STOP_GRACE_MS = 3_000;
const START_ATTEMPTS_ON_PORT_RACE = 5;
// Enough of the server log to explain a failed start, not so much that a chatty server grows memory.
const OUTPUT_LIMIT = 64 * 1024;

/** One spawned redis-server; a RedisProcess has one at a time (restart() replaces it). */
interface Incarnation {
  child: ChildProcess;
  dir: string;
  output: string;
  exit?: ExitInfo;
  spawnError?: Error;
  closed: Promise<ExitInfo>;
}

function redisServerBinary(): string {
  const bin = findRedisServer();
  if (!bin) throw new Error(NOT_INSTALLED);
  return bin;
}

export class RedisProcess implements SharedRedis {
  readonly host = HOST;
  readonly external = false;
  private current?: Incarnation;
  private readonly clients = new ClientSet();
  private stopping?: Promise<void>;

  private constructor(
    readonly port: number,
    private readonly extraArgs: readonly string[],
    private readonly config?: string,
    /** Set when persistent: the one data dir of every incarnation. */
    private readonly persistentDir?: string,
  ) {}

  /** Starts redis-server and resolves once it answers PING (bounded by 10 s). */
  static async start(opts: RedisProcessOptions = {}): Promise<RedisProcess> {
    const attempts = opts.port === undefined ? START_ATTEMPTS_ON_PORT_RACE : 1;
    let lastError: unknown;
    for (let attempt = 0; attempt < attempts; attempt++) {
      const port = opts.port ?? (await freePort(HOST));
      const dir = opts.persistent ? fs.mkdtempSync(path.join(os.tmpdir(), `ndl-redis-${port}-aof-`)) : undefined;
      const redis = new RedisProcess(port, opts.args ?? [], opts.config, dir);
      try {
        await redis.spawnAndWait();
        return redis;
      } catch (err) {
        lastError = err;
        await redis.stop();
        // Only the race for a just-freed port is worth another try; anything else is a real error.
        if (!/address already in use/i.test(String(err))) throw err;
      }
    }
    throw lastError;
  }

  /**
   * A Redis we did not start (e.g. a CI service container). Checks that it answers, so a wrong URL
   * fails here rather than as a timeout deep inside a test.
   */
  static async external(url: string): Promise<SharedRedis> {
    const external = new ExternalRedis(url);
    const probe = new Redis(url, {
      lazyConnect: true,
      connectTimeout: 2_000,
      commandTimeout: 2_000,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      disconnectTimeout: HARNESS_CLIENT_DEFAULTS.disconnectTimeout,
    });
    probe.on('error', () => undefined);
    try {
      await probe.connect();
      await probe.ping();
    } catch (err) {
      throw new Error(`REDIS_URL ${url} does not answer PING: ${String(err)}`);
    } finally {
      await closeClient(probe);
    }
    return external;
  }

  /** REDIS_URL when set (never flushed: the suite must use its own key prefix), else a fresh server. */
  static async shared(): Promise<SharedRedis> {
    const url = process.env.REDIS_URL;
    return url ? RedisProcess.external(url) : RedisProcess.start();
  }

  get url(): string {
    return `redis://${HOST}:${this.port}`;
  }

  /** PID of the current server process; changes on restart(). */
  get pid(): number {
    const pid = this.current?.child.pid;
    if (pid === undefined) throw new Error(`redis-server on port ${this.port} is not running`);
    return pid;
  }

  /** The current server's working dir (a fresh tmp dir, removed when that process is gone). */
  get dataDir(): string {
    return this.requireCurrent().dir;
  }

  /** The tail of the current server's stdout/stderr (for assertions and error messages). */
  get output(): string {
    return this.current?.output ?? '';
  }

  /** An ioredis client to this server (maxRetriesPerRequest 1), disconnected by stop(). */
  client(opts: RedisOptions = {}): Redis {
    return this.clients.add(new Redis({ host: HOST, port: this.port, ...HARNESS_CLIENT_DEFAULTS, ...opts }));
  }

  /** Freezes the server: the kernel still accepts connections, nothing is read or answered. */
  pause(): void {
    this.signal('SIGSTOP');
  }

  resume(): void {
    this.signal('SIGCONT');
  }

  /** Crash without any shutdown work (no replies flushed, sockets reset by the kernel). */
  async kill9(): Promise<ExitInfo> {
    const inc = this.requireCurrent();
    if (!inc.exit) inc.child.kill('SIGKILL');
    return inc.closed;
  }

  /**
   * Same port, new process; empty keyspace unless started `persistent` (then: what the old one
   * acknowledged). Clients made by client() stay and may reconnect.
   */
  async restart(): Promise<void> {
    if (this.stopping) throw new Error(`redis-server on port ${this.port} was stopped; start a new one`);
    const old = this.current;
    if (old) await stopIncarnation(old);
    await this.spawnAndWait();
  }

  /** Disconnects the tracked clients, stops the server (SIGTERM, SIGKILL after 3 s), removes its dir. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      await this.clients.closeAll();
      if (this.current) await stopIncarnation(this.current);
      if (this.persistentDir) fs.rmSync(this.persistentDir, { recursive: true, force: true });
    })();
    return this.stopping;
  }

  private signal(sig: NodeJS.Signals): void {
    const inc = this.requireCurrent();
    if (inc.exit) throw new Error(`redis-server on port ${this.port} has exited (${describeExit(inc.exit)})`);
    inc.child.kill(sig);
  }

  private requireCurrent(): Incarnation {
    if (!this.current) throw new Error(`redis-server on port ${this.port} was never started`);
    return this.current;
  }

  private async spawnAndWait(): Promise<void> {
    const inc = spawnRedis(this.port, this.extraArgs, this.config, this.persistentDir);
    this.current = inc;
    try {
      await waitForPing(
        this.port,
        HOST,
        START_TIMEOUT_MS,
        () => {
          if (inc.spawnError) return `cannot spawn redis-server: ${inc.spawnError.message}`;
          if (inc.exit) return `redis-server exited during start (${describeExit(inc.exit)})`;
          return undefined;
        },
        inc.child.pid,
      );
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      await stopIncarnation(inc);
      throw new Error(`redis-server on ${HOST}:${this.port} did not start: ${reason}\n--- server output ---\n${inc.output}`);
    }
  }
}

/** REDIS_URL: clients are tracked and closed; the server itself is never touched. */
class ExternalRedis implements SharedRedis {
  readonly external = true;
  readonly host: string;
  readonly port: number;
  private readonly clients = new ClientSet();

  constructor(readonly url: string) {
    const parsed = new URL(url);
    this.host = parsed.hostname;
    this.port = Number(parsed.port || 6379);
  }

  client(opts: RedisOptions = {}): Redis {
    return this.clients.add(new Redis(this.url, { ...HARNESS_CLIENT_DEFAULTS, ...opts }));
  }

  stop(): Promise<void> {
    return this.clients.closeAll();
  }
}

/** A foreground redis-server on `host:port` that keeps nothing on disk (its files, if any, go to `dir`). */
export function ephemeralServerArgs(port: number, host: string, dir: string): string[] {
  return ['--port', String(port), '--bind', host, '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--dir', dir];
}

function spawnRedis(port: number, extraArgs: readonly string[], config?: string, persistentDir?: string): Incarnation {
  // A fresh dir per process: "restarted empty" must mean empty even if some option enables persistence.
  const dir = persistentDir ?? fs.mkdtempSync(path.join(os.tmpdir(), `ndl-redis-${port}-`));
  const configFile: string[] = [];
  if (config !== undefined) {
    // redis-server only takes a config file as its first argument.
    configFile.push(path.join(dir, 'redis.conf'));
    fs.writeFileSync(configFile[0], config);
  }
  const args = [
    ...configFile,
    ...ephemeralServerArgs(port, HOST, dir),
    // DEBUG SLEEP is how the slow-Redis tests (T5) stall the server from inside.
    '--enable-debug-command',
    'local',
    ...(persistentDir ? ['--appendonly', 'yes', '--appendfsync', 'always'] : []),
    ...extraArgs,
  ];
  const child = spawn(redisServerBinary(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let resolveClosed!: (exit: ExitInfo) => void;
  const closed = new Promise<ExitInfo>((resolve) => (resolveClosed = resolve));
  const inc: Incarnation = { child, dir, output: '', closed };
  if (child.pid !== undefined) track(child.pid, `redis-server :${port}`);
  const append = (chunk: Buffer) => {
    inc.output = (inc.output + chunk.toString('utf8')).slice(-OUTPUT_LIMIT);
  };
  child.stdout?.on('data', append);
  child.stderr?.on('data', append);
  child.on('error', (err) => {
    inc.spawnError = err;
  });
  child.once('exit', (code, signal) => {
    inc.exit = { code, signal };
    if (child.pid !== undefined) untrack(child.pid);
  });
  // 'close' (not 'exit'): the stdio pipes are closed too, so nothing is left for --detectOpenHandles.
  child.once('close', (code, signal) => {
    inc.exit ??= { code, signal };
    // A persistent dir outlives the process (the next incarnation loads it); stop() removes it.
    if (!persistentDir) fs.rmSync(dir, { recursive: true, force: true });
    resolveClosed(inc.exit);
  });
  return inc;
}

async function stopIncarnation(inc: Incarnation): Promise<ExitInfo> {
  if (inc.spawnError && inc.child.pid === undefined) {
    fs.rmSync(inc.dir, { recursive: true, force: true });
    return { code: null, signal: null };
  }
  if (!inc.exit) {
    inc.child.kill('SIGTERM');
    // A SIGSTOPped server would hold SIGTERM until continued.
    inc.child.kill('SIGCONT');
  }
  const timer = setTimeout(() => {
    if (!inc.exit) inc.child.kill('SIGKILL');
  }, STOP_GRACE_MS);
  try {
    return await inc.closed;
  } finally {
    clearTimeout(timer);
  }
}

function describeExit(exit: ExitInfo): string {
  return exit.signal ? `signal ${exit.signal}` : `exit code ${exit.code}`;
}
