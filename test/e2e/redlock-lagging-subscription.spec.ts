/**
 * Redlock: a node whose first subscription failed is subscribed again. The service counts itself
 * subscribed once a majority of its nodes confirmed (a lock needs a majority), and waiters ask for a
 * subscription only while it is not: a node that was slow or down at the service's first wait stayed
 * without the service's channel for good, as long as the others stayed up, and the health check said
 * 'subscribed'. Its handovers were never heard, so every handover needed both other nodes' messages.
 *
 * The fault: node 2's link delayed past the per-node bound (ttl / 10 = 200 ms) during the first wait,
 * so that node's SUBSCRIBE times out; then the link is healed and waits go on.
 */
import type Redis from 'ioredis';
import { LockService } from '../../lib';
import { RedlockNodes } from '../harness/redlock-nodes';
import { channelCensus } from './workers/support/resource-census';
import { pollUntil, sleep } from './workers/support/timing';

const PREFIX = 'ls:';
const SLOW_NODE = 2;

describe('Redlock: a node whose first subscription failed', () => {
  let nodes: RedlockNodes;
  let clients: Redis[];
  let service: LockService | undefined;

  beforeAll(async () => {
    nodes = await RedlockNodes.start(3);
    clients = nodes.clients();
  });
  afterEach(async () => {
    nodes.proxies[SLOW_NODE].setDelay(0);
    await service?.close();
  });
  afterAll(async () => {
    await nodes.stop();
  });

  /** One contended acquisition: the waiter queues, the holder releases, the waiter gets the key. */
  async function handover(locks: LockService): Promise<void> {
    const held = await locks.acquire('k');
    const waiting = locks.acquire('k', { waitTimeout: 5_000 });
    await sleep(20);
    expect(await held.release()).toBe(true);
    expect(await (await waiting).release()).toBe(true);
  }

  it('is subscribed again by the waits that follow, once it answers', async () => {
    service = new LockService({ nodes: nodes.urls, nodeRecoveryDelay: 0, keyPrefix: PREFIX, ttl: 2_000 });
    await service.onModuleInit();
    const channel = `${PREFIX}waiters:${(service.engine as unknown as { serviceId: string }).serviceId}`;
    const subscribedNodes = async () => (await Promise.all(clients.map((c) => channelCensus(c, PREFIX)))).map((ch) => ch[channel] ?? 0);

    nodes.proxies[SLOW_NODE].setDelay(400);
    await handover(service);
    // The fault happened: the majority subscribed, the slow node not.
    expect(await pollUntil(async () => (await subscribedNodes()).filter((n) => n === 1).length === 2, 2_000)).toBe(true);
    expect((await subscribedNodes())[SLOW_NODE]).toBe(0);
    expect(service.engine.wakeChannel.state).toBe('subscribed');

    nodes.proxies[SLOW_NODE].setDelay(0);
    const allSubscribed = async () => (await subscribedNodes()).every((n) => n === 1);
    for (let i = 0; i < 20 && !(await allSubscribed()); i++) await handover(service);
    await pollUntil(allSubscribed, 1_000);
    expect(await subscribedNodes()).toEqual([1, 1, 1]);
  }, 30_000);
});
