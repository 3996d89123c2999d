import type { Handover } from '../../lib/core/handover-channel';
import { datedNodeHandover, majorityHandover, NodeHandover } from '../../lib/redis/redlock/redlock-handovers';
import type { RedlockNode } from '../../lib/redis/redlock/redlock-node';
import { REDLOCK_SCRIPTS } from '../../lib/redis/redlock/redlock-scripts';
import { RedlockStore } from '../../lib/redis/redlock/redlock-store';
import { RedlockTickets } from '../../lib/redis/redlock/redlock-tickets';
import { RedlockWakeChannel } from '../../lib/redis/redlock/redlock-wake-channel';
import type { WakeChannel } from '../../lib/redis/wake-channel';
import { monotonicNow } from '../../lib/time/clock';

/**
 * Redlock: a waiter enters on its nodes' handover messages when a majority of them handed it the lock
 * with one fencing token; every other case only wakes it, and its next attempt decides.
 */
describe('Redlock handovers counted from the nodes’ messages', () => {
  const LEASE = 3_000;
  /** When the messages of the dating tests are heard: after every call they set places with. */
  const HEARD = 10_000;

  describe('datedNodeHandover: one node’s message dated by the place that node last confirmed', () => {
    it('counts the lease from the attempt that set the place, plus the time the place had run', () => {
      const dated = datedNodeHandover({ sentAt: 1_000, lastFence: 10 }, { fence: 11, validFor: 2_000, placeLeft: 2_500 }, LEASE, HEARD);
      // The handover came 500 ms (server clock) after the refresh, which ran after the attempt was sent.
      expect(dated).toEqual({ fence: 11, since: 1_000, until: 1_000 + 2_000 + 500 });
    });

    it('is not counted when the node confirmed no place in this wait', () => {
      expect(datedNodeHandover(undefined, { fence: 11, validFor: 2_000, placeLeft: 2_500 }, LEASE, HEARD)).toBeUndefined();
    });

    it('is not counted when the last answer saw its token already (the lease ran out unseen: a stale message)', () => {
      expect(datedNodeHandover({ sentAt: 1_000, lastFence: 11 }, { fence: 11, validFor: 2_000, placeLeft: 2_500 }, LEASE, HEARD)).toBeUndefined();
      expect(datedNodeHandover({ sentAt: 1_000, lastFence: 12 }, { fence: 11, validFor: 2_000, placeLeft: 2_500 }, LEASE, HEARD)).toBeUndefined();
    });

    it('is not counted when the place was set by a call sent after the message was heard (that call ran after the grant)', () => {
      const handover = { fence: 11, validFor: 2_000, placeLeft: 2_500 };
      expect(datedNodeHandover({ sentAt: 1_000, lastFence: 0 }, handover, LEASE, 1_000)).toBeUndefined();
      expect(datedNodeHandover({ sentAt: 1_001, lastFence: 0 }, handover, LEASE, 1_000)).toBeUndefined();
      expect(datedNodeHandover({ sentAt: 999, lastFence: 0 }, handover, LEASE, 1_000)).toEqual({ fence: 11, since: 999, until: 999 + 2_000 + 500 });
    });
  });

  describe('majorityHandover', () => {
    const node = (fence: number, since: number, until: number): NodeHandover => ({ fence, since, until });

    it('a majority with one token is the lock: the shortest lease, from the earliest place', () => {
      expect(majorityHandover([node(50, 100, 900), node(50, 120, 800)], 2, 0)).toEqual({ fence: 50, since: 100, validFor: 700 });
    });

    it('fewer than a majority: wait for the others', () => {
      expect(majorityHandover([node(50, 100, 900)], 2, 0)).toBeUndefined();
      expect(majorityHandover([node(50, 100, 900), node(50, 100, 900)], 3, 0)).toBeUndefined();
    });

    it('a majority that does not agree on the highest token: ask (the attempt writes the token back)', () => {
      expect(majorityHandover([node(50, 100, 900), node(51, 100, 900)], 2, 0)).toBe('ask');
      expect(majorityHandover([node(50, 100, 900), node(50, 100, 900), node(51, 100, 900)], 2, 0)).toBe('ask');
    });

    it('the agreeing majority must hold the highest token any of them issued', () => {
      expect(majorityHandover([node(51, 100, 900), node(50, 100, 900), node(51, 110, 700)], 2, 0)).toEqual({ fence: 51, since: 100, validFor: 600 });
    });

    it('a handover whose lease has ended (heard in an earlier round of the wait) is not counted', () => {
      expect(majorityHandover([node(50, 100, 900), node(50, 100, 400)], 2, 500)).toBeUndefined();
      // A 400 ms lease ending at 500 with its drift allowance (2 ms + 1 %): counted before 494, not from then.
      expect(majorityHandover([node(50, 100, 900), node(50, 100, 500)], 2, 493)).toEqual({ fence: 50, since: 100, validFor: 400 });
      expect(majorityHandover([node(50, 100, 900), node(50, 100, 500)], 2, 494)).toBeUndefined();
      expect(majorityHandover([node(50, 100, 900), node(50, 100, 400), node(50, 100, 800)], 2, 500)).toEqual({
        fence: 50,
        since: 100,
        validFor: 700,
      });
    });

    it('a majority whose combined lease has ended (the drift of its longer span counted) is not a grant: ask', () => {
      // Each node's own lease still runs at 950 (ends 988 and 1,037 after their drift), but counted from
      // the earliest place to the shortest end (6,000 ms) the drift allowance is 62 ms: it ended at 938.
      const majority = [node(50, 0, 1_000), node(50, -5_000, 1_100)];
      expect(majorityHandover(majority, 2, 930)).toEqual({ fence: 50, since: -5_000, validFor: 6_000 });
      expect(majorityHandover(majority, 2, 938)).toBe('ask');
      expect(majorityHandover(majority, 2, 950)).toBe('ask');
    });
  });

  /** Node `node` answered a call sent at `sentAt` with a place, the key's last token then being `lastFence`. */
  const place = (tickets: RedlockTickets, node: number, sentAt: number, lastFence: number): Promise<number> =>
    tickets.track('t', 'lock', node, sentAt, Promise.resolve(lastFence), (fence) => fence);

  /** The tickets of one acquisition ('t' on 'lock') that has made its first attempt. */
  const waitingTickets = (): RedlockTickets => {
    const tickets = new RedlockTickets();
    tickets.of('t', 'lock', false);
    return tickets;
  };
  const placeOf = (tickets: RedlockTickets, node: number) => tickets.placeOn('t', 'lock', node);

  describe('RedlockTickets places', () => {
    it('a late answer never replaces a later attempt’s place', async () => {
      const tickets = waitingTickets();
      await place(tickets, 1, 200, 20);
      await place(tickets, 1, 100, 10);
      expect(placeOf(tickets, 1)).toEqual({ sentAt: 200, lastFence: 20 });
      await place(tickets, 1, 300, 30);
      expect(placeOf(tickets, 1)).toEqual({ sentAt: 300, lastFence: 30 });
    });

    it('a first attempt starts with no places; a finished acquisition keeps none', async () => {
      const tickets = waitingTickets();
      await place(tickets, 0, 1, 1);
      tickets.of('t', 'lock', false);
      expect(placeOf(tickets, 0)).toBeUndefined();
      await place(tickets, 0, 1, 1);
      tickets.forget('t', 'lock');
      expect(placeOf(tickets, 0)).toBeUndefined();
      await place(tickets, 0, 1, 1); // after forget: not recorded
      expect(placeOf(tickets, 0)).toBeUndefined();
    });
  });

  describe('RedlockTickets: calls on their way', () => {
    it('while a call to a node is on its way, that node’s place is not known (it may undo a handover)', async () => {
      const tickets = waitingTickets();
      await place(tickets, 0, 100, 40);
      let answer!: (fence: number) => void;
      const call = tickets.track('t', 'lock', 0, 200, new Promise<number>((resolve) => (answer = resolve)), (fence) => fence);
      expect(placeOf(tickets, 0)).toBeUndefined();
      answer(41);
      await call;
      expect(placeOf(tickets, 0)).toEqual({ sentAt: 200, lastFence: 41 });
    });

    it('a call that failed leaves the place unknown until the next answer (it may have run)', async () => {
      const tickets = waitingTickets();
      await place(tickets, 0, 100, 40);
      await expect(tickets.track('t', 'lock', 0, 200, Promise.reject(new Error('timeout')), (fence: number) => fence)).rejects.toThrow('timeout');
      expect(placeOf(tickets, 0)).toBeUndefined();
      await place(tickets, 0, 300, 42);
      expect(placeOf(tickets, 0)).toEqual({ sentAt: 300, lastFence: 42 });
    });

    it('an answer that leaves no place keeps the one before', async () => {
      const tickets = waitingTickets();
      await place(tickets, 0, 100, 40);
      await tickets.track('t', 'lock', 0, 200, Promise.resolve('recovering'), () => undefined);
      expect(placeOf(tickets, 0)).toEqual({ sentAt: 100, lastFence: 40 });
    });
  });

  const GRACE_MS = 20;

  /** Three node channels; `registered[i]` is the wake function registered on node i (the test delivers its messages). */
  function nodeChannels(): { channels: WakeChannel[]; registered: Array<((handover?: Handover) => void) | undefined> } {
    const registered: Array<((handover?: Handover) => void) | undefined> = [];
    const channels = [0, 1, 2].map(
      (i) =>
        ({
          register: (_token: string, _lock: string, wake: (handover?: Handover) => void) => {
            registered[i] = wake;
            return () => (registered[i] = undefined);
          },
        }) as unknown as WakeChannel,
    );
    return { channels, registered };
  }

  describe('RedlockWakeChannel', () => {
    const GRACE = GRACE_MS;
    /** Places are dated on the monotonic clock: a handover's lease must not have ended already. */
    const t0 = Math.floor(monotonicNow());

    /** Three node channels whose registered wake functions the test calls, and the places the store knows. */
    function setup() {
      const { channels, registered } = nodeChannels();
      const tickets = waitingTickets();
      const handedOver: string[] = [];
      const channel = new RedlockWakeChannel(
        channels,
        {
          datedHandover: (token, lock, node, handover, heardAt) =>
            handover.since === undefined ? datedNodeHandover(tickets.placeOn(token, lock, node), handover, LEASE, heardAt) : undefined,
          handedOver: (token) => void handedOver.push(token),
        },
        GRACE,
      );
      const wakes: Array<Handover | undefined> = [];
      const unregister = channel.register('t', 'lock', (handover) => wakes.push(handover));
      const message = (node: number, fence: number) => registered[node]?.({ fence, validFor: 2_000, placeLeft: LEASE });
      return { tickets, wakes, unregister, message, registered, handedOver };
    }
    const settle = () => new Promise((resolve) => setTimeout(resolve, GRACE + 30));

    it('two nodes handing over with one token: the waiter gets the lock, dated by the earlier place', async () => {
      const { tickets, wakes, unregister, message, handedOver } = setup();
      await place(tickets, 0, t0, 40);
      await place(tickets, 2, t0 - 10, 40);
      message(0, 41);
      expect(wakes).toEqual([]);
      message(2, 41);
      expect(wakes).toEqual([{ fence: 41, since: t0 - 10, validFor: 2_000 }]);
      expect(handedOver).toEqual(['t']); // the store ends the acquisition's wait
      await settle();
      expect(wakes).toHaveLength(1); // no grace wake-up after the decision
      unregister();
    });

    it('one node only: after the grace the waiter is woken to ask (no handover)', async () => {
      const { tickets, wakes, unregister, message } = setup();
      await place(tickets, 1, t0, 40);
      message(1, 41);
      await settle();
      expect(wakes).toEqual([undefined]);
      unregister();
    });

    it('a stale message does not count toward the majority', async () => {
      const { tickets, wakes, unregister, message } = setup();
      await place(tickets, 0, t0, 41); // node 0's last answer saw token 41 already
      await place(tickets, 1, t0, 40);
      message(0, 41);
      message(1, 41);
      expect(wakes).toEqual([]);
      await settle();
      expect(wakes).toEqual([undefined]);
      unregister();
    });

    it('a message heard before the answer that dates it counts once that answer is in', async () => {
      const { tickets, wakes, unregister, message } = setup();
      await place(tickets, 0, t0, 40);
      message(1, 41); // node 1's answer to the attempt is not read yet
      await place(tickets, 1, t0, 40);
      message(0, 41);
      expect(wakes).toEqual([{ fence: 41, since: t0, validFor: 2_000 }]);
      unregister();
    });

    it('a message is never dated by a call sent after it was heard (a node restarted empty answers it with a lower last token)', async () => {
      const { tickets, wakes, unregister, message } = setup();
      await place(tickets, 0, t0, 40);
      let fail!: (error: Error) => void;
      const onItsWay = tickets.track('t', 'lock', 1, t0, new Promise<number>((_resolve, reject) => (fail = reject)), (fence) => fence);
      message(1, 41); // heard while node 1's call is on its way: not counted
      fail(new Error('connection lost')); // node 1 restarts empty
      await onItsWay.catch(() => undefined);
      // A give-back sent to node 1 after the restart: the node's last token is gone, it answers 0.
      await place(tickets, 1, monotonicNow(), 0);
      message(0, 41);
      expect(wakes.filter((w) => w !== undefined)).toEqual([]); // before: a grant on nodes 0 and 1
      unregister();
    });

    it('nodes that disagree on the token: woken to ask at once', async () => {
      const { tickets, wakes, unregister, message } = setup();
      await place(tickets, 0, t0, 40);
      await place(tickets, 1, t0, 40);
      message(0, 41);
      message(1, 42);
      expect(wakes).toEqual([undefined]);
      unregister();
    });

    it('unregistering stops a pending grace timer and every node channel', async () => {
      const { tickets, wakes, unregister, message, registered } = setup();
      await place(tickets, 0, t0, 40);
      message(0, 41);
      unregister();
      await settle();
      expect(wakes).toEqual([]);
      expect(registered.every((r) => r === undefined)).toBe(true);
    });
  });

  describe('RedlockStore and its channel together', () => {
    /**
     * Three scripted nodes: each acquire call answers with the next reply queued for that node (raw,
     * as the script replies), or waits for the test to answer it. Give-backs answer at once.
     */
    function scriptedNodes() {
      const replies: unknown[][] = [[], [], []];
      const held: Array<Array<(raw: unknown) => void>> = [[], [], []];
      const gaveBack: number[] = [];
      const nodes = [0, 1, 2].map(
        (i) =>
          ({
            run: (script: unknown, _op: string, _keys: unknown, _args: unknown, parse?: (raw: unknown) => unknown) => {
              const answer = (raw: unknown) => (parse ? parse(raw) : raw);
              if (script === REDLOCK_SCRIPTS.giveBack) {
                gaveBack.push(i);
                return Promise.resolve(answer('41'));
              }
              if (script !== REDLOCK_SCRIPTS.acquire) return Promise.resolve(answer(1));
              if (replies[i].length > 0) return Promise.resolve(answer(replies[i].shift()));
              return new Promise((resolve) => held[i].push((raw) => resolve(answer(raw))));
            },
          }) as unknown as RedlockNode,
      );
      return { nodes, replies, held, gaveBack };
    }
    const flush = () => new Promise((resolve) => setImmediate(resolve));

    it('a node whose attempt is still on its way is not counted: its late grant is given back, and the waiter is not told it holds it', async () => {
      const { nodes, replies, held, gaveBack } = scriptedNodes();
      const store = new RedlockStore(nodes, { keyPrefix: 'x:', waiterLease: LEASE, nodeRecoveryDelay: 0, nodeTimeout: 1_000 });
      const { channels, registered } = nodeChannels();
      const channel = new RedlockWakeChannel(channels, store, GRACE_MS);
      const keys = store.keysFor('k');
      const token = 'svc.3000.w';
      const wakes: Array<Handover | undefined> = [];
      const unregister = channel.register(token, keys.lock, (handover) => wakes.push(handover));
      try {
        // First attempt: queued on every node, the key's last token 40 everywhere.
        for (const r of replies) r.push([0, 2_000, 1, '40', 'holder.3000.h']);
        expect(await store.acquire(keys, token, 3_000, true, false)).toMatchObject({ acquired: false });
        // A retry: nodes 1 and 2 answer busy at once (they run it before the release reaches them);
        // node 0's answer is slow. Busy is decided without it.
        replies[1].push([0, 500, 1, '40', 'holder.3000.h']);
        replies[2].push([0, 500, 1, '40', 'holder.3000.h']);
        expect(await store.acquire(keys, token, 3_000, true, true)).toMatchObject({ acquired: false });
        // The release hands every node to us (token 41); nodes 0 and 1 say so before node 0's answer is read.
        registered[0]?.({ fence: 41, validFor: 2_000, placeLeft: LEASE });
        registered[1]?.({ fence: 41, validFor: 2_000, placeLeft: LEASE });
        // Node 0 ran the retry after its handover: the lock is ours there, but this attempt has no
        // majority, so node 0 is given back (its lock deleted). Counting node 0's message would be a double grant.
        held[0].shift()?.([1, '41', '1900']);
        await flush();
        await flush();
        expect(gaveBack).toEqual([0]);
        expect(wakes.filter((w) => w !== undefined)).toEqual([]);
        // Only node 1's message counts: after the grace the waiter asks again, and its attempt decides.
        await new Promise((resolve) => setTimeout(resolve, GRACE_MS + 30));
        expect(wakes).toEqual([undefined]);
      } finally {
        unregister();
      }
    });
  });
});
