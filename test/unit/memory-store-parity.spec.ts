/**
 * The in-memory store (lib/testing) answers as the Redis store's Lua scripts do: the same random
 * sequences of operations (acquire with or without a queue place, retries, release, abandon, extend,
 * isLocked, and pauses that let queue places lapse) from several services on two keys are sent to
 * both, and every reply and every handover message (who was handed which key) must match.
 */
import fc from 'fast-check';
import type Redis from 'ioredis';
import type { AcquireReply, LockKeys, LockStore } from '../../lib/core/lock-store';
import { lockRedisKeys } from '../../lib/redis/lock-redis-keys';
import { RedisLockStore } from '../../lib/redis/redis-lock-store';
import { MemoryLockSpace } from '../../lib/testing/memory-lock-space';
import { MemoryLockStore } from '../../lib/testing/memory-lock-store';
import { RedisProcess, type SharedRedis } from '../harness/redis-process';

const LONG = 60_000;
/** Service 0 holds for SHORT_TTL, the others for LONG: a short pause lets only its leases lapse. */
const SHORT_TTL = 300;
/** Waiters' places lapse after this, their queue after twice this (without a refresh). */
const WAITER_LEASE = 800;
/**
 * Past SHORT_TTL, before WAITER_LEASE; past twice WAITER_LEASE. Each with at least 200 ms of margin on
 * both clocks, and SHORT_TTL far above the time between two operations: with a 100 ms lease a
 * collector pause in a long jest run once let service 0's lock lapse on Redis between two steps.
 */
const PAUSES = { short: 500, long: 2_000 } as const;
const ttlOf = (client: number) => (client === 0 ? SHORT_TTL : LONG);
const KEYS = ['p:a', 'p:b'] as const;
const CLIENTS = 3;

type Op =
  | { kind: 'acquire'; key: number; client: number; joinQueue: boolean; retry: boolean }
  | { kind: 'release' | 'abandon' | 'extend'; key: number; client: number }
  | { kind: 'isLocked'; key: number }
  | { kind: 'pause'; length: keyof typeof PAUSES };

const keyArb = fc.integer({ min: 0, max: 1 });
const clientArb = fc.integer({ min: 0, max: CLIENTS - 1 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant('pause' as const), length: fc.constantFrom('short' as const, 'long' as const) }), weight: 1 },
  {
    arbitrary: fc.record({ kind: fc.constant('acquire' as const), key: keyArb, client: clientArb, joinQueue: fc.boolean(), retry: fc.boolean() }),
    weight: 12,
  },
  {
    arbitrary: fc.record({ kind: fc.constantFrom('release' as const, 'abandon' as const, 'extend' as const), key: keyArb, client: clientArb }),
    weight: 8,
  },
  { arbitrary: fc.record({ kind: fc.constant('isLocked' as const), key: keyArb }), weight: 2 },
);

const acquire = (client: number, joinQueue = true, retry = false): Op => ({ kind: 'acquire', key: 0, client, joinQueue, retry });
const release = (client: number): Op => ({ kind: 'release', key: 0, client });
const pause = (length: keyof typeof PAUSES): Op => ({ kind: 'pause', length });

/** Sequences that random ones reach rarely, always run first. */
const SCENARIOS: Op[][] = [
  // The holder's lease lapses with a live waiter queued: the key is promised to it (-1), a newcomer cannot barge in.
  [acquire(0), acquire(1), pause('short'), acquire(2), acquire(2, false), acquire(1, true, true), release(1), acquire(2, true, true)],
  // A queue nobody refreshed lapses as a whole: a newcomer is its head.
  [acquire(1), acquire(2), pause('long'), acquire(0), release(1), acquire(0, true, true)],
  // A release skips waiters whose place lapsed and hands the key to the first live one.
  [acquire(1), acquire(2), pause('short'), pause('short'), acquire(0), release(1), acquire(0, true, true), acquire(2, true, true)],
  // A waiter's retry refreshes its place: it is still live when the place it first took would have lapsed.
  [acquire(1), acquire(2), pause('short'), acquire(2, true, true), pause('short'), release(1), acquire(2, true, true)],
  // abandon() of a free key promised to a waiter passes it on.
  [acquire(0), acquire(1), pause('short'), { kind: 'abandon', key: 0, client: 2 }, acquire(1, true, true)],
];

/** A handover as its waiter's service hears it. */
interface Heard {
  token: string;
  key: number;
  fence: number;
}

/** One store under test, with what it told each service (handovers) and the fencing tokens it handed out per key. */
interface Side {
  store: LockStore;
  keys: LockKeys[];
  /** Handovers heard and not yet described. */
  heard: Heard[];
  /** Handovers described: who got which key, with a new fencing token or not. */
  handovers: string[];
  lastFence: number[];
  /** Everything published so far has been heard. */
  settle(): Promise<void>;
}

/** Describes what was heard since the last call: the fencing token by what it means, as for replies. */
function describeHandovers(side: Side): void {
  for (const { token, key, fence } of side.heard.splice(0)) {
    side.handovers.push(`${token} ${KEYS[key]} ${fence > side.lastFence[key] ? 'new' : 'NOT NEW'}`);
    side.lastFence[key] = Math.max(side.lastFence[key], fence);
  }
}

