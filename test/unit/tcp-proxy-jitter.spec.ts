/**
 * The proxy's jitter (T12): a random delay per chunk, drawn separately for every connection and
 * direction, must keep byte order within a connection (or Redis replies would be matched to the
 * wrong commands) and must reorder traffic across connections (or it would prove nothing). The
 * subscriber delay must slow pub/sub messages only.
 */
import Redis from 'ioredis';
import { closeClient } from '../harness/redis-clients';
import { killSurvivors, RedisProcess } from '../harness/redis-process';
import { TcpProxy } from '../harness/tcp-proxy';
import { TimerLateness } from '../e2e/workers/support/timing';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const hrMs = (): number => Number(process.hrtime.bigint()) / 1e6;

describe('TcpProxy jitter', () => {
  let redis: RedisProcess;
  let proxy: TcpProxy;
  const clients: Redis[] = [];

  beforeAll(async () => {
    redis = await RedisProcess.start();
  });

  beforeEach(async () => {
    proxy = await TcpProxy.start(redis.port);
  });

  afterEach(async () => {
    await Promise.all(clients.splice(0).map(closeClient));
    await proxy.stop();
  });

  afterAll(async () => {
    await redis.stop();
  });

  const viaProxy = (): Redis => {
    const client = redis.client({ port: proxy.port });
    clients.push(client);
    return client;
  };

  it('keeps every reply in order on one connection while chunks get random delays', async () => {
    const client = viaProxy();
    await client.ping();
    proxy.setJitter(15);
    // Sent one by one (separate chunks, each with its own delay), not as one pipeline write.
    const replies: Array<Promise<string>> = [];
    for (let i = 0; i < 200; i++) {
      replies.push(client.echo(`m${i}`));
      if (i % 10 === 0) await sleep(1);
    }
    expect(await Promise.all(replies)).toEqual(Array.from({ length: 200 }, (_, i) => `m${i}`));
    const stats = proxy.stats();
    expect(stats.maxAddedMs).toBeLessThan(15 + 1);
    expect(stats.addedMs / stats.chunks).toBeGreaterThan(2);
  });

  it('reorders traffic across connections: a chunk that arrived later on one connection often leaves first', async () => {
    const a = viaProxy();
    const b = viaProxy();
    await Promise.all([a.ping(), b.ping()]);
    proxy.setJitter(15);
    const before = proxy.stats().overtaken;
    // One command per millisecond, alternating: each its own chunk, arriving in a known order.
    const replies: Array<Promise<string>> = [];
    for (let i = 0; i < 60; i++) {
      replies.push((i % 2 ? a : b).echo(String(i)));
      await sleep(1);
    }
    await Promise.all(replies);
    expect(proxy.stats().overtaken - before).toBeGreaterThan(10);
  });

  it('the subscriber delay holds back pub/sub messages only, not the replies on the command connection', async () => {
    const command = viaProxy();
    const subscriber = viaProxy();
    await subscriber.subscribe('ch');
    expect(proxy.stats().subscribers).toBe(1);
    proxy.setSubscriberDelay(300);
    const received = new Promise<number>((resolve) => subscriber.once('message', () => resolve(hrMs())));
    const sent = hrMs();
    // Published on a direct connection: only the subscriber's side of the proxy is slowed.
    await redis.client().publish('ch', 'hello');
    const lateness = new TimerLateness().start();
    const pingStarted = performance.now();
    await command.ping();
    const pingEnded = performance.now();
    lateness.stop();
    // Not held back (that would be 300 ms); plus the time this process was stalled meanwhile.
    expect(pingEnded - pingStarted).toBeLessThan(lateness.boundFor({ startedPerf: pingStarted, settledPerf: pingEnded }, 0, 100));
    expect((await received) - sent).toBeGreaterThanOrEqual(295);
  });
});

afterAll(() => {
  expect(killSurvivors()).toEqual([]);
});
