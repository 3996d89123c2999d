/**
 * Redlock, one node's acquire reply lost with its connection (a reset by a proxy or load balancer, a network blip)
 * after that node granted the key: the acquisition's clean-up for that node (the release of a lock won on the other
 * two, or the abandon of an acquire that failed) was refused while the connection was down, and the node held the key
 * for its whole ttl by a token nobody uses: a stray vote. Exclusion held (a minority), but with one more node down,
 * every acquire of the key failed. That clean-up is now kept per node and sent again at the node's next `ready`
 * (give-backs-after-reconnect.ts). A lock still held keeps that node's grant: it is the holder's.
 *
 * Node 0 is reached through a proxy that delays the link, so its acquire is granted there with the reply still in
 * the proxy; the proxy then resets the connection and drops what comes next until the case lets the link come back.
 */
import type Redis from 'ioredis';
import { Lock, LockConnectionError, LockService } from '../../lib';
import { lockRedisKeys } from '../../lib/redis/lock-redis-keys';
import { lockKeyState } from './workers/support/lock-key-state';
import { redlockSuite } from './workers/support/redlock-suite';
import { pollUntil, sleep } from './workers/support/timing';

const PREFIX = 'rl:';
/** Far longer than every case: a key left held for it outlives every check below. */
const TTL = 20_000;
/** Node 0's link delay each way: its acquire runs there while the reply waits in the proxy. */
const LINK_DELAY = 300;
/** Once node 0's link is back: its reconnect (at most 500 ms) and one round trip, with CI lateness. */
const GIVEN_BACK_WITHIN = 3_000;

