/**
 * The harness tests itself first: a fault helper that silently does nothing would make every fault
 * test pass for the wrong reason. Each case provokes the real effect and observes it from outside.
 */
import * as fs from 'fs';
import * as net from 'net';
import * as path from 'path';
import Redis, { RedisOptions } from 'ioredis';
import { checkHistory, Section } from '../harness/history';
import { closeClient } from '../harness/redis-clients';
import { killSurvivors, RedisProcess } from '../harness/redis-process';
import { TcpProxy } from '../harness/tcp-proxy';
import { startWorker, WorkerHandle } from '../harness/worker-process';
import { TimerLateness } from '../e2e/workers/support/timing';

const FIXTURES = path.join(__dirname, '..', 'harness', 'fixtures');

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Resolves with the socket error code of a raw connect ('connected' if it succeeded). */
function rawConnect(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** A failing harness must fail fast and say what it waited for, not hit jest's 60 s timeout. */
function within<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${timeoutMs} ms`)), timeoutMs);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function ms(startNs: bigint): number {
  return Number(process.hrtime.bigint() - startNs) / 1e6;
}

describe('RedisProcess', () => {
  let redis: RedisProcess;

  beforeAll(async () => {
    redis = await RedisProcess.start();
  });

  afterAll(async () => {
    await redis?.stop();
  });

  it('starts a private server on a free loopback port that answers PING', async () => {
    expect(redis.port).not.toBe(6379);
    expect(redis.host).toBe('127.0.0.1');
    expect(redis.url).toBe(`redis://127.0.0.1:${redis.port}`);
    expect(isAlive(redis.pid)).toBe(true);
    const client = redis.client();
    await expect(client.ping()).resolves.toBe('PONG');
    // The harness defaults really reached the server.
    expect(await client.config('GET', 'save')).toEqual(['save', '']);
    expect(await client.config('GET', 'appendonly')).toEqual(['appendonly', 'no']);
    expect(await client.call('DEBUG', 'SLEEP', '0')).toBe('OK');
  });

  it('pause() freezes the server until resume()', async () => {
    const client = redis.client({ commandTimeout: 300 });
    await expect(client.ping()).resolves.toBe('PONG');

    redis.pause();
    try {
      const t0 = process.hrtime.bigint();
      await expect(client.ping()).rejects.toThrow(/timed out/i);
      expect(ms(t0)).toBeGreaterThanOrEqual(290);
      // A raw connect still succeeds: the kernel completes the handshake for a stopped process.
      expect(await rawConnect(redis.port)).toBe('connected');
    } finally {
      redis.resume();
    }
    await expect(client.ping()).resolves.toBe('PONG');
  });

  it('kill9() refuses connections; restart() brings back an empty server on the same port', async () => {
    const client = redis.client();
    await client.set('harness:before-restart', '1');
    const port = redis.port;
    const oldPid = redis.pid;

    const exit = await redis.kill9();
    expect(exit.signal).toBe('SIGKILL');
    expect(isAlive(oldPid)).toBe(false);
    expect(await rawConnect(port)).toBe('ECONNREFUSED');

    await redis.restart();
    expect(redis.port).toBe(port);
    expect(redis.pid).not.toBe(oldPid);
    const fresh = redis.client();
    await expect(fresh.ping()).resolves.toBe('PONG');
    expect(await fresh.get('harness:before-restart')).toBeNull();
    expect(await fresh.dbsize()).toBe(0);
  });

  it('stop() leaves no process and no data dir behind, and is idempotent', async () => {
    const other = await RedisProcess.start();
    const pid = other.pid;
    const dir = other.dataDir;
    expect(fs.existsSync(dir)).toBe(true);
    const client = other.client();
    await client.ping();
    await other.stop();
    await other.stop();
    expect(() => process.kill(pid, 0)).toThrow();
    expect(fs.existsSync(dir)).toBe(false);
    expect(client.status).toBe('end');
    expect(await rawConnect(other.port)).toBe('ECONNREFUSED');
  });

  it('stop() also ends a paused server', async () => {
    const other = await RedisProcess.start();
    const pid = other.pid;
    other.pause();
    const t0 = process.hrtime.bigint();
    await other.stop();
    expect(isAlive(pid)).toBe(false);
    // SIGCONT after SIGTERM lets it shut down at once instead of waiting for the 3 s SIGKILL.
    expect(ms(t0)).toBeLessThan(2_000);
  });

  it('a server that cannot start fails fast with its own output in the error', async () => {
    await expect(RedisProcess.start({ args: ['--no-such-directive', 'x'] })).rejects.toThrow(/did not start[\s\S]*no-such-directive/i);
  });

  it('a port held by another server is not mistaken for ours (the PONG must come from our pid)', async () => {
    // Without the pid check, start() resolved on the OTHER server's PONG while ours was still
    // failing to bind, and a slow one could bind later and leak.
    await expect(RedisProcess.start({ port: redis.port })).rejects.toThrow(/Address already in use/);
    await expect(redis.client().ping()).resolves.toBe('PONG');
  });

  it('shared() starts a server unless REDIS_URL names one, which it never stops', async () => {
    const saved = process.env.REDIS_URL;
    try {
      delete process.env.REDIS_URL;
      const own = await RedisProcess.shared();
      expect(own.external).toBe(false);
      await expect(own.client().ping()).resolves.toBe('PONG');
      await own.stop();
      expect(await rawConnect(own.port)).toBe('ECONNREFUSED');

      process.env.REDIS_URL = redis.url;
      const ext = await RedisProcess.shared();
      expect(ext.external).toBe(true);
      expect(ext.url).toBe(redis.url);
      const c = ext.client();
      await expect(c.ping()).resolves.toBe('PONG');
      await ext.stop();
      expect(c.status).toBe('end');
      await expect(redis.client().ping()).resolves.toBe('PONG');
    } finally {
      if (saved === undefined) delete process.env.REDIS_URL;
      else process.env.REDIS_URL = saved;
    }
  });
});

