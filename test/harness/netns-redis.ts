/**
 * A redis-server in a network namespace of its own, reached from the test process over a veth pair,
 * so iptables rules inside that namespace cut exactly this server's traffic: a real partition (DROP:
 * packets vanish, TCP retransmits into the void; REJECT: the peer answers with a reset), with no
 * rule in the host's own tables and no effect on any other test's servers.
 *
 * Needs root, `ip` (iproute2) and `iptables`: netnsUnavailable() says what is missing. Addresses come
 * from 198.18.0.0/15, the block reserved for network benchmark tests (RFC 2544): never a real network.
 * The namespace and both ends of the veth pair disappear with `ip netns del` in stop().
 */
import { ChildProcess, execFile, spawn } from 'child_process';
import { randomBytes } from 'crypto';
import * as fs from 'fs';
import Redis from 'ioredis';
import * as os from 'os';
import * as path from 'path';
import { promisify } from 'util';
import { track, untrack } from './reaper';
import { ClientSet, HARNESS_CLIENT_DEFAULTS } from './redis-clients';
import { waitForPing } from './redis-ping';
import { ephemeralServerArgs } from './redis-process';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { findRedisServer } = require('../../scripts/ensure-redis.js') as { findRedisServer: () => string | null };

const run = promisify(execFile);
const SBIN = ['/usr/sbin', '/sbin', '/usr/bin', '/bin', '/usr/local/sbin'];
const NS_PREFIX = 'ndl-';
const PORT = 6390;

