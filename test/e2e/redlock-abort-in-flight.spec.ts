/**
 * LockOptions.signal in Redlock mode (3 nodes) with node calls on the wire: every link slowed (TCP proxy delay) or
 * two nodes frozen (SIGSTOP), during a first attempt or a waiter's retry. The call must reject with the signal's
 * reason at the abort (not at the per-node bound), and what its node calls still do must be taken back on every
 * node, owner-checked: the grants they make after the abort are deleted, no place is left in any node's queue, and
 * another client can take the lock at once.
 *
 * Each case proves its fault: a frozen node answers no raw PING; a delayed attempt is seen sent (a spy on the store)
 * and its grants are seen on every node afterwards (the key's fencing token written).
 */
import { getEventListeners } from 'node:events';
import type Redis from 'ioredis';
import { LockService } from '../../lib';
import { lockRedisKeys } from '../../lib/redis/lock-redis-keys';
import { pingOnce } from '../harness/redis-ping';
import { RedlockNodes } from '../harness/redlock-nodes';
import { UnhandledRejections } from './workers/support/fault-helpers';
import { acquireOutcomesOf } from './workers/support/acquire-outcomes';
import { grantedAndGivenBack, lockKeyState } from './workers/support/lock-key-state';
import { SettleTracker } from './workers/support/settle-tracker';
import { hrMs, isAlive, pollUntil, sleep, timed, TimerLateness } from './workers/support/timing';

const PREFIX = 'ra:';
const COMMAND_TIMEOUT = 3_000;
const TTL = 10_000;
/** Per-node bound: min(commandTimeout, ttl / 10). An abort honoured only at this bound fails each case. */
const NODE_TIMEOUT = Math.min(COMMAND_TIMEOUT, TTL / 10);
const ABORT_AFTER = 50;
/** From the abort to the call's rejection: a few ms of callbacks, plus the time this process was measured stalled. */
const AT_ONCE = 20;
/** Proxy delay per direction on the slowed links. */
const DELAY = 250;