describe('startWorker', () => {
  const workers: WorkerHandle[] = [];
  const track = (w: WorkerHandle) => (workers.push(w), w);

  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
  });

  it('runs a .ts worker and parses its JSON lines, stamped on the same monotonic clock', async () => {
    const before = process.hrtime.bigint();
    const w = track(startWorker(path.join(FIXTURES, 'emit-three.worker.ts')));
    const exit = await w.exited;
    const after = process.hrtime.bigint();

    expect(exit).toEqual({ code: 0, signal: null });
    expect(w.lines.map((l) => l.n)).toEqual([1, 2, 3]);
    expect(w.lines[0].pid).toBe(w.pid);
    expect(w.stdoutText).toBe('not json\n');
    for (const line of w.lines) {
      expect(BigInt(line.at)).toBeGreaterThan(before);
      expect(BigInt(line.at)).toBeLessThan(after);
    }
    await expect(w.waitFor((l) => l.n === 2, 10)).resolves.toMatchObject({ n: 2 });
  });

  it('pause() stops its output and resume() continues it; send() reaches it over IPC', async () => {
    const w = track(startWorker(path.join(FIXTURES, 'ticker.worker.ts')));
    await w.waitFor((l) => l.tick === 3, 5_000);

    w.pause();
    await sleep(60); // a line written just before the signal may still be in the pipe
    const frozenAt = w.lines.length;
    await sleep(300); // ~15 ticks if it were running
    expect(w.lines.length).toBe(frozenAt);

    w.resume();
    await w.waitFor((_l, i) => i >= frozenAt + 3, 2_000);

    await w.send({ stop: true });
    await w.waitFor((l) => l.got?.stop === true, 2_000);
    expect(await w.exited).toEqual({ code: 0, signal: null });
  });

  it('kill9() kills it, and waitFor rejects instead of waiting for a dead worker', async () => {
    const w = track(startWorker(path.join(FIXTURES, 'ticker.worker.ts')));
    await w.waitFor((l) => l.tick === 1, 5_000);
    const pending = w.waitFor((l) => l.never === true, 10_000);
    expect(await w.kill9()).toEqual({ code: null, signal: 'SIGKILL' });
    await expect(pending).rejects.toThrow(/exited \(signal SIGKILL\)/);
    expect(isAlive(w.pid)).toBe(false);
  });

  it('waitFor rejects with the worker stderr when it crashes or times out', async () => {
    const crash = track(startWorker(path.join(FIXTURES, 'crash.worker.ts')));
    await expect(crash.waitFor(() => true, 5_000)).rejects.toThrow(/boom: the worker failed on purpose/);
    expect((await crash.exited).code).toBe(3);

    const ticker = track(startWorker(path.join(FIXTURES, 'ticker.worker.ts')));
    await expect(ticker.waitFor((l) => l.never === true, 100)).rejects.toThrow(/no matching line within 100 ms/);
  });

  it('stop() ends a paused worker', async () => {
    const w = track(startWorker(path.join(FIXTURES, 'ticker.worker.ts')));
    await w.waitFor((l) => l.tick === 0, 5_000);
    w.pause();
    const exit = await w.stop();
    expect(exit.signal).toBe('SIGTERM');
    expect(isAlive(w.pid)).toBe(false);
  });
});