describe('in-memory store parity with the Redis scripts', () => {
  let redis: SharedRedis;
  let client: Redis;
  let subscriber: Redis;
  let run = 0;
  const listeners = new Map<string, (message: string) => void>();

  beforeAll(async () => {
    redis = await RedisProcess.shared();
    client = redis.client();
    subscriber = redis.client();
    await subscriber.psubscribe('parity*');
    subscriber.on('pmessage', (_pattern: string, channel: string, message: string) => {
      listeners.get(channel.slice(0, channel.indexOf('waiters:')))?.(message);
    });
  });
  afterAll(() => redis.stop());

  function redisSide(prefix: string): Side {
    const keys = KEYS.map((k) => lockRedisKeys(prefix, k));
    const side: Side = {
      store: new RedisLockStore(client, prefix, 2_000, WAITER_LEASE),
      keys,
      heard: [],
      handovers: [],
      lastFence: [0, 0],
      // A reply on the subscriber connection comes after every message published before it.
      settle: async () => {
        await subscriber.ping();
        describeHandovers(side);
      },
    };
    // `<token> <fence> <lease ms> <place ms left> <lock key>`
    listeners.set(prefix, (message) => {
      const [token, fence, , , lock] = message.split(' ');
      side.heard.push({ token, key: keys.findIndex((k) => k.lock === lock), fence: Number(fence) });
    });
    return side;
  }

  function memorySide(tokens: string[]): Side {
    const space = new MemoryLockSpace();
    const store = new MemoryLockStore(space, 'parity:', WAITER_LEASE);
    const side: Side = {
      store,
      keys: KEYS.map((k) => store.keysFor(k)),
      heard: [],
      handovers: [],
      lastFence: [0, 0],
      settle: () => Promise.resolve(describeHandovers(side)),
    };
    tokens.forEach((token, i) => {
      const channel = space.subscribe(`s${i}`);
      side.keys.forEach((keys, k) => channel.register(token, keys.lock, (handover) => side.heard.push({ token, key: k, fence: handover.fence })));
    });
    return side;
  }

  /** A reply as the engine reads it: fencing tokens by what they mean (new, the last one), not by value (each store has its clock). */
  function describeReply(side: Side, key: number, reply: AcquireReply): string {
    if (!reply.acquired) {
      const ttl = reply.holderTtl > 0 ? 'held' : String(reply.holderTtl);
      return `busy ${ttl} position ${reply.position} lastFence ${reply.lastFence === side.lastFence[key] ? 'last' : 'OTHER'}`;
    }
    const fence = reply.fence > side.lastFence[key] ? 'new' : reply.fence === side.lastFence[key] ? 'last' : 'LOWER';
    side.lastFence[key] = Math.max(side.lastFence[key], reply.fence);
    // A fresh grant reports the ttl asked for; a lock found handed over (its token is the last), what is left of it (ms, each store's clock).
    const validFor = fence === 'new' ? String(reply.validFor) : reply.validFor > 0 ? 'some' : String(reply.validFor);
    return `acquired ${fence} validFor ${validFor}`;
  }

  async function apply(side: Side, op: Op, token: (client: number) => string): Promise<string> {
    if (op.kind === 'pause') return 'paused';
    const ttl = ttlOf(op.kind === 'isLocked' ? 0 : op.client);
    const keys = side.keys[op.key];
    switch (op.kind) {
      case 'acquire':
        return describeReply(side, op.key, await side.store.acquire(keys, token(op.client), ttl, op.joinQueue, op.retry));
      case 'release':
        return side.store.release(keys, token(op.client));
      case 'abandon':
        await side.store.abandon(keys, token(op.client));
        return `abandoned, locked ${String(await side.store.isLocked(keys))}`;
      case 'extend':
        return String(await side.store.extend(keys, token(op.client), ttl));
      case 'isLocked':
        return String(await side.store.isLocked(keys));
    }
  }

  it('gives the same replies and hands over to the same waiters, for random operation sequences', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 5, maxLength: 30 }), async (ops) => {
        run++;
        // One owner token per service and run (a service retries with the token it queued under), the same on both sides.
        const tokens = Array.from({ length: CLIENTS }, (_, i) => `s${i}.${ttlOf(i)}.r${run}`);
        const onRedis = redisSide(`parity${run}:`);
        const inMemory = memorySide(tokens);
        const transcript: string[] = [];
        for (const op of ops) {
          if (op.kind === 'pause') await new Promise((resolve) => setTimeout(resolve, PAUSES[op.length]));
          const a = await apply(onRedis, op, (c) => tokens[c]);
          const b = await apply(inMemory, op, (c) => tokens[c]);
          await onRedis.settle();
          await inMemory.settle();
          transcript.push(`${JSON.stringify(op)} → redis: ${a} | memory: ${b}`);
          if (a !== b || onRedis.handovers.join() !== inMemory.handovers.join()) {
            throw new Error(
              `stores differ:\n${transcript.join('\n')}\nhandovers redis: ${onRedis.handovers.join(', ')}\nhandovers memory: ${inMemory.handovers.join(', ')}`,
            );
          }
        }
      }),
      // Stop at the first difference (its transcript says it all): shrinking would replay the pauses.
      { numRuns: 20, endOnFailure: true, examples: SCENARIOS.map((ops) => [ops] as [Op[]]) },
    );
  });
});
