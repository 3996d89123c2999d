import { AcquisitionStand, lateAnswerAction, LateAnswerAction } from '../../lib/redis/redlock/late-answers';
import type { NodeAcquire } from '../../lib/redis/redlock/node-acquire';
import type { Vote } from '../../lib/redis/redlock/quorum';
import { RedlockStore } from '../../lib/redis/redlock/redlock-store';
import { simulatedRedlockNodes } from '../harness/simulated-redlock-nodes';

/**
 * Redlock: what a node's answer to an acquire does when it comes after the attempt was decided, or after the node's
 * deadline (a user's client replaying it after a reconnect: test/e2e/redlock-user-client-replay.spec.ts runs that on
 * real servers). The rule (late-answers.ts), and the wins the store keeps for it.
 */
describe('Redlock: late answers to an acquire', () => {
  const grant: Vote<NodeAcquire> = { ok: true, value: { kind: 'ours', fence: 7, validFor: 3_000 } };
  const queued: Vote<NodeAcquire> = { ok: true, value: { kind: 'busy', holderTtl: 1_000, position: 1, lastFence: 6, holder: 'h' } };
  const busy: Vote<NodeAcquire> = { ok: true, value: { kind: 'busy', holderTtl: 1_000, position: -1, lastFence: 6, holder: 'h' } };
  const recovering: Vote<NodeAcquire> = { ok: true, value: { kind: 'recovering', left: 500 } };
  const failed: Vote<NodeAcquire> = { ok: false, error: new Error('timed out') };

  it.each<[string, Vote<NodeAcquire>, AcquisitionStand, boolean, boolean, LateAnswerAction]>([
    ['a busy answer that took no place', busy, 'over', false, false, 'nothing'],
    ['a node in its recovery delay', recovering, 'over', false, false, 'nothing'],
    // The holder's own token: one more node holding the lock for it, freed by its release; never deleted under it.
    ['a grant to a lock still held', grant, 'holding', false, false, 'nothing'],
    ['a grant to a lock still held, the node reconnected', grant, 'holding', true, false, 'nothing'],
    ['a place of a lock still held', queued, 'holding', true, false, 'nothing'],
    // A waiter's own place is kept; its grant goes back (keeping the place) only while no later call can count it.
    ['a waiter: its place', queued, 'waiting', true, false, 'nothing'],
    ['a waiter: a grant, its last call there', grant, 'waiting', true, false, 'give-back'],
    ['a waiter: a failure, its last call there', failed, 'waiting', true, false, 'give-back'],
    ['a waiter: a grant, a later call sent since', grant, 'waiting', false, false, 'nothing'],
    // Over: nobody uses the token. Abandoned, unless the end's clean-up runs after it on the same connection.
    ['over: a grant nothing cleaned up after (busy one-shot, or replayed after a reconnect)', grant, 'over', false, false, 'abandon'],
    ['over: a place nothing cleaned up after', queued, 'over', false, false, 'abandon'],
    ['over: a failure nothing cleaned up after', failed, 'over', false, false, 'abandon'],
    ['over: a grant its release ran after', grant, 'over', false, true, 'nothing'],
  ])('%s', (_, vote, stand, lastCall, cleanedUpAfter, action) => {
    expect(lateAnswerAction(vote, stand, lastCall, cleanedUpAfter)).toBe(action);
  });

  describe('a win before every node answered', () => {
    const T = 'svct.3000.t';
    const H = 'svch.3000.h';
    const flush = () => new Promise((resolve) => setImmediate(resolve));

    function nodes(holders: Array<string | null> = [null, null, null]) {
      let i = 0;
      const sim = simulatedRedlockNodes(() => ({ holder: holders[i++], fence: 0, queue: new Map() }));
      const store = new RedlockStore(sim.nodes, { keyPrefix: 'x:', waiterLease: 3_000, nodeRecoveryDelay: 0, nodeTimeout: 2_000 });
      return { sim, store, keys: store.keysFor('k') };
    }

    /** Nodes 0 and 1 grant T: won, node 2 not answered yet. */
    async function wonWithoutNode2({ sim, store, keys }: ReturnType<typeof nodes>): Promise<void> {
      const attempt = store.acquire(keys, T, 3_000, false, false);
      sim.step(0);
      sim.step(1);
      expect(await attempt).toMatchObject({ acquired: true });
      expect(sim.pending(2)).toEqual(['acquire']);
    }

    it("is kept while the lock is held: node 2's late grant is the holder's (nothing is sent after it); its end frees it, and nothing is kept after", async () => {
      const set = nodes();
      const { sim, store, keys } = set;
      await wonWithoutNode2(set);
      expect(store.winsWithAnswersDue.size).toBe(1);
      sim.step(2);
      await flush();
      expect(sim.pending(2)).toEqual([]);
      expect(sim.heldBy(T)).toBe(3);
      // The lock's end (abandon, as after a loss; a release forgets it the same way).
      const ended = store.abandon(keys, T);
      expect(store.winsWithAnswersDue.size).toBe(0);
      for (const i of [0, 1, 2]) sim.step(i);
      await ended;
      expect(sim.heldBy(T)).toBe(0);
    });

    it('ended before the slow node answered, on the same connection: its clean-up runs after the grant there, and no script more is sent', async () => {
      const set = nodes();
      const { sim, store, keys } = set;
      await wonWithoutNode2(set);
      const ended = store.abandon(keys, T);
      // Node 2 runs the acquire (its answer now comes for a lock that is over), then the clean-up sent behind it.
      sim.step(0);
      sim.step(1);
      sim.step(2);
      await flush();
      expect(sim.pending(2)).toEqual(['abandon']);
      sim.step(2);
      await ended;
      await flush();
      expect(sim.pending(2)).toEqual([]);
      expect(sim.heldBy(T)).toBe(0);
    });

    it('a win every node answered keeps nothing (no answer of it is left to come)', async () => {
      // Node 1 held by H: no majority either way until node 2 answers.
      const { sim, store, keys } = nodes([null, H, null]);
      const attempt = store.acquire(keys, T, 3_000, false, false);
      for (const i of [0, 1, 2]) sim.step(i);
      expect(await attempt).toMatchObject({ acquired: true });
      expect(store.winsWithAnswersDue.size).toBe(0);
    });
  });
});
