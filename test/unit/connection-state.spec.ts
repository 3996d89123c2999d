/**
 * Errors and log lines about the connection say what is true and what to do, never ioredis'
 * internals ("Stream isn't writeable and enableOfflineQueue options is false"):
 * - a call made while the first connection is being established waits for it (same commandTimeout bound);
 * - a Redis never reached is "not reachable" with the address and the system's reason;
 * - a call while a lost connection is being re-established fails at once, saying so.
 */
import { LockConnectionError, LockService } from '../../lib';
import { freePort } from '../harness/free-port';
import { RedisProcess } from '../harness/redis-process';
import { TimerLateness } from '../e2e/workers/support/timing';
import { sleep } from './core-helpers';

const IOREDIS_INTERNALS = /enableOfflineQueue|Stream isn't writeable|maxRetriesPerRequest|max retries per request|Connection is closed/;

/** Every line the service logs, as `level: message`. */
function captureLogs(service: LockService): string[] {
  const lines: string[] = [];
  for (const level of ['log', 'warn', 'error', 'debug'] as const) {
    service.engine.logger[level] = (message: unknown) => void lines.push(`${level}: ${String(message)}`);
  }
  return lines;
}

async function until(what: string, check: () => boolean, timeoutMs = 5_000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; !check(); await sleep(10)) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
  }
}

describe('connection state in errors and logs', () => {
  let redis: RedisProcess;
  const services: LockService[] = [];
  const make = (url: string, commandTimeout = 2_000) => {
    const service = new LockService({ redis: url, keyPrefix: 'test:', commandTimeout });
    services.push(service);
    return service;
  };

  beforeAll(async () => (redis = await RedisProcess.start()));
  afterEach(async () => void (await Promise.all(services.splice(0).map((s) => s.close()))));
  afterAll(() => redis.stop());

  it('a connection ioredis gives up for good (status end, as after a +switch-master that closes a reconnect attempt) is opened again; close() ends it for good', async () => {
    const locks = make(redis.url, 500);
    await locks.onModuleInit();
    const client = (locks.engine.store as unknown as { client: { status: string; disconnect(): void } }).client;
    expect(client.status).toBe('ready');
    client.disconnect(); // what ioredis does itself when a connect attempt fails in a way it does not retry
    await until('the client to end', () => client.status === 'end');
    const meanwhile = await locks.acquire('ended:1').catch((e: unknown) => e);
    expect(meanwhile).toBeInstanceOf(LockConnectionError); // fails fast while it is down, saying it comes back
    expect((meanwhile as Error).message).toMatch(/was lost.*being re-established/);
    await until('the client to be opened again', () => client.status === 'ready', 3_000);
    const lock = await locks.acquire('ended:1');
    expect(await lock.release()).toBe(true);
    await locks.close();
    expect(client.status).toBe('end');
    await sleep(800); // past the reopen delay: closed on purpose stays closed
    expect(client.status).toBe('end');
  });

  it('outside Nest (no onModuleInit), the first calls wait for the connection instead of failing', async () => {
    const locks = make(redis.url);
    const [lock, locked] = await Promise.all([locks.acquire('first:1'), locks.isLocked('first:2')]);
    expect(lock.isHeld()).toBe(true);
    expect(locked).toBe(false);
    expect(await lock.release()).toBe(true);
  });

  it('a call made while Redis is still starting waits for it (within commandTimeout), then succeeds', async () => {
    const port = await freePort();
    const locks = make(`redis://127.0.0.1:${port}`, 5_000);
    const pending = locks.acquire('late:1');
    await sleep(300); // the first connection attempts are refused meanwhile
    const late = await RedisProcess.start({ port });
    try {
      const lock = await pending;
      expect(lock.isHeld()).toBe(true);
      expect(await lock.release()).toBe(true);
    } finally {
      await locks.close();
      await late.stop();
    }
  });

  it('a Redis never reached: LockConnectionError naming the address and the reason, within commandTimeout; logged as "not reachable"', async () => {
    const port = await freePort();
    const locks = make(`redis://127.0.0.1:${port}`, 300);
    const logs = captureLogs(locks);
    const lateness = new TimerLateness().start();
    const started = performance.now();
    const error = await locks.acquire('nowhere:1').catch((e: unknown) => e);
    const settled = performance.now();
    lateness.stop();
    const elapsed = settled - started;
    expect(error).toBeInstanceOf(LockConnectionError);
    const { message } = error as Error;
    expect(message).toContain(`Redis at 127.0.0.1:${port} is not reachable`);
    expect(message).toContain('ECONNREFUSED');
    expect(message).not.toMatch(IOREDIS_INTERNALS);
    // Plus the time this process was stalled meanwhile (a loaded CI machine fired a timer 246 ms late).
    expect(elapsed).toBeLessThan(lateness.boundFor({ startedPerf: started, settledPerf: settled }, 300, 200));
    await until('the log line', () => logs.length > 0);
    expect(logs[0]).toMatch(
      new RegExp(`^warn: Redis at 127\\.0\\.0\\.1:${port} is not reachable \\(connect ECONNREFUSED 127\\.0\\.0\\.1:${port}\\)`),
    );
    expect(logs.join('\n')).not.toMatch(/connection lost/);
  });

  it('a connection lost after it worked: calls fail at once saying it is being re-established; logged as "lost", then "back"', async () => {
    const locks = make(redis.url);
    const logs = captureLogs(locks);
    await locks.onModuleInit();
    await (await locks.acquire('lost:1')).release();
    await redis.kill9();
    try {
      await until('the loss to be noticed', () => logs.length > 0);
      expect(logs[0]).toMatch(new RegExp(`^warn: Redis connection to 127\\.0\\.0\\.1:${redis.port} lost \\(`));
      expect(logs.join('\n')).not.toMatch(/not reachable/);
      const started = performance.now();
      const error = await locks.acquire('lost:2').catch((e: unknown) => e);
      // At once, not after commandTimeout (2 s); half of it leaves a loaded machine's stalls (100-300 ms) apart.
      expect(performance.now() - started).toBeLessThan(1_000);
      expect(error).toBeInstanceOf(LockConnectionError);
      const { message } = error as Error;
      expect(message).toContain(`connection to Redis at 127.0.0.1:${redis.port} was lost`);
      expect(message).toMatch(/being re-established/);
      expect(message).not.toMatch(IOREDIS_INTERNALS);
    } finally {
      await redis.restart();
    }
    await until('the connection to come back', () => logs.some((line) => /^log: Redis connection to .* is back\.$/.test(line)));
    const lock = await locks.acquire('lost:3');
    expect(await lock.release()).toBe(true);
  });
});
