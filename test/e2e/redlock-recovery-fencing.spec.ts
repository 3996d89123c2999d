/**
 * T16 — the two Redlock hazards this mode guards against, each with a control run that shows the
 * hazard is real:
 * - a node restarted without its data forgets a held lock; counted at once, its vote lets a second
 *   client in beside the holder (control: nodeRecoveryDelay 0) — with the quarantine it does not;
 * - fencing tokens taken as each majority's own maximum can go backwards when two majorities take
 *   it from different nodes (control: write-back off) — with the write-back they never do.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Logger } from '@nestjs/common';
import type Redis from 'ioredis';
import { Lock, LockBusyError, LockConnectionError, LockService } from '../../lib';
import { nodeMarkerKey } from '../../lib/redis/redlock';
import * as clock from '../../lib/time/clock';
import type { RedlockStore } from '../../lib/redis/redlock/redlock-store';
import { commandStats } from '../harness/command-stats';
import { checkHistory, Section } from '../harness/history';
import { pingOnce } from '../harness/redis-ping';
import { RedlockNodes } from '../harness/redlock-nodes';
import { pollUntil, sleep } from './workers/support/timing';

const TTL = 2_000;
const stamp = (): string => process.hrtime.bigint().toString();

describe('T16 Redlock: node restarted empty, fencing across majorities', () => {
  let nodes: RedlockNodes;
  let direct: Redis[];
  const services: LockService[] = [];

  beforeAll(async () => {
    nodes = await RedlockNodes.start(3);
    direct = nodes.clients();
  });
  afterEach(async () => {
    await Promise.all(services.splice(0).map((s) => s.close()));
    await nodes.heal();
  });
  afterAll(async () => {
    await nodes.stop();
  });

  async function makeService(prefix: string, options: Record<string, unknown> = {}): Promise<LockService> {
    const service = new LockService({ nodes: nodes.urls, keyPrefix: prefix, ttl: TTL, commandTimeout: 200, shutdownTimeout: 500, ...options });
    services.push(service);
    await service.onModuleInit();
    return service;
  }

  /**
   * The nodes have kept their data "for ever": their markers predate any lease, and every process has
   * been up for longer than a lease (a node also gives no vote while its uptime is shorter).
   */
  async function markNodesLongUsed(prefix: string): Promise<void> {
    await Promise.all(direct.map((c) => c.set(nodeMarkerKey(prefix), '0')));
    const upFor = async (c: Redis) => Number(/uptime_in_seconds:(\d+)/.exec(await c.info('server'))?.[1] ?? 0) * 1000;
    expect(await pollUntil(async () => (await Promise.all(direct.map(upFor))).every((ms) => ms >= TTL), 5_000, 100)).toBe(true);
  }

  /**
   * Runs `body` as an ACL user that may run every command but `denied` on every node (`urls` name the nodes
   * as that user), with the startup warnings that mention `about`; the user and the spy are gone after.
   */
  async function asUserWithout(denied: string, about: string, body: (urls: string[], warnings: () => string[]) => Promise<void>): Promise<void> {
    const user = `no${denied}`;
    await Promise.all(direct.map((c) => c.call('ACL', 'SETUSER', user, 'on', '>pw', '~*', '&*', '+@all', `-${denied}`)));
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const warnings = () => warn.mock.calls.map(([message]) => String(message)).filter((m) => m.includes(about));
    try {
      await body(
        nodes.urls.map((url) => url.replace('redis://', `redis://${user}:pw@`)),
        warnings,
      );
    } finally {
      warn.mockRestore();
      await Promise.all(direct.map((c) => c.call('ACL', 'DELUSER', user)));
    }
  }

  const lastSaveMs = async (c: Redis) => Number(await c.lastsave()) * 1_000;
  /** Until every node's LASTSAVE (whole seconds) + 1 s + the delay is past: its acquires then read no uptime. */
  const untilLastSaveSettled = () =>
    pollUntil(async () => (await Promise.all(direct.map(lastSaveMs))).every((ms) => ms + 1_000 + TTL < Date.now() - 50), 10_000, 100);

  /** INFO and LASTSAVE calls each node served while `run` ran (less the INFO commandstats that read the first count). */
  async function uptimeReadsDuring(run: () => Promise<void>): Promise<Array<{ info: number; lastsave: number }>> {
    const before = await Promise.all(direct.map(commandStats));
    await run();
    const after = await Promise.all(direct.map(commandStats));
    return after.map((a, i) => ({ info: (a.info ?? 0) - (before[i].info ?? 0) - 1, lastsave: (a.lastsave ?? 0) - (before[i].lastsave ?? 0) }));
  }

  const acquireReleaseTimes = (service: LockService, n: number) => async () => {
    for (let i = 0; i < n; i += 1) await (await service.acquire('k', { onBusy: 'throw' })).release();
  };

  /**
   * A holds the lock on nodes 0 and 1 (node 2 cut off while it acquired); node 1 restarts empty;
   * node 2 is back; B asks. Returns B's outcome and the history of both critical sections.
   */
  async function restartMidHold(
    prefix: string,
    nodeRecoveryDelay: number,
    bRetriesForMs = 0,
    /** Node 1 comes back from an older snapshot (RDB, AOF everysec): its marker is back, A's lock is not. */
    fromSnapshot = false,
    /** A's lease. Its watchdog renews at a third of it, and that renewal finds A's majority gone (node 1 forgot it). */
    aTtl = TTL,
  ): Promise<{ b: Lock | Error; sections: Section[]; aLost: boolean; aLostWhenBEntered?: boolean }> {
    await markNodesLongUsed(prefix);
    const a = await makeService(prefix, { nodeRecoveryDelay });
    const b = await makeService(prefix, { nodeRecoveryDelay });
    nodes.proxies[2].blackhole(true);
    const held = await a.acquire('k', { ttl: aTtl });
    const aEnter = stamp();
    expect(await direct[2].exists(`${prefix}{k}`)).toBe(0);
    nodes.proxies[2].blackhole(false);

    const pidBefore = nodes.servers[1].pid;
    await nodes.servers[1].restart();
    // The fault happened: a new process, and it forgot A's lock.
    expect(nodes.servers[1].pid).not.toBe(pidBefore);
    expect(await pingOnce(nodes.servers[1].port, nodes.servers[1].host, 500)).toBe(true);
    const fresh = nodes.servers[1].client();
    expect(await fresh.exists(`${prefix}{k}`)).toBe(0);
    if (fromSnapshot) await fresh.set(nodeMarkerKey(prefix), '0');
    // B's connection to the restarted node is back (waited for, bounded): 300 ms was assumed enough,
    // and on a loaded machine B then asked without node 1 for the whole of the control's retries (a
    // full run saw LockBusyError: node 0 busy, node 2 granted, node 1 not reconnected).
    const bNode1 = (b.engine.store as RedlockStore).nodes[1].client;
    expect(await pollUntil(() => bNode1.status === 'ready', 10_000, 10)).toBe(true);

    let outcome: Lock | Error;
    let aLostWhenBEntered: boolean | undefined;
    const sections: Section[] = [];
    try {
      // The control asks again for a while: B's connection to the restarted node may take longer than
      // the pause above to come back (seen once in CI), and without that node B has no majority.
      const askUntil = Date.now() + bRetriesForMs;
      for (;;) {
        try {
          outcome = await b.acquire('k', { onBusy: 'throw' });
          break;
        } catch (error) {
          if (Date.now() >= askUntil) throw error;
          await sleep(100);
        }
      }
      const bEnter = stamp();
      aLostWhenBEntered = held.signal.aborted;
      await sleep(10);
      sections.push({ worker: 'b', key: 'k', fence: outcome.fencingToken, enterAt: bEnter, exitAt: stamp() });
      await outcome.release();
    } catch (error) {
      outcome = error as Error;
    }
    const aLost = held.signal.aborted;
    sections.push({ worker: 'a', key: 'k', fence: held.fencingToken, enterAt: aEnter, exitAt: stamp() });
    await held.release().catch(() => undefined);
    return { b: outcome, sections, aLost, aLostWhenBEntered };
  }

  it('control (nodeRecoveryDelay 0): the restarted node votes at once and a second client gets the lock beside the holder', async () => {
    // A's lease is long here: with TTL its renewal (at 667 ms) fell inside the restart and B's reconnection on a
    // loaded machine, A learnt of its loss before B asked, and the double grant this control shows did not happen.
    const { b, sections, aLost, aLostWhenBEntered } = await restartMidHold('rr1:', 0, TTL / 2, false, 5 * TTL);
    const report = checkHistory(sections);
    console.log(`T16 restart control: B ${b instanceof Error ? b.name : 'acquired'}, overlaps ${report.overlaps.length}, A lost ${aLost}`);
    expect(b).not.toBeInstanceOf(Error);
    // A real double grant: A still held its lease (as far as it knew) when B entered.
    expect(aLostWhenBEntered).toBe(false);
    expect(report.overlaps.length).toBe(1);
  });

  it('with the quarantine (nodeRecoveryDelay = ttl): the restarted node gives no vote, B is refused, 0 overlaps; it votes again after the delay', async () => {
    const { b, sections } = await restartMidHold('rr2:', TTL);
    const report = checkHistory(sections);
    console.log(`T16 restart mitigated: B ${b instanceof Error ? `${b.name}: ${b.message}` : 'acquired'}, overlaps ${report.overlaps.length}`);
    expect(b).toBeInstanceOf(LockBusyError);
    expect(report.overlaps).toEqual([]);
    // The restarted node wrote its marker at its first use after the restart: it votes once TTL passed.
    const since = Number(await nodes.servers[1].client().get(nodeMarkerKey('rr2:')));
    expect(since).toBeGreaterThan(0);
    await sleep(TTL + 100);
    const service = services[1];
    nodes.proxies[0].blackhole(true); // needs the restarted node's vote now
    const later = await service.acquire('k2', { onBusy: 'throw' });
    expect(later.fencingToken).toBeGreaterThan(0);
    await later.release();
  });

  it('a node restarted from an older snapshot (marker back, the lock gone) is quarantined too: its uptime tells the restart', async () => {
    const { b, sections } = await restartMidHold('rr5:', TTL, 0, true);
    const report = checkHistory(sections);
    console.log(`T16 restart from a snapshot: B ${b instanceof Error ? `${b.name}: ${b.message}` : 'acquired'}, overlaps ${report.overlaps.length}`);
    // The fault: the restarted node holds an old marker, which alone would let it vote at once.
    expect(await nodes.servers[1].client().get(nodeMarkerKey('rr5:'))).toBe('0');
    expect(b).toBeInstanceOf(LockBusyError);
    expect(report.overlaps).toEqual([]);
  });

  it('nodes that refuse INFO to our user: a warning at startup for each that answered (the uptime check is off there), and locks still work', async () => {
    await asUserWithout('info', 'does not answer INFO server', async (urls, aboutInfo) => {
      await markNodesLongUsed('rr6:');
      await makeService('rr6:'); // the control: the default user may read INFO
      expect(aboutInfo()).toEqual([]);
      const service = await makeService('rr6:', { nodes: urls });
      // Startup waits for a majority of the nodes; each of those is checked.
      expect(aboutInfo().length).toBeGreaterThanOrEqual(2);
      for (const message of aboutInfo()) expect(message).toMatch(/Redis at 127\.0\.0\.1:\d+ does not answer INFO server \(NOPERM/);
      const lock = await service.acquire('k', { onBusy: 'throw' }); // the marker alone decides
      await lock.release();
    });
  });

  it('the uptime (INFO) is read only within nodeRecoveryDelay of a start or a save: a node up longer, not saved since, answers by LASTSAVE', async () => {
    await markNodesLongUsed('rr7:');
    const service = await makeService('rr7:', { nodeRecoveryDelay: TTL });
    expect(await untilLastSaveSettled()).toBe(true);
    const settledCalls = await uptimeReadsDuring(acquireReleaseTimes(service, 20));
    // A save (or a start) reopens the gate for the delay: the node is asked its uptime again.
    await direct[0].bgsave();
    const saved = Date.now();
    expect(await pollUntil(async () => (await lastSaveMs(direct[0])) + 1_000 >= saved, 5_000, 20)).toBe(true);
    const afterSaveCalls = await uptimeReadsDuring(acquireReleaseTimes(service, 20));
    // The snapshot would come back at node 0's next restart: later cases restart it empty.
    const [, dir] = (await direct[0].config('GET', 'dir')) as string[];
    const [, file] = (await direct[0].config('GET', 'dbfilename')) as string[];
    await rm(join(dir, file), { force: true });
    console.log(
      `T16 uptime reads per 20 acquisitions: settled ${JSON.stringify(settledCalls)}, after a save on node 0 ${JSON.stringify(afterSaveCalls)}`,
    );
    for (const calls of settledCalls) expect(calls).toEqual({ info: 0, lastsave: 20 });
    expect(afterSaveCalls[0]).toEqual({ info: 20, lastsave: 20 });
    for (const calls of afterSaveCalls.slice(1)) expect(calls).toEqual({ info: 0, lastsave: 20 });
  });

  it('nodes that refuse LASTSAVE (but allow INFO) to our user: a warning at startup, and every acquire reads the uptime instead', async () => {
    await asUserWithout('lastsave', 'does not answer LASTSAVE', async (urls, aboutLastSave) => {
      await markNodesLongUsed('rr8:');
      await makeService('rr8:', { nodeRecoveryDelay: TTL }); // the control: the default user may read LASTSAVE
      expect(aboutLastSave()).toEqual([]);
      const service = await makeService('rr8:', { nodeRecoveryDelay: TTL, nodes: urls });
      expect(aboutLastSave().length).toBeGreaterThanOrEqual(2);
      for (const message of aboutLastSave()) expect(message).toMatch(/Redis at 127\.0\.0\.1:\d+ does not answer LASTSAVE \(NOPERM.*\+lastsave/);
      expect(await untilLastSaveSettled()).toBe(true);
      // Every acquire reads the uptime, as before the LASTSAVE gate (its LASTSAVE refused).
      expect((await uptimeReadsDuring(acquireReleaseTimes(service, 5))).map((calls) => calls.info)).toEqual([5, 5, 5]);
    });
  });

  it('a node killed and restarted empty while 8 workers contend (quarantine on): locks keep being granted, 0 overlaps, increasing tokens', async () => {
    await markNodesLongUsed('rr5:');
    const svcs = [
      await makeService('rr5:', { nodeRecoveryDelay: TTL, nodes: nodes.directUrls }),
      await makeService('rr5:', { nodeRecoveryDelay: TTL, nodes: nodes.directUrls }),
    ];
    const sections: Section[] = [];
    let stop = false;
    const workers = svcs.flatMap((service, s) =>
      [0, 1, 2, 3].map(async (w) => {
        while (!stop) {
          const lock = await service.acquire('k', { waitTimeout: 10_000 });
          const enterAt = stamp();
          await sleep(2);
          sections.push({ worker: `${s}.${w}`, key: 'k', fence: lock.fencingToken, enterAt, exitAt: stamp() });
          await lock.release();
        }
      }),
    );
    await sleep(300);
    const before = sections.length;
    const pid = nodes.servers[0].pid;
    await nodes.servers[0].kill9();
    await sleep(300);
    await nodes.servers[0].restart();
    expect(nodes.servers[0].pid).not.toBe(pid);
    await sleep(TTL + 500); // through the restarted node's quarantine and out of it
    stop = true;
    await Promise.all(workers);
    const report = checkHistory(sections);
    // The restarted node gave votes again after its quarantine: its marker is older than TTL now.
    const since = Number(await nodes.servers[0].client().get(nodeMarkerKey('rr5:')));
    console.log(`T16 restart under load: ${sections.length} acquisitions (${before} before the kill), overlaps ${report.overlaps.length}`);
    expect(since).toBeGreaterThan(0);
    expect(sections.length).toBeGreaterThan(before + 50);
    expect(report.overlaps).toEqual([]);
    expect(report.fenceViolations).toEqual([]);
  });

  it('brand-new nodes are quarantined too (they cannot be told apart from restarted ones): LockConnectionError naming why', async () => {
    const service = await makeService('rr3:', { nodeRecoveryDelay: TTL });
    await expect(service.acquire('k', { onBusy: 'throw' })).rejects.toThrow(
      /\(re\)started, or lost their data, less than nodeRecoveryDelay \(\d+ ms\) ago.*so only 0 can vote and 2 are needed/,
    );
  });

  it('a ttl above nodeRecoveryDelay is refused (the quarantine would not cover that lease)', async () => {
    await markNodesLongUsed('rr4:');
    const service = await makeService('rr4:', { nodeRecoveryDelay: TTL });
    await expect(service.acquire('k', { ttl: TTL + 1 })).rejects.toThrow(/longer than nodeRecoveryDelay/);
  });

  /**
   * Node 2's token counter is far ahead of the others (a clock stepped forward, a counter restored
   * from elsewhere). A takes the lock on all three: its token comes from node 2. Then node 2 is cut
   * off and B takes the lock on nodes 0 and 1.
   */
  async function skewedFences(prefix: string, writeBack: boolean): Promise<{ a: number; b: number; nodesAtA: number }> {
    await markNodesLongUsed(prefix);
    const skewed = String(Date.now() * 1000 + 1e12);
    await direct[2].set(`${prefix}{k}:f`, skewed);
    const a = await makeService(prefix, { nodeRecoveryDelay: 0 });
    const b = await makeService(prefix, { nodeRecoveryDelay: 0 });
    // Switched off for the control run only: the run with it is the services' default (a mutation review turned the
    // default off and this test, which set the flag both ways, still passed).
    if (!writeBack) {
      (a.engine.store as RedlockStore).fenceWriteBack = false;
      (b.engine.store as RedlockStore).fenceWriteBack = false;
    }
    // Nodes 0 and 1 answer A a little later, so A's majority includes the skewed node and A's token is its.
    nodes.proxies[0].setDelay(30);
    nodes.proxies[1].setDelay(30);
    const first = await a.acquire('k');
    nodes.proxies[0].setDelay(0);
    nodes.proxies[1].setDelay(0);
    expect(first.fencingToken).toBeGreaterThan(Number(skewed));
    // Nodes whose counter is at A's token or above while A holds it.
    const fences = await Promise.all(direct.map(async (c) => Number(await c.get(`${prefix}{k}:f`))));
    const nodesAtA = fences.filter((f) => f >= first.fencingToken).length;
    await first.release();
    nodes.proxies[2].blackhole(true);
    const second = await b.acquire('k');
    await second.release();
    return { a: first.fencingToken, b: second.fencingToken, nodesAtA };
  }

  it('control (write-back off): per-majority maxima go backwards — a fence inversion', async () => {
    const { a, b, nodesAtA } = await skewedFences('rf1:', false);
    console.log(`T16 fencing control: A ${a}, then B ${b}`);
    expect(nodesAtA).toBe(1); // only the skewed node
    expect(b).toBeLessThan(a);
  });

  it('with the write-back: the later holder always gets the larger token', async () => {
    const { a, b, nodesAtA } = await skewedFences('rf2:', true);
    console.log(`T16 fencing write-back: A ${a}, then B ${b}`);
    // Written back: a majority of the nodes holds A's token, so every later majority meets one of them.
    expect(nodesAtA).toBeGreaterThanOrEqual(2);
    expect(b).toBeGreaterThan(a);
  });

  it("a client whose clock is an hour ahead: the nodes do not take its proposal, so a later majority that lost the key's last token still issues a larger one", async () => {
    const prefix = 'rf3:';
    await markNodesLongUsed(prefix);
    const skewed = await makeService(prefix, { nodeRecoveryDelay: 0 });
    const correct = await makeService(prefix, { nodeRecoveryDelay: 0 });
    const hourAhead = jest
      .spyOn(clock, 'wallClockMicros')
      .mockImplementation(() => Math.floor((performance.timeOrigin + performance.now()) * 1000) + 3.6e9);
    let first: Lock;
    try {
      first = await skewed.acquire('k');
      await first.release();
    } finally {
      hourAhead.mockRestore();
    }
    // Before: the nodes issued the proposal (its client's clock + 1 s): an hour ahead of every node's clock.
    expect(first.fencingToken).toBeLessThan(Date.now() * 1000 + 3e6);
    // Nodes 0 and 1 lose the key's last token (as when restarted empty); node 2, which kept it, is cut off.
    await Promise.all([direct[0].del(`${prefix}{k}:f`), direct[1].del(`${prefix}{k}:f`)]);
    nodes.proxies[2].blackhole(true);
    const second = await correct.acquire('k');
    await second.release();
    console.log(`T16 fencing, a client an hour ahead: ${first.fencingToken}, then ${second.fencingToken}`);
    expect(second.fencingToken).toBeGreaterThan(first.fencingToken); // before: an hour lower
  });

  it('isLocked and release while a node that forgot the lock is in nodeRecoveryDelay: its "free" counts for nothing', async () => {
    const prefix = 'rf4:';
    await markNodesLongUsed(prefix);
    const holder = await makeService(prefix, { nodeRecoveryDelay: TTL });
    const other = await makeService(prefix, { nodeRecoveryDelay: TTL });
    const lock = await holder.acquire('k', { watchdog: false }); // no renewal takes the key back meanwhile
    // A majority decides the acquire: node 2's grant may land a moment later, and must not land after the delete.
    expect(await pollUntil(async () => (await direct[2].get(`${prefix}{k}`)) === lock.token, 2_000, 5)).toBe(true);
    await direct[2].del(`${prefix}{k}`); // node 2 missed the grant
    await nodes.servers[0].kill9();
    await nodes.servers[0].restart(); // node 0 forgot it, and gives no vote for nodeRecoveryDelay
    // The services reconnect (waited for, bounded: a fixed 500 ms could end first on a loaded machine).
    const node0Ready = () => [holder, other].every((s) => (s.engine.store as RedlockStore).nodes[0].client.status === 'ready');
    expect(await pollUntil(node0Ready, 5_000, 10)).toBe(true);
    expect(await Promise.all(direct.map((c) => c.exists(`${prefix}{k}`)))).toEqual([0, 1, 0]); // the faults were real
    expect(lock.isHeld()).toBe(true);
    // Before: false (node 0 counted as a "free" vote).
    const locked = await other.isLocked('k').catch((error: unknown) => error);
    expect(locked).toBeInstanceOf(LockConnectionError);
    expect((locked as Error).message).toMatch(/1 of them \(re\)started, or lost their data, less than nodeRecoveryDelay/);
    // Before: false, the release counted as one that outlived its lease.
    const released = await lock.release().catch((error: unknown) => error);
    expect(released).toBeInstanceOf(LockConnectionError);
    expect(await direct[1].exists(`${prefix}{k}`)).toBe(0); // deleted where it was ours
  });
});
