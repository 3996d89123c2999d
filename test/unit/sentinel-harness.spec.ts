/**
 * The Sentinel group harness (T6): it starts master, replicas and three Sentinels that know each
 * other, a kill -9 of the master makes them promote a replica, and stop() leaves no process behind.
 */
import { killSurvivors } from '../harness/redis-process';
import { SentinelGroup } from '../harness/sentinel-group';
import { isAlive, pollUntil } from '../e2e/workers/support/timing';

describe('SentinelGroup harness', () => {
  let group: SentinelGroup | undefined;

  afterAll(async () => {
    await group?.stop();
  });
  afterAll(() => expect(killSurvivors()).toEqual([]));

  it('starts a replicated master under 3 Sentinels, fails over after kill -9, and stops every process', async () => {
    const started = Date.now();
    group = await SentinelGroup.start({ replicas: 2 });
    console.log(`sentinel group up in ${Date.now() - started} ms`);
    const { master, replicas, sentinels } = group;
    expect((await group.masterAddress())?.port).toBe(master.port);
    expect(await group.connectedReplicas(master.port)).toBe(2);

    // Writes reach both replicas.
    await master.client().set('harness:probe', 'x');
    for (const r of replicas.map((p) => p.client())) expect(await pollUntil(async () => (await r.get('harness:probe')) === 'x', 2_000)).toBe(true);

    const killedAt = Date.now();
    await master.kill9();
    const promoted = await group.waitForFailover(master.port, 20_000);
    console.log(`failover to :${promoted} ${Date.now() - killedAt} ms after kill -9`);
    expect(replicas.map((r) => r.port)).toContain(promoted);
    expect(await group.dataNode(promoted).client().get('harness:probe')).toBe('x');

    const pids = [...replicas, ...sentinels].map((p) => p.pid);
    await group.stop();
    group = undefined;
    for (const pid of pids) expect(isAlive(pid)).toBe(false);
  });
});
