import { dropStaleHandover } from '../../lib/core/acquire/wait-for-turn';
import type { Handover } from '../../lib/core/handover-channel';
import type { LuaScript } from '../../lib/redis/lua-script';
import type { RedisClient } from '../../lib/redis/redis-connection';
import { RedlockNode } from '../../lib/redis/redlock/redlock-node';
import { REDLOCK_SCRIPTS } from '../../lib/redis/redlock/redlock-scripts';
import { RedlockStore } from '../../lib/redis/redlock/redlock-store';
import { RedlockTickets } from '../../lib/redis/redlock/redlock-tickets';
import { simulatedRedlockNodes } from '../harness/simulated-redlock-nodes';

/**
 * Redlock: an attempt decided before one node answered handles that node's answer when it comes (a
 * grant there is given back). These interleavings replay, call by call, what a waiting acquisition
 * sends its nodes, with one node slow.
 */
describe('Redlock: answers that come after the attempt was decided', () => {
  const W = 'svcw.3000.w';
  const H = 'svch.3000.h';
  const C = 'svcc.3000.c';
  const TTL = 3_000;
  const flush = () => new Promise((resolve) => setImmediate(resolve));
  /** Where an acquire's arguments carry its ticket (redlock-scripts.ts). */
  const ACQUIRE_TICKET = 7;

  /** H holds the lock on all three nodes (last token 40); W's store, and W queued on every node. */
  async function heldByH() {
    const sim = simulatedRedlockNodes(() => ({ holder: H, fence: 40, queue: new Map() }));
    const store = new RedlockStore(sim.nodes, { keyPrefix: 'x:', waiterLease: 3_000, nodeRecoveryDelay: 0, nodeTimeout: 2_000 });
    const keys = store.keysFor('k');
    const first = store.acquire(keys, W, TTL, true, false);
    for (const i of [0, 1, 2]) sim.step(i);
    expect(await first).toMatchObject({ acquired: false });
    expect(sim.states.every((s) => s.queue.has(W))).toBe(true);
    /** Another client's call on node i, now. */
    const release = (i: number, token: string) =>
      sim.direct(i, REDLOCK_SCRIPTS.release, [keys.lock, keys.fence, keys.queue, keys.waiters, token, 'x:w:', '1']);
    /** C, whose clock is behind (ticket 1: ahead of W in every queue), asks node i, queuing when busy. */
    const cAsks = (i: number) =>
      sim.direct(i, REDLOCK_SCRIPTS.acquire, [keys.lock, keys.fence, keys.queue, keys.waiters, 'm', C, String(TTL), '1', '0', '1', '3000']);
    /** Retry k: nodes 0 and 1 answer busy (a busy majority decides it); node 2 is slow, k still on its way there. */
    const retryDecidedWithoutNode2 = async () => {
      const k = store.acquire(keys, W, TTL, true, true);
      sim.step(0);
      sim.step(1);
      expect(await k).toMatchObject({ acquired: false });
      expect(sim.pending(2)).toEqual(['acquire']);
    };
    return { sim, store, keys, release, cAsks, retryDecidedWithoutNode2 };
  }

  it('a late grant is not given back after a later attempt counted that node: the lock is never held twice', async () => {
    const { sim, store, keys, release, cAsks, retryDecidedWithoutNode2 } = await heldByH();
    await retryDecidedWithoutNode2();

    // H's release runs on nodes 0 and 2 (both handed to W, the head); its call to node 1 is delayed.
    expect(release(0, H)).toBe(2);
    expect(release(2, H)).toBe(2);
    // C queues on nodes 1 and 2 ahead of W.
    cAsks(1);
    cAsks(2);

    // W asks again (retry k+1): node 0 answers at once, the lock is W's there.
    const k1 = store.acquire(keys, W, TTL, true, true);
    sim.step(0);
    await flush();
    // Node 2 runs retry k (sent before k+1): the lock is W's there too. That answer comes late for k.
    sim.step(2);
    await flush();
    // The fault: retry k+1 was sent to node 2 before k's late answer was read.
    expect(sim.pending(2)[0]).toBe('acquire');
    // Node 2 runs k+1: ours. k+1 has nodes 0 and 2.
    sim.step(2);
    expect(await k1).toMatchObject({ acquired: true, fence: 41 });
    // Node 2 runs whatever W sent it after k+1 (before the fix: k's give-back, deleting W's lock there).
    while (sim.pending(2).length > 0) sim.step(2);

    // Then C asks node 2, and H's delayed release reaches node 1 (it hands node 1 to C, its head).
    cAsks(2);
    expect(release(1, H)).toBe(2);
    // W was told it holds the lock: it must hold a majority, and nobody else may.
    expect({ W: sim.heldBy(W), C: sim.heldBy(C) }).toEqual({ W: 2, C: 1 });
  });

  it('a late grant after the wait was abandoned does not queue the finished acquisition again', async () => {
    const { sim, store, keys, release, retryDecidedWithoutNode2 } = await heldByH();
    await retryDecidedWithoutNode2();
    // W gives up: abandon on every node (nodes 0 and 1 run it; node 2 has retry k first).
    const abandon = store.abandon(keys, W);
    sim.step(0);
    sim.step(1);
    // H's release hands node 2 to W; node 2 then runs retry k (ours, late) and the abandon.
    expect(release(2, H)).toBe(2);
    sim.step(2);
    await flush();
    sim.step(2);
    await abandon;
    while (sim.pending(2).length > 0) sim.step(2);
    // W is gone: no node holds it or keeps a place for it (a place would make the node wait for W).
    expect(sim.heldBy(W)).toBe(0);
    expect(sim.states.map((s) => s.queue.has(W))).toEqual([false, false, false]);
  });

  it('a late grant to a wait that is still on is given back, keeping its place (the attempt had no majority)', async () => {
    const { sim, release, retryDecidedWithoutNode2 } = await heldByH();
    await retryDecidedWithoutNode2();
    expect(release(2, H)).toBe(2);
    sim.step(2); // retry k on node 2: ours, late; nothing else sent there since
    await flush();
    expect(sim.pending(2)).toEqual(['giveBack']);
    sim.step(2);
    expect(sim.states[2].holder).toBeNull();
    expect(sim.states[2].queue.has(W)).toBe(true);
  });

  it('after a majority of handovers granted the lock, a late grant is kept (part of the hold), and a retry keeps the ticket', async () => {
    const { sim, store, keys, release, retryDecidedWithoutNode2 } = await heldByH();
    await retryDecidedWithoutNode2();
    const ticket = [...sim.states[0].queue].find(([token]) => token === W)?.[1];
    expect(release(2, H)).toBe(2);
    store.handedOver(W, keys.lock); // the channel decided: a majority of nodes handed W the lock
    sim.step(2); // retry k on node 2: ours, late
    await flush();
    expect(sim.pending(2)).toEqual([]); // nothing given back: node 2 is part of W's hold
    expect(sim.states[2].holder).toBe(W);
    // W read the messages too late and asks again: with the same ticket (its place in line), not a later one.
    const sent: string[] = [];
    const run = sim.nodes[0].run.bind(sim.nodes[0]);
    sim.nodes[0].run = (script, operation, k, args, parse) => {
      sent.push(args[ACQUIRE_TICKET]);
      return run(script, operation, k, args, parse);
    };
    const again = store.acquire(keys, W, TTL, true, true);
    for (const i of [0, 1, 2]) sim.step(i);
    await again;
    expect(sent).toEqual([String(ticket)]);
  });

  it('a late grant to a one-shot attempt (no waiting) is given back', async () => {
    const sim = simulatedRedlockNodes(() => ({ holder: H, fence: 40, queue: new Map() }));
    const store = new RedlockStore(sim.nodes, { keyPrefix: 'x:', waiterLease: 3_000, nodeRecoveryDelay: 0, nodeTimeout: 2_000 });
    const keys = store.keysFor('k');
    const attempt = store.acquire(keys, W, TTL, false, false);
    sim.step(0);
    sim.step(1);
    expect(await attempt).toMatchObject({ acquired: false });
    sim.states[2].holder = null; // H's lease on node 2 lapsed
    sim.step(2); // node 2 grants the one-shot attempt, too late
    await flush();
    expect(sim.pending(2)).toEqual(['abandon']);
    sim.step(2);
    expect(sim.heldBy(W)).toBe(0);
  });
});