describe("Redlock: an acquire reply lost with one node's connection", () => {
  const suite = redlockSuite();

  async function makeService(urls: string[]): Promise<LockService> {
    const service = new LockService({ nodes: urls, keyPrefix: PREFIX, nodeRecoveryDelay: 0, ttl: TTL, commandTimeout: 3_000 });
    suite.services.push(service);
    await service.onModuleInit();
    // Startup needs a majority: node 0's connection, slowed by its delayed link, must not still be opening.
    expect(await pollUntil(() => nodeClients(service).every((c) => c.status === 'ready'), 3_000)).toBe(true);
    return service;
  }

  const nodeClients = (service: LockService): Redis[] =>
    (service.engine.store as unknown as { nodes: Array<{ client: Redis }> }).nodes.map((n) => n.client);

  /** Node 0 through its proxy, nodes 1 and 2 direct. */
  const serviceWithNode0Proxied = () => makeService([suite.nodes.urls[0], suite.nodes.directUrls[1], suite.nodes.directUrls[2]]);

  const node0Owner = async (): Promise<string | null> => (await lockKeyState(suite.probes[0], PREFIX, suite.key)).owner;

  /**
   * Runs `call` with node 0's link delayed; once node 0 granted the key (the reply still in the proxy), resets that
   * connection and cuts the link. Resolves with the owner node 0 holds the key for.
   */
  async function grantOnNode0ThenReset(call: () => void): Promise<string> {
    suite.nodes.proxies[0].setDelay(LINK_DELAY);
    call();
    expect(await pollUntil(async () => (await node0Owner()) !== null, 3 * LINK_DELAY)).toBe(true);
    suite.nodes.proxies[0].blackhole(true);
    suite.nodes.proxies[0].resetAll();
    suite.nodes.proxies[0].setDelay(0);
    return (await node0Owner())!;
  }

  /** The fault: node 0 holds the key for `token`, with most of its ttl to run. */
  async function expectStrayOnNode0(token: string): Promise<void> {
    expect(await node0Owner()).toBe(token);
    expect(await suite.probes[0].pttl(lockRedisKeys(PREFIX, suite.key).lock)).toBeGreaterThan(TTL - 5_000);
  }

  /** Node 0's link comes back: the connection reconnects. */
  function restoreNode0Link(): void {
    suite.nodes.proxies[0].blackhole(false);
  }

  /** Node 0 gave the key back: nobody holds it or queues for it there, well before the ttl. */
  async function expectGivenBackOnNode0(): Promise<void> {
    expect(await pollUntil(async () => (await node0Owner()) === null, GIVEN_BACK_WITHIN)).toBe(true);
    expect(await lockKeyState(suite.probes[0], PREFIX, suite.key)).toMatchObject({ owner: null, queue: 0 });
  }

  /** With node 2 down as well, another service takes the key on nodes 0 and 1 (a stray vote on node 0 made it null). */
  async function expectTakenWithNode2Down(): Promise<void> {
    const other = await makeService(suite.nodes.directUrls);
    await suite.nodes.servers[2].kill9();
    const lock = await other.tryAcquire(suite.key);
    expect(lock).not.toBeNull();
    expect(await lock!.release()).toBe(true);
  }

  it('a lock released while node 0 was cut off (its acquire granted there, the reply lost): node 0 gives the key back at its reconnect', async () => {
    const locks = await serviceWithNode0Proxied();
    let lock: Lock | undefined;
    // Nodes 1 and 2 grant it at once (a majority); node 0 grants it LINK_DELAY later, its reply still in the proxy.
    const stray = await grantOnNode0ThenReset(() => void locks.acquire(suite.key).then((l) => (lock = l)));
    expect(lock).toBeDefined();
    expect(stray).toBe(lock!.token);
    // Freed on nodes 1 and 2; refused on node 0, whose connection is down.
    expect(await lock!.release()).toBe(true);
    await expectStrayOnNode0(lock!.token);
    restoreNode0Link();
    // Before: held there for the rest of its 20 s ttl.
    await expectGivenBackOnNode0();
    await expectTakenWithNode2Down();
  }, 20_000);

  it("an acquire that failed (node 2 down, node 0's reply lost): node 0 gives the key back at its reconnect, and the key can be taken again", async () => {
    const locks = await serviceWithNode0Proxied();
    const other = await makeService(suite.nodes.directUrls);
    await suite.nodes.servers[2].kill9();
    let failure: unknown;
    // Node 1 grants it, node 2 is down, node 0's grant never reaches us: too few votes.
    const stray = await grantOnNode0ThenReset(() => void locks.acquire(suite.key).catch((error: unknown) => (failure = error)));
    expect(await pollUntil(() => failure !== undefined, 3_000)).toBe(true);
    expect(failure).toBeInstanceOf(LockConnectionError);
    expect(stray).toMatch(new RegExp(`\\.${TTL}\\.`));
    // The acquisition's abandon freed node 1, and was refused on node 0.
    expect(await pollUntil(async () => (await lockKeyState(suite.probes[1], PREFIX, suite.key)).owner === null, 1_000)).toBe(true);
    await expectStrayOnNode0(stray);
    // The stray vote plus node 2 down: nobody can take the key.
    expect(await other.tryAcquire(suite.key)).toBeNull();
    restoreNode0Link();
    await expectGivenBackOnNode0();
    // Node 2 is still down.
    const lock = await other.tryAcquire(suite.key);
    expect(lock).not.toBeNull();
    expect(await lock!.release()).toBe(true);
  }, 20_000);

  it("control: a lock still held keeps node 0's grant through the reconnect; its release frees it there", async () => {
    const locks = await serviceWithNode0Proxied();
    let lock: Lock | undefined;
    const granted = await grantOnNode0ThenReset(() => void locks.acquire(suite.key).then((l) => (lock = l)));
    expect(granted).toBe(lock!.token);
    restoreNode0Link();
    expect(await pollUntil(() => nodeClients(locks)[0].status === 'ready', GIVEN_BACK_WITHIN)).toBe(true);
    // Long enough for a clean-up sent at the reconnect to have run.
    await sleep(300);
    expect(await node0Owner()).toBe(lock!.token);
    expect(lock!.isHeld()).toBe(true);
    // release() returns once a majority released (nodes 1 and 2, direct); node 0's release, through its proxy, may
    // land after it (on a loaded CI machine it did): the delay makes it land after it every time.
    suite.nodes.proxies[0].setDelay(LINK_DELAY);
    expect(await lock!.release()).toBe(true);
    expect(await node0Owner()).toBe(lock!.token);
    await expectGivenBackOnNode0();
  }, 20_000);
});
