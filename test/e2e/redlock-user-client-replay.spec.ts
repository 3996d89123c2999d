/**
 * Redlock with a client you pass for one node: ioredis' defaults send the commands in flight again after a reconnect
 * (`autoResendUnfulfilledCommands`; with `maxRetriesPerRequest: null`, BullMQ's setting, at any later reconnect).
 * An acquire that node had not answered when it died was replayed on the restarted node after the acquisition was
 * over (its lock released, or the acquire failed), and the clean-up sent to that node then had been refused while the
 * connection was down: the key stayed held there for the whole ttl by a token nobody uses. A minority, so exclusion
 * held, but with one more node stopped every acquire of that key failed (1 of the 2 live nodes busy). Now the
 * replay's late reply is answered by an owner-checked give-back on that node; a lock still held keeps that node's
 * grant (the control: it is the holder's, and it counts).
 *
 * Each case proves its fault: the restarted node (empty when it started) has the key's fencing token, which only a
 * grant writes, and ran the acquire script.
 */
import Redis, { type RedisOptions } from 'ioredis';
import { Lock, LockConnectionError, LockService } from '../../lib';
import { lockRedisKeys } from '../../lib/redis/lock-redis-keys';
import { commandStats } from '../harness/command-stats';
import { closeClient } from '../harness/redis-clients';
import { grantedAndGivenBack, lockKeyState } from './workers/support/lock-key-state';
import { redlockSuite } from './workers/support/redlock-suite';
import { pollUntil, sleep, sleepUntil } from './workers/support/timing';

const PREFIX = 'ru:';
const COMMAND_TIMEOUT = 300;
/** Long enough that a key left held for it outlives every check below by far. */
const TTL = 20_000;
/** Per-node bound: min(commandTimeout, ttl / 10). */
const NODE_TIMEOUT = Math.min(COMMAND_TIMEOUT, TTL / 10);
/** How long the give-back may take once the node is back: one round trip after the replay's, with CI lateness. */
const GIVE_BACK_WITHIN = 1_000;

const OPTIONS: Array<[string, RedisOptions]> = [
  ['ioredis defaults', {}],
  ['maxRetriesPerRequest: null (a BullMQ connection)', { maxRetriesPerRequest: null }],
];