describe('RedlockTickets: which call to a node was the last', () => {
  it('numbers every tracked call; a later call, or the end of the wait, makes an earlier one not the last', async () => {
    const tickets = new RedlockTickets();
    tickets.of('t', 'lock', false);
    await tickets.track('t', 'lock', 0, 1, Promise.resolve(1), () => 1);
    const first = tickets.lastCallTo('t', 'lock', 0);
    expect(tickets.isLastCall('t', 'lock', 0, first)).toBe(true);
    await tickets.track('t', 'lock', 0, 2, Promise.resolve(1), () => 1);
    expect(tickets.isLastCall('t', 'lock', 0, first)).toBe(false);
    const second = tickets.lastCallTo('t', 'lock', 0);
    tickets.forget('t', 'lock');
    expect(tickets.isLastCall('t', 'lock', 0, second)).toBe(false);
    // A ticket picked again never reuses an old call's number.
    tickets.of('t', 'lock', false);
    await tickets.track('t', 'lock', 0, 3, Promise.resolve(1), () => 1);
    expect(tickets.lastCallTo('t', 'lock', 0)).not.toBe(first);
    expect(tickets.isLastCall('t', 'lock', 0, first)).toBe(false);
  });

  describe('the sweep of forgotten tickets', () => {
    afterEach(() => jest.useRealTimers());

    it('keeps a wait that still makes attempts, however long it has waited', () => {
      jest.useFakeTimers();
      const tickets = new RedlockTickets();
      const waiting = tickets.of('live', 'lock', false);
      const gone = tickets.of('gone', 'lock', false);
      for (let i = 0; i < 10_000; i++) tickets.of(`other${i}`, 'lock', false);
      // Eleven minutes of waiting, asking again every second.
      for (let s = 0; s < 11 * 60; s++) {
        jest.advanceTimersByTime(1_000);
        tickets.of('live', 'lock', true);
      }
      tickets.of('new', 'lock', false); // over 10,000 entries: sweeps those idle for 10 minutes
      expect(tickets.of('live', 'lock', true)).toBe(waiting);
      // An acquisition that stopped asking (its caller vanished) was swept: asked again, it starts over.
      expect(tickets.of('gone', 'lock', true)).not.toBe(gone);
    });

    it('keeps a wait whose waiter lease is longer than the sweep age (it asks again every third of it)', () => {
      jest.useFakeTimers();
      const tickets = new RedlockTickets(60 * 60_000);
      const waiting = tickets.of('live', 'lock', false);
      for (let i = 0; i < 10_000; i++) tickets.of(`other${i}`, 'lock', false);
      jest.advanceTimersByTime(20 * 60_000); // one refresh interval of a 60 min lease
      tickets.of('new', 'lock', false);
      expect(tickets.of('live', 'lock', true)).toBe(waiting);
    });
  });
});