describe('Redlock: an abort while node calls of the acquisition are on the wire', () => {
  const calls = new SettleTracker();
  const services: LockService[] = [];
  const unhandled = new UnhandledRejections();
  let nodes: RedlockNodes;
  let clients: Redis[];
  let lateness: TimerLateness;

  beforeAll(async () => {
    unhandled.start();
    nodes = await RedlockNodes.start(3);
    clients = nodes.clients();
  });
  beforeEach(() => {
    lateness = new TimerLateness().start();
  });
  afterEach(async () => {
    lateness.stop();
    await nodes.heal();
    await Promise.all(services.splice(0).map((s) => s.close()));
    expect(calls.pending()).toEqual([]);
    expect(unhandled.seen).toEqual([]);
  });
  afterAll(async () => {
    await nodes.stop();
    await sleep(50);
    unhandled.stop();
    expect(unhandled.seen).toEqual([]);
  });

  async function makeService(urls: string[], options: Record<string, unknown> = {}): Promise<LockService> {
    const service = new LockService({
      nodes: urls,
      keyPrefix: PREFIX,
      nodeRecoveryDelay: 0,
      ttl: TTL,
      commandTimeout: COMMAND_TIMEOUT,
      shutdownTimeout: 1_000,
      ...options,
    });
    services.push(service);
    await service.onModuleInit();
    return service;
  }

  /** On every node: a grant was made on `key` (its fencing token is written), and nobody holds it or queues for it now. */
  async function givenBackEverywhere(key: string): Promise<boolean> {
    const states = await Promise.all(clients.map((c) => lockKeyState(c, PREFIX, key)));
    return states.every(grantedAndGivenBack);
  }

  const fencesOf = (key: string): Promise<number[]> => Promise.all(clients.map(async (c) => Number(await c.get(lockRedisKeys(PREFIX, key).fence))));

  function attemptsOf(service: LockService): { count: number } {
    const sent = { count: 0 };
    const store = service.engine.store;
    const acquire = store.acquire.bind(store);
    jest.spyOn(store, 'acquire').mockImplementation((...args) => {
      sent.count++;
      return acquire(...args);
    });
    return sent;
  }

  async function abortMidCall(label: string, call: (signal: AbortSignal) => Promise<unknown>, whenOnWire?: () => Promise<unknown>) {
    const controller = new AbortController();
    const reason = new Error(`${label}: the caller gave up`);
    const settled = timed(calls.track(label, call(controller.signal)));
    await (whenOnWire ? whenOnWire() : sleep(ABORT_AFTER));
    const abortedAt = performance.now();
    const abortedAtHr = hrMs();
    controller.abort(reason);
    const outcome = await settled;
    const afterAbortMs = outcome.settledPerf - abortedAt;
    console.log(`Redlock ${label}: rejected ${afterAbortMs.toFixed(1)} ms after the abort (per-node bound ${NODE_TIMEOUT} ms)`);
    expect(outcome.value).toBeUndefined();
    expect(outcome.error).toBe(reason);
    expect(afterAbortMs).toBeLessThan(AT_ONCE + lateness.stalledMs(abortedAt, outcome.settledPerf));
    expect(NODE_TIMEOUT).toBeGreaterThan(25 * AT_ONCE);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    return { abortedAtHr };
  }

  it('4a: every link slowed during the first attempt: rejects at the abort; the grants the attempt makes afterwards are deleted on every node', async () => {
    const locks = await makeService(nodes.urls);
    const outcomes = acquireOutcomesOf(locks);
    for (const p of nodes.proxies) p.setDelay(DELAY);
    const { abortedAtHr } = await abortMidCall('acquire over slow links', (signal) => locks.acquire('s', { signal }));
    expect(await pollUntil(() => givenBackEverywhere('s'), 4 * DELAY)).toBe(true);
    console.log(`4a: given back on every node ${(hrMs() - abortedAtHr).toFixed(0)} ms after the abort (TTL ${TTL} ms)`);
    const other = await makeService(nodes.directUrls);
    const lock = await other.tryAcquire('s');
    expect(lock).not.toBeNull();
    await lock!.release();
    // The attempt's late majority is not a lock: counted once, as aborted; nothing is watched.
    await sleep(2 * DELAY);
    expect(outcomes).toEqual(['aborted']);
    expect(locks.getStats()).toMatchObject({ acquired: 0, connectionErrors: 0 });
    expect(locks.engine.watchdog.health(performance.now()).leases).toBe(0);
  });

  it('4b: two of three nodes frozen during the first attempt: rejects at the abort; after the thaw nothing is left on any node', async () => {
    const locks = await makeService(nodes.directUrls);
    const outcomes = acquireOutcomesOf(locks);
    nodes.servers[0].pause();
    nodes.servers[1].pause();
    for (const n of [0, 1]) {
      expect(await pingOnce(nodes.servers[n].port, nodes.servers[n].host, 150)).toBe(false);
      expect(isAlive(nodes.servers[n].pid)).toBe(true);
    }
    await abortMidCall('acquire with 2 of 3 nodes frozen', (signal) => locks.acquire('f', { signal, waitTimeout: 20_000 }));
    nodes.servers[0].resume();
    nodes.servers[1].resume();
    // The frozen nodes run the attempt after the thaw (a grant each: with the live node's, a majority) and the
    // give-back behind it; whatever the attempt then sends on (a give-back keeping its place) is taken back too.
    expect(await pollUntil(() => givenBackEverywhere('f'), NODE_TIMEOUT)).toBe(true);
    const other = await makeService(nodes.directUrls);
    const lock = await other.tryAcquire('f');
    expect(lock).not.toBeNull();
    await lock!.release();
    expect(outcomes).toEqual(['aborted']);
    expect(locks.getStats()).toMatchObject({ acquired: 0, connectionErrors: 0 });
  });

  it('4d: two nodes frozen past the per-node bound: the give-back the attempt itself sends after the abort (keeping its place) is taken back too', async () => {
    const locks = await makeService(nodes.directUrls);
    const outcomes = acquireOutcomesOf(locks);
    nodes.servers[0].pause();
    nodes.servers[1].pause();
    expect(await pingOnce(nodes.servers[0].port, nodes.servers[0].host, 150)).toBe(false);
    await abortMidCall('acquire with 2 of 3 nodes frozen past the bound', (signal) => locks.acquire('p', { signal, waitTimeout: 20_000 }));
    // The attempt ends at the per-node bound with the live node's grant alone, after the abort's give-back ran there:
    // a waiter's attempt without a majority gives its grants back keeping its place (its ticket queued again). The
    // give-back sent once the attempt has settled removes that place.
    await sleep(NODE_TIMEOUT + 200);
    const live = lockRedisKeys(PREFIX, 'p');
    expect(await clients[2].get(live.fence)).not.toBeNull();
    // No place is left on the live node, where a release would hand the lock to a caller that is gone.
    expect(await pollUntil(async () => (await clients[2].exists(live.lock, live.queue, live.waiters)) === 0, 500)).toBe(true);
    nodes.servers[0].resume();
    nodes.servers[1].resume();
    expect(await pollUntil(() => givenBackEverywhere('p'), NODE_TIMEOUT)).toBe(true);
    expect(outcomes).toEqual(['aborted']);
    expect(locks.getStats()).toMatchObject({ acquired: 0, connectionErrors: 0 });
  });

  it('4c: waiting, a retry on every slowed link when the abort comes, handed the lock before it lands: rejects at the abort, freed on every node', async () => {
    const holder = await makeService(nodes.directUrls);
    const held = await holder.acquire('w');
    const locks = await makeService(nodes.urls, { waiterLease: 1_500 });
    const attempts = attemptsOf(locks);
    await abortMidCall(
      'retry over slow links',
      (signal) => locks.acquire('w', { signal, waitTimeout: 20_000 }),
      async () => {
        expect(await pollUntil(() => attempts.count >= 2 && locks.engine.wakeChannel.subscribed, 2_000)).toBe(true);
        await sleep(20);
        for (const p of nodes.proxies) p.setDelay(DELAY);
        const before = attempts.count;
        expect(await pollUntil(() => attempts.count > before, 2_000, 1)).toBe(true);
      },
    );
    // Every node hands the lock to the waiter (the head of its queue); the retries then find it theirs, and the
    // give-backs behind them free it.
    expect(await held.release()).toBe(true);
    expect(await pollUntil(() => givenBackEverywhere('w'), 4 * DELAY)).toBe(true);
    for (const fence of await fencesOf('w')) expect(fence).toBeGreaterThan(held.fencingToken);
    const other = await makeService(nodes.directUrls);
    const lock = await other.tryAcquire('w');
    expect(lock).not.toBeNull();
    await lock!.release();
    expect(locks.getStats()).toMatchObject({ acquired: 0, connectionErrors: 0 });
  });
});