describe('checkHistory', () => {
  let seq = 0;
  const sec = (key: string, enterAt: number, exitAt: number, fence?: number): Section => ({
    worker: seq++,
    key,
    enterAt: String(enterAt),
    exitAt: String(exitAt),
    fence,
  });

  it('disjoint and touching sections are fine', () => {
    const r = checkHistory([sec('k', 30, 40, 3), sec('k', 0, 10, 1), sec('k', 10, 20, 2)]);
    expect(r).toEqual({ sections: 3, overlaps: [], fenceViolations: [] });
  });

  it('one interleaving is one overlap', () => {
    const a = sec('k', 0, 10);
    const b = sec('k', 5, 15);
    const r = checkHistory([b, a, sec('k', 20, 30)]);
    expect(r.overlaps).toEqual([{ key: 'k', a, b }]);
  });

  it('a section inside a long earlier one is caught even with others between them', () => {
    const long = sec('k', 0, 1_000);
    const nested = sec('k', 500, 600);
    const r = checkHistory([long, sec('k', 100, 200), sec('k', 300, 400), nested]);
    expect(r.overlaps).toHaveLength(3);
    expect(r.overlaps).toContainEqual({ key: 'k', a: long, b: nested });
  });

  it('compares stamps as bigints, not as strings or doubles', () => {
    // As strings '9' > '10'; as doubles these two nanosecond stamps are equal.
    const r1 = checkHistory([sec('k', 9, 10), sec('k', 10, 11)]);
    expect(r1.overlaps).toEqual([]);
    const base = 2n ** 60n;
    const r2 = checkHistory([
      { worker: 1, key: 'k', enterAt: String(base), exitAt: String(base + 2n) },
      { worker: 2, key: 'k', enterAt: String(base + 1n), exitAt: String(base + 3n) },
    ]);
    expect(r2.overlaps).toHaveLength(1);
  });

  it('fences must strictly increase in enter order', () => {
    const r = checkHistory([sec('k', 0, 10, 5), sec('k', 20, 30, 4), sec('k', 40, 50, 6), sec('k', 60, 70, 6)]);
    expect(r.overlaps).toEqual([]);
    expect(r.fenceViolations.map((v) => [v.a.fence, v.b.fence])).toEqual([
      [5, 4],
      [6, 6],
    ]);
    expect(checkHistory([sec('k', 0, 1, '9' as unknown as number), sec('k', 2, 3, '10' as unknown as number)]).fenceViolations).toEqual([]);
  });

  it('different keys never overlap each other', () => {
    const r = checkHistory([sec('a', 0, 100, 1), sec('b', 50, 150, 1), sec('c', 10, 20, 1)]);
    expect(r).toEqual({ sections: 3, overlaps: [], fenceViolations: [] });
  });

  it('rejects malformed stamps instead of passing them', () => {
    expect(() => checkHistory([sec('k', 10, 5)])).toThrow(/exits .* before it enters/);
    expect(() => checkHistory([{ worker: 1, key: 'k', enterAt: 'x', exitAt: '1' }])).toThrow(/enterAt/);
  });
});