describe('Redlock: a node that lost its script cache', () => {
  const W = 'svcw.3000.w';
  const H = 'svch.3000.h';
  const C = 'svcc.3000.c';
  const TTL = 3_000;
  const scripts: LuaScript[] = Object.values(REDLOCK_SCRIPTS);
  const nameOf = (script: LuaScript) => Object.entries(REDLOCK_SCRIPTS).find(([, v]) => v === script)?.[0];
  const flush = async () => {
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
  };

  /**
   * Real RedlockNodes (ScriptRunner, CommandDeadlines) over fake clients: each connection runs its
   * calls in the order sent, one per `step`, against the simulated nodes, with a per-node script
   * cache that answers NOSCRIPT once a node has lost it.
   */
  function nodesWithScriptCaches() {
    const sim = simulatedRedlockNodes(() => ({ holder: H, fence: 40, queue: new Map() }));
    const caches = [0, 1, 2].map(() => new Set(scripts.map((s) => s.sha)));
    const wire: Array<Array<{ what: string; run: () => void }>> = [[], [], []];
    const client = (i: number) => ({
      status: 'ready',
      options: { host: '127.0.0.1', port: 7000 + i },
      defineCommand: () => undefined,
      duplicate: () => undefined,
      on: () => undefined,
      off: () => undefined,
      evalsha: (sha: string, _keys: string, ...args: string[]) =>
        new Promise((resolve, reject) => {
          const script = scripts.find((s) => s.sha === sha)!;
          wire[i].push({
            what: `EVALSHA ${nameOf(script)}`,
            run: () =>
              caches[i].has(sha) ? resolve(sim.direct(i, script, args)) : reject(new Error('NOSCRIPT No matching script. Please use EVAL.')),
          });
        }),
      eval: (lua: string, _keys: string, ...args: string[]) =>
        new Promise((resolve) => {
          const script = scripts.find((s) => s.lua === lua)!;
          wire[i].push({
            what: `EVAL ${nameOf(script)}`,
            run: () => {
              caches[i].add(script.sha);
              resolve(sim.direct(i, script, args));
            },
          });
        }),
    });
    const nodes = [0, 1, 2].map((i) => new RedlockNode(client(i) as unknown as RedisClient, 60_000, 60_000));
    // A long-running service: every script has been sent on these connections before.
    for (const node of nodes) for (const script of scripts) (node as unknown as { scripts: { sent: Set<LuaScript> } }).scripts.sent.add(script);
    const store = new RedlockStore(nodes, { keyPrefix: 'x:', waiterLease: 3_000, nodeRecoveryDelay: 0, nodeTimeout: 60_000 });
    const ran: string[][] = [[], [], []];
    const step = (i: number) => {
      const next = wire[i].shift();
      if (!next) throw new Error(`nothing sent to node ${i}`);
      ran[i].push(next.what);
      next.run();
    };
    return { sim, caches, store, keys: store.keysFor('k'), step, pending: (i: number) => wire[i].length, ran };
  }

  it('a call answered NOSCRIPT is not sent again behind later calls: a late give-back never overtakes an attempt', async () => {
    const { sim, caches, store, keys, step, pending, ran } = nodesWithScriptCaches();
    const release = (i: number, token: string) =>
      sim.direct(i, REDLOCK_SCRIPTS.release, [keys.lock, keys.fence, keys.queue, keys.waiters, token, 'x:w:', '1']);
    const cAsks = (i: number) =>
      sim.direct(i, REDLOCK_SCRIPTS.acquire, [keys.lock, keys.fence, keys.queue, keys.waiters, 'm', C, String(TTL), '1', '0', '1', '3000']);
    const first = store.acquire(keys, W, TTL, true, false);
    for (const i of [0, 1, 2]) step(i);
    expect(await first).toMatchObject({ acquired: false });
    caches[2].clear(); // node 2 restarted with its data (AOF), or SCRIPT FLUSH: its script cache is empty

    // Retry k: busy on nodes 0 and 1 (decided); node 2 slow. H's release hands nodes 0 and 2 to W; C queues on 1 and 2.
    const k = store.acquire(keys, W, TTL, true, true);
    step(0);
    step(1);
    expect(await k).toMatchObject({ acquired: false });
    expect(release(0, H)).toBe(2);
    expect(release(2, H)).toBe(2);
    cAsks(1);
    cAsks(2);
    // Node 2 runs k: NOSCRIPT. It then runs the next call W sent it (before the fix: k again, as EVAL,
    // whose late grant sends a give-back; after: the give-back for the failed k, as EVAL).
    step(2);
    await flush();
    step(2);
    await flush();
    // W asks again (k+1) while node 2 may still have calls of W's to run.
    const k1 = store.acquire(keys, W, TTL, true, true);
    step(0); // ours on node 0
    await flush();
    while (pending(2) > 0) {
      step(2);
      await flush();
    }
    step(1); // node 1, still H's: busy
    await flush();
    const result = await k1;
    // C asks node 2 again, and H's delayed release reaches node 1.
    cAsks(2);
    release(1, H);
    // Whatever W was told, the nodes agree: never W and C both on a majority, and W holds one if told so.
    if (result.acquired) expect(sim.heldBy(W)).toBeGreaterThanOrEqual(2);
    expect(sim.heldBy(W) >= 2 && sim.heldBy(C) >= 2).toBe(false);
    expect(result.acquired && sim.heldBy(C) >= 2).toBe(false);
    // The fault happened (node 2 answered NOSCRIPT), and every later call there loaded its script.
    expect(ran[2][1]).toBe('EVALSHA acquire');
    expect(ran[2].slice(2).every((what) => what.startsWith('EVAL '))).toBe(true);
  });
});

describe('dropStaleHandover: a handover older than the last busy answer is dropped', () => {
  it('drops a single-store handover at or below the last token a busy answer saw', () => {
    const listener = { handover: { fence: 41, validFor: 1_000, placeLeft: 500 } as Handover | undefined };
    expect(dropStaleHandover(listener, 41)).toBe(true);
    expect(listener.handover).toBeUndefined();
  });

  it('keeps a handover the Redlock channel dated node by node (the busy answers’ highest token may come from a node that did not count)', () => {
    const listener = { handover: { fence: 41, validFor: 1_000, since: 0 } as Handover | undefined };
    expect(dropStaleHandover(listener, 45)).toBe(false);
    expect(listener.handover).toBeDefined();
  });
});