/** Absolute path of an executable on PATH or in the sbin directories, or undefined. */
export function findTool(name: string): string | undefined {
  const dirs = (process.env.PATH ?? '').split(path.delimiter).filter(Boolean).concat(SBIN);
  for (const dir of dirs) {
    const file = path.join(dir, name);
    try {
      fs.accessSync(file, fs.constants.X_OK);
      if (fs.statSync(file).isFile()) return file;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** Why a namespaced Redis cannot be set up here (printed by the suite that skips), or undefined. */
export function netnsUnavailable(): string | undefined {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return 'not root (network namespaces and iptables need it)';
  const missing = ['ip', 'iptables'].filter((tool) => !findTool(tool));
  if (missing.length)
    return `${missing.join(' and ')} not installed (apt-get install -y ${missing.map((t) => (t === 'ip' ? 'iproute2' : t)).join(' ')})`;
  return undefined;
}

async function ip(...args: string[]): Promise<string> {
  return (await run(findTool('ip')!, args, { timeout: 10_000 })).stdout;
}

/** Deletes namespaces an earlier run of this harness left behind (its process died before stop()). */
async function sweepStaleNamespaces(): Promise<void> {
  const list = await ip('netns', 'list');
  for (const line of list.split('\n')) {
    const name = line.split(' ')[0];
    const pid = Number(/^ndl-(\d+)-/.exec(name)?.[1]);
    if (!pid) continue;
    try {
      process.kill(pid, 0);
    } catch {
      await ip('netns', 'del', name).catch(() => undefined);
    }
  }
}

export type PartitionMode = 'DROP' | 'REJECT';

export class NetnsRedis {
  private readonly clients = new ClientSet();
  private child?: ChildProcess;
  private closed?: Promise<void>;
  private dir?: string;
  private stopping?: Promise<void>;
  readonly port = PORT;

  private constructor(
    /** Network namespace the server runs in. */
    readonly ns: string,
    /** The server's address (the namespace end of the veth pair). */
    readonly host: string,
  ) {}

  get url(): string {
    return `redis://${this.host}:${this.port}`;
  }

  get pid(): number {
    return this.child!.pid!;
  }

  /** Creates the namespace and veth pair, starts redis-server inside, resolves once it answers PING through the veth. */
  static async start(): Promise<NetnsRedis> {
    await sweepStaleNamespaces();
    const id = randomBytes(3).toString('hex');
    const ns = `${NS_PREFIX}${process.pid}-${id}`;
    const [hostIf, nsIf] = [`nd${id}h`, `nd${id}n`];
    // A free /30 of 198.18.0.0/15: .1 on the host end, .2 (the server) in the namespace.
    const taken = await ip('-4', '-o', 'addr');
    let base = '';
    for (let i = 0; i < 20 && !base; i++) {
      const b = randomBytes(2);
      const candidate = `198.${18 + (b[0] & 1)}.${b[1]}.${(randomBytes(1)[0] & 0x3f) * 4}`;
      if (!taken.includes(candidate.split('.').slice(0, 3).join('.') + '.')) base = candidate;
    }
    if (!base) throw new Error('no free /30 in 198.18.0.0/15 for the test namespace');
    const [a, b, c, d] = base.split('.').map(Number);
    const hostAddr = `${a}.${b}.${c}.${d + 1}`;
    const nsAddr = `${a}.${b}.${c}.${d + 2}`;
    const redis = new NetnsRedis(ns, nsAddr);
    try {
      await ip('netns', 'add', ns);
      await ip('link', 'add', hostIf, 'type', 'veth', 'peer', 'name', nsIf);
      await ip('link', 'set', nsIf, 'netns', ns);
      await ip('addr', 'add', `${hostAddr}/30`, 'dev', hostIf);
      await ip('link', 'set', hostIf, 'up');
      await ip('-n', ns, 'addr', 'add', `${nsAddr}/30`, 'dev', nsIf);
      await ip('-n', ns, 'link', 'set', nsIf, 'up');
      await ip('-n', ns, 'link', 'set', 'lo', 'up');
      await redis.spawn();
      return redis;
    } catch (error) {
      await redis.stop();
      // The host end of the pair goes with the namespace, unless the pair never got that far.
      await ip('link', 'del', hostIf).catch(() => undefined);
      throw error;
    }
  }

  /** An ioredis client to the server (through the veth), disconnected by stop(). */
  client(): Redis {
    return this.clients.add(new Redis({ host: this.host, port: this.port, ...HARNESS_CLIENT_DEFAULTS }));
  }

  /**
   * Cuts every TCP connection to the server except `spared`'s (a connected client the test keeps
   * watching the keys with): DROP (silence: packets vanish) or REJECT (a TCP reset answers each).
   */
  async partition(mode: PartitionMode, spared: Redis): Promise<void> {
    const sparedPort = spared.stream?.localPort;
    if (!sparedPort || spared.status !== 'ready') throw new Error('the spared client must be connected');
    const target = mode === 'DROP' ? ['DROP'] : ['REJECT', '--reject-with', 'tcp-reset'];
    await this.iptables('-A', 'INPUT', '-p', 'tcp', '--dport', String(this.port), '!', '--sport', String(sparedPort), '-j', ...target);
  }

  /** Removes every rule: the network is whole again. */
  async heal(): Promise<void> {
    await this.iptables('-F', 'INPUT');
  }

  /** The packet counters of the partition rules (proof that they matched something). */
  async droppedPackets(): Promise<number> {
    const out = await this.iptables('-L', 'INPUT', '-v', '-x', '-n');
    return out
      .split('\n')
      .filter((l) => /\b(DROP|REJECT)\b/.test(l))
      .reduce((sum, l) => sum + Number(l.trim().split(/\s+/)[0]), 0);
  }

  /** Stops the server (SIGTERM, SIGKILL after 3 s) and deletes the namespace with its veth pair and rules. Idempotent. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      await this.clients.closeAll();
      if (this.child && this.child.exitCode === null && this.child.signalCode === null) {
        this.child.kill('SIGTERM');
        const timer = setTimeout(() => this.child?.kill('SIGKILL'), 3_000);
        await this.closed;
        clearTimeout(timer);
      } else {
        await this.closed;
      }
      await ip('netns', 'del', this.ns).catch(() => undefined);
    })();
    return this.stopping;
  }

  private async iptables(...args: string[]): Promise<string> {
    return (await run(findTool('ip')!, ['netns', 'exec', this.ns, findTool('iptables')!, ...args], { timeout: 10_000 })).stdout;
  }

  private async spawn(): Promise<void> {
    const bin = findRedisServer();
    if (!bin) throw new Error('redis-server is not installed');
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), `ndl-netns-redis-`));
    const args = [...ephemeralServerArgs(this.port, this.host, this.dir), '--protected-mode', 'no'];
    // `ip netns exec` execs redis-server in place: the child's pid is the server's.
    const child = spawn(findTool('ip')!, ['netns', 'exec', this.ns, bin, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    let output = '';
    let exit: string | undefined;
    const append = (chunk: Buffer) => (output = (output + chunk.toString('utf8')).slice(-16_384));
    child.stdout?.on('data', append);
    child.stderr?.on('data', append);
    if (child.pid !== undefined) track(child.pid, `redis-server in netns ${this.ns}`);
    child.once('exit', (code, signal) => {
      exit = signal ?? `exit code ${code}`;
      if (child.pid !== undefined) untrack(child.pid);
    });
    const dir = this.dir;
    this.closed = new Promise<void>((resolve) =>
      child.once('close', () => {
        fs.rmSync(dir, { recursive: true, force: true });
        resolve();
      }),
    );
    try {
      await waitForPing(this.port, this.host, 10_000, () => (exit ? `redis-server exited (${exit})` : undefined), child.pid);
    } catch (error) {
      throw new Error(`redis-server in netns ${this.ns} did not start: ${(error as Error).message}\n${output}`);
    }
  }
}