describe('TcpProxy', () => {
  let redis: RedisProcess;
  let proxy: TcpProxy;

  beforeAll(async () => {
    redis = await RedisProcess.start();
  });

  beforeEach(async () => {
    proxy = await TcpProxy.start(redis.port);
  });

  const proxyClients: Redis[] = [];

  afterEach(async () => {
    // Before the proxy goes, or they would keep reconnecting to a closed port until afterAll.
    await Promise.all(proxyClients.splice(0).map(closeClient));
    await proxy?.stop();
  });

  afterAll(async () => {
    await redis?.stop();
  });

  const viaProxy = (extra: RedisOptions = {}): Redis => {
    const client = redis.client({ port: proxy.port, ...extra });
    proxyClients.push(client);
    return client;
  };

  it('forwards traffic', async () => {
    const client = viaProxy();
    await expect(client.ping()).resolves.toBe('PONG');
    await client.set('through-proxy', 'yes');
    expect(await redis.client().get('through-proxy')).toBe('yes');
    expect(proxy.connections).toBeGreaterThanOrEqual(1);
  });

  it('setDelay(200) delays each direction by 200 ms', async () => {
    const client = viaProxy();
    await client.ping();
    proxy.setDelay(200);
    const t0 = process.hrtime.bigint();
    await expect(client.ping()).resolves.toBe('PONG');
    // Request and reply are each held 200 ms (Date.now()-based timers: allow 1 ms rounding per hop).
    expect(ms(t0)).toBeGreaterThanOrEqual(398);
    proxy.setDelay(0);
    const lateness = new TimerLateness().start();
    const t1 = performance.now();
    await client.ping();
    const t2 = performance.now();
    lateness.stop();
    // Not held back any more (it would take 400 ms); plus the time this process was stalled meanwhile.
    expect(t2 - t1).toBeLessThan(lateness.boundFor({ startedPerf: t1, settledPerf: t2 }, 0, 100));
  });

  it('keeps order when the delay drops while chunks are queued', async () => {
    const client = viaProxy();
    await client.ping();
    proxy.setDelay(150);
    const first = client.echo('first');
    await sleep(20);
    proxy.setDelay(0);
    const second = client.echo('second');
    await expect(Promise.all([first, second])).resolves.toEqual(['first', 'second']);
  });

  it('blackhole makes a 300 ms PING fail; lifting it resets tainted connections so replies never mismatch', async () => {
    const client = viaProxy({ commandTimeout: 300 });
    await client.ping();
    proxy.blackhole(true);
    const t0 = process.hrtime.bigint();
    await expect(client.ping()).rejects.toThrow(/timed out/i);
    expect(ms(t0)).toBeGreaterThanOrEqual(290);

    const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
    proxy.blackhole(false);
    await within(closed, 2_000, 'client close event');
    // ioredis reconnects through the healed proxy and a fresh command gets its own reply.
    await expect(client.echo('after-heal')).resolves.toBe('after-heal');
  });

  it('resetAll() sends RST: the client sees ECONNRESET and a close', async () => {
    // No reconnect, so the connection count below cannot race with a new connection.
    const client = viaProxy({ retryStrategy: () => null });
    await client.ping();
    const errors: string[] = [];
    client.on('error', (err: NodeJS.ErrnoException) => errors.push(err.code ?? err.message));
    const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
    proxy.resetAll();
    await within(closed, 2_000, 'client close event');
    expect(errors).toContain('ECONNRESET');
    expect(proxy.connections).toBe(0);
  });

  it('stop() closes the listener and every connection', async () => {
    const client = viaProxy({ retryStrategy: () => null });
    await client.ping();
    const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
    await proxy.stop();
    await within(closed, 2_000, 'client close event');
    expect(proxy.connections).toBe(0);
    expect(await rawConnect(proxy.port)).toBe('ECONNREFUSED');
  });
});

// Last root-level hook, so it runs after every describe's own cleanup: anything still alive leaked.
afterAll(() => {
  expect(killSurvivors()).toEqual([]);
});

describe('TimerLateness', () => {
  const block = (ms: number) => {
    const until = performance.now() + ms;
    while (performance.now() < until) {
      /* the event loop is held, as a loaded machine holds it */
    }
  };
  const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 20));

  it('counts a stall inside the window, and only the part of it inside the window', async () => {
    const lateness = new TimerLateness().start();
    await tick();
    const blockStart = performance.now();
    block(300);
    const blockEnd = performance.now();
    await tick();
    const afterStart = performance.now();
    await new Promise<void>((resolve) => setTimeout(resolve, 100));
    const afterEnd = performance.now();
    lateness.stop();
    expect(lateness.stalledMs(blockStart - 5, blockEnd + 5)).toBeGreaterThanOrEqual(290);
    // A window that starts after the block: the block held it up not at all (counted whole it read 304.5 ms). The
    // window's own lateness on a loaded machine (its 100 ms timer came late: 90 ms once beside the other test lane) is
    // a real stall inside it, and counts.
    const windowLate = Math.max(0, afterEnd - afterStart - 100);
    expect(lateness.stalledMs(afterStart, afterEnd)).toBeLessThan(50 + windowLate);
    // Half of the block inside the window: about half counted.
    const half = lateness.stalledMs(blockStart + 150, afterEnd);
    expect(half).toBeGreaterThanOrEqual(140);
    expect(half).toBeLessThan(200);
  });

  it('stops counting at stop(): a later question about the last window does not grow with the wait', async () => {
    const lateness = new TimerLateness().start();
    const from = performance.now();
    await new Promise<void>((resolve) => setTimeout(resolve, 50));
    lateness.stop();
    const to = performance.now();
    const atStop = lateness.stalledMs(from, to + 1_000);
    await new Promise<void>((resolve) => setTimeout(resolve, 300));
    expect(lateness.stalledMs(from, to + 1_000)).toBe(atStop);
    expect(atStop).toBeLessThan(50);
  });
});
