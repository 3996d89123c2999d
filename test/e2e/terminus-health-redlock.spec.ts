/**
 * LockHealthIndicator in Redlock mode (three nodes): the check counts the nodes that can vote, by
 * the acquire's own rule (answered, and past nodeRecoveryDelay since they started or lost their
 * data). Brand-new nodes and a majority that cannot vote (one killed, one restarted empty) report
 * down while every acquire fails; one node lost reports up, with the lost fault tolerance in the data.
 */
import 'reflect-metadata';
import { HealthIndicatorService } from '@nestjs/terminus';
import { LockService } from '../../lib';
import { LockHealthIndicator } from '../../lib/terminus';
import { RedlockNodes } from '../harness/redlock-nodes';
import { pollUntil } from '../unit/core-helpers';

/** Short, so brand-new nodes start voting quickly; every lease must fit in it (ttl ≤ nodeRecoveryDelay). */
const RECOVERY_MS = 1_500;

describe('LockHealthIndicator in Redlock mode', () => {
  let nodes: RedlockNodes;
  let locks: LockService;
  let indicator: LockHealthIndicator;

  beforeAll(async () => {
    nodes = await RedlockNodes.start(3);
    locks = new LockService({ nodes: nodes.urls, keyPrefix: 'hr:', commandTimeout: 400, ttl: RECOVERY_MS, nodeRecoveryDelay: RECOVERY_MS });
    await locks.onModuleInit();
    indicator = new LockHealthIndicator(locks, new HealthIndicatorService());
  });

  afterAll(async () => {
    await locks?.close();
    await nodes?.stop();
  });

  /** An acquire now: what it failed with (the fault is real), or 'acquired'. */
  function acquireOutcome(key: string): Promise<string> {
    return locks.acquire(key, { onBusy: 'throw' }).then(
      async (lock) => (await lock.release(), 'acquired'),
      (error: Error) => `${error.constructor.name}: ${error.message}`,
    );
  }

  it('brand-new nodes: down, none can vote before nodeRecoveryDelay has passed', async () => {
    expect(await acquireOutcome('fresh')).toMatch(/^LockConnectionError: .*give no votes yet/);
    const fresh = await indicator.isHealthy('lock');
    expect(fresh.lock).toMatchObject({ status: 'down', nodes: { total: 3, voting: 0 } });
    expect(fresh.lock.message).toMatch(/only 0 of 3 Redlock nodes can vote, 2 needed, so every acquire fails: 3 \(re\)started/);
  });

  it('one node killed: up, as acquires still win a majority, with the lost fault tolerance in the data', async () => {
    // Settled: the nodes vote once nodeRecoveryDelay has passed since each was first used. An acquire wins with the
    // first two, and the third may follow a moment later (a CI run on a busy machine checked in between): wait for all.
    expect(await pollUntil(async () => (await acquireOutcome('settled')) === 'acquired', RECOVERY_MS + 2_000, 50)).toBe(true);
    let settled = await indicator.isHealthy('lock');
    expect(
      await pollUntil(
        async () => {
          settled = await indicator.isHealthy('lock');
          return (settled.lock as { nodes?: { voting?: number } }).nodes?.voting === 3;
        },
        2_000,
        50,
      ),
    ).toBe(true);

    await nodes.servers[0].kill9();
    expect(settled.lock).toMatchObject({ status: 'up', nodes: { total: 3, voting: 3 } });
    expect(await acquireOutcome('one-down')).toBe('acquired');
    const oneDown = await indicator.isHealthy('lock');
    expect(oneDown.lock).toMatchObject({ status: 'up', nodes: { total: 3, voting: 2 } });
    expect(oneDown.lock.message).toBeUndefined();
  });

  it('and another restarted without its data: down, one node of three can vote and every acquire fails', async () => {
    // It answers, but may have forgotten a held lock, so it gives no vote within nodeRecoveryDelay.
    await nodes.servers[1].restart();
    // The fault: once the node answers again (its connection comes back), acquires fail for want of votes.
    let acquire = '';
    const refused = /^LockConnectionError: .*2 of 3 nodes answered, but 1 of them \(re\)started.*only 1 can vote and 2 are needed/;
    expect(await pollUntil(async () => refused.test((acquire = await acquireOutcome('majority-lost'))), 1_000, 20)).toBe(true);
    expect(acquire).toMatch(refused);
    const majorityLost = await indicator.isHealthy('lock');
    expect(majorityLost.lock).toMatchObject({ status: 'down', nodes: { total: 3, voting: 1 } });
    expect(majorityLost.lock.message).toMatch(
      /only 1 of 3 Redlock nodes can vote, 2 needed, so every acquire fails: 1 did not answer .*; 1 \(re\)started/,
    );
    expect(majorityLost.lock.roundTripMs).toBeUndefined();
  });
});

describe('LockHealthIndicator in Redlock mode, one node frozen', () => {
  let nodes: RedlockNodes;
  let locks: LockService;

  beforeAll(async () => {
    nodes = await RedlockNodes.start(3);
    // The per-node bound is min(commandTimeout, ttl / 10) = 2 s here, as with the defaults.
    locks = new LockService({ nodes: nodes.urls, keyPrefix: 'hf:', commandTimeout: 2_000, ttl: 30_000, nodeRecoveryDelay: 0 });
    await locks.onModuleInit();
  });

  afterAll(async () => {
    nodes?.servers[2].resume();
    await locks?.close();
    await nodes?.stop();
  });

  it("up at about the others' round trip, not after the frozen node's 2 s bound; the frozen node is not counted", async () => {
    const indicator = new LockHealthIndicator(locks, new HealthIndicatorService());
    expect((await indicator.isHealthy('lock')).lock).toMatchObject({ status: 'up', nodes: { total: 3, voting: 3 } });
    // A slow but healthy node (60 ms round trip, another zone) still counts (a 50 ms grace counted it out).
    nodes.proxies[2].setDelay(30);
    expect((await indicator.isHealthy('lock')).lock).toMatchObject({ status: 'up', nodes: { total: 3, voting: 3 } });
    nodes.proxies[2].setDelay(0);
    nodes.servers[2].pause();
    const asked = performance.now();
    const frozen = await indicator.isHealthy('lock');
    const took = performance.now() - asked;
    console.log(`Redlock health with 1 of 3 nodes frozen: ${Math.round(took)} ms`);
    expect(frozen.lock).toMatchObject({ status: 'up', nodes: { total: 3, voting: 2 } });
    // Before: every check waited the frozen node's whole bound (2 s), past a 1 s liveness-probe timeout.
    expect(took).toBeLessThan(1_000);
    nodes.servers[2].resume();
  });
});