describe("Redlock: an acquire a user's client for one node replays after a reconnect", () => {
  /** The user's own clients for node 0, closed after each case. */
  const mine: Redis[] = [];
  const suite = redlockSuite(() => Promise.all(mine.splice(0).map(closeClient)));

  /** A service whose node 0 is a client of the user's, with `options` (ioredis' defaults otherwise). */
  async function serviceWithUserClientFor0(options: RedisOptions): Promise<{ locks: LockService; client: Redis }> {
    const client = new Redis({ host: suite.nodes.servers[0].host, port: suite.nodes.servers[0].port, ...options });
    mine.push(client);
    const locks = await makeService([client, suite.nodes.directUrls[1], suite.nodes.directUrls[2]]);
    return { locks, client };
  }

  async function makeService(urls: Array<string | Redis>): Promise<LockService> {
    const service = new LockService({ nodes: urls, keyPrefix: PREFIX, nodeRecoveryDelay: 0, ttl: TTL, commandTimeout: COMMAND_TIMEOUT });
    suite.services.push(service);
    await service.onModuleInit();
    return service;
  }

  /**
   * Freezes node 0, runs `call` (its acquire reaches the frozen node and waits there unread), then kills node 0 with
   * the acquire still unanswered: ioredis keeps it to send again. Resolves with what `call` resolved to.
   */
  async function acquireWhileNode0Dies<T>(client: Redis, call: () => Promise<T>): Promise<{ value: T; sentAt: number }> {
    suite.nodes.servers[0].pause();
    const sentAt = performance.now();
    const pending = call();
    await sleep(50);
    await suite.nodes.servers[0].kill9();
    expect(await pollUntil(() => client.status !== 'ready', 1_000)).toBe(true);
    return { value: await pending, sentAt };
  }

  /** Restarts node 0 (empty) once its acquire is past the per-node bound, and waits until the user's client is back. */
  async function restartNode0After(sentAt: number, client: Redis): Promise<void> {
    // Past the bound, the acquire's reply is late (its call was already failed): the case this is about.
    await sleepUntil(sentAt + NODE_TIMEOUT + 50);
    await suite.nodes.servers[0].restart();
    expect(await pollUntil(() => client.status === 'ready' && suite.probes[0].status === 'ready', 5_000)).toBe(true);
  }

  /** The replayed acquire ran on the restarted node and granted the key there (only a grant writes its fencing token). */
  async function expectReplayGrantedOnNode0(): Promise<void> {
    expect(await pollUntil(async () => (await lockKeyState(suite.probes[0], PREFIX, suite.key)).fence !== null, GIVE_BACK_WITHIN)).toBe(true);
    const stats = await commandStats(suite.probes[0]);
    expect((stats.eval ?? 0) + (stats.evalsha ?? 0)).toBeGreaterThanOrEqual(1);
  }

  /** Node 0 gave the replay's grant back: nobody holds the key or queues for it there. */
  async function expectGivenBackOnNode0(): Promise<void> {
    await pollUntil(async () => grantedAndGivenBack(await lockKeyState(suite.probes[0], PREFIX, suite.key)), GIVE_BACK_WITHIN);
    expect(await lockKeyState(suite.probes[0], PREFIX, suite.key)).toMatchObject({ owner: null, queue: 0 });
    // The replayed acquire, then the give-back: two scripts on the restarted node.
    const stats = await commandStats(suite.probes[0]);
    expect((stats.eval ?? 0) + (stats.evalsha ?? 0)).toBeGreaterThanOrEqual(2);
  }

  /** With node `stopped` down as well, another service takes the key on the two nodes left. */
  async function expectAnotherServiceTakesIt(stopped: 1 | 2): Promise<void> {
    const other = await makeService(suite.nodes.directUrls);
    if (stopped === 2) await suite.nodes.servers[2].kill9();
    const lock = await other.tryAcquire(suite.key);
    expect(lock).not.toBeNull();
    expect(await lock!.release()).toBe(true);
  }

  it.each(OPTIONS)(
    '%s: a lock taken without the frozen node and released while it was down: its replayed grant is given back',
    async (_, options) => {
      const { locks, client } = await serviceWithUserClientFor0(options);
      // Nodes 1 and 2 grant it: a majority, node 0 still unanswered.
      const { value: lock, sentAt } = await acquireWhileNode0Dies(client, () => locks.acquire(suite.key));
      // Its release is refused on node 0 (the connection is down) and frees the key on 1 and 2.
      expect(await lock.release()).toBe(true);
      await restartNode0After(sentAt, client);
      await expectReplayGrantedOnNode0();
      await expectGivenBackOnNode0();
      await expectAnotherServiceTakesIt(2);
    },
  );

  it.each(OPTIONS)('%s: an acquire that failed (too few nodes answered): its replayed grant is given back', async (_, options) => {
    const { locks, client } = await serviceWithUserClientFor0(options);
    await suite.nodes.servers[1].kill9();
    // Node 2 alone grants it (given back at once), node 1 is down, node 0 never answers: too few votes.
    const { value: error, sentAt } = await acquireWhileNode0Dies(client, () => locks.acquire(suite.key).catch((e: unknown) => e));
    expect(error).toBeInstanceOf(LockConnectionError);
    await restartNode0After(sentAt, client);
    await expectReplayGrantedOnNode0();
    await expectGivenBackOnNode0();
    // Node 1 is still down.
    await expectAnotherServiceTakesIt(1);
  });

  it('control: a lock still held when the replay comes keeps node 0 for the holder, where it counts; its release frees it there', async () => {
    const { locks, client } = await serviceWithUserClientFor0({});
    const { value: lock, sentAt } = await acquireWhileNode0Dies<Lock>(client, () => locks.acquire(suite.key));
    await restartNode0After(sentAt, client);
    await expectReplayGrantedOnNode0();
    const holder = await suite.probes[1].get(lockRedisKeys(PREFIX, suite.key).lock);
    expect(holder).not.toBeNull();
    // Long enough for a give-back to have come back (it would follow the replay's reply at once).
    await sleep(300);
    expect((await lockKeyState(suite.probes[0], PREFIX, suite.key)).owner).toBe(holder);
    // It is the holder's third vote: with node 1 stopped, an extend still counts a majority (nodes 0 and 2).
    await suite.nodes.servers[1].kill9();
    await expect(lock.extend()).resolves.toBeUndefined();
    expect(await lock.release()).toBe(true);
    expect(await lockKeyState(suite.probes[0], PREFIX, suite.key)).toMatchObject({ owner: null, queue: 0 });
  });
});
