/**
 * The Redis names of one lock (lock, fencing counter, queue, waiters): one Cluster slot whatever
 * the user's key contains, and injective (two different keys never share a name). Slots are
 * computed the way Redis computes them (test/harness/redis-key-slot.ts), and must also be where
 * ioredis' `cluster-key-slot` routes them, or every call would bounce between nodes (MOVED).
 */
import fc from 'fast-check';
import { LockOptionsError, LockService } from '../../lib';
import { lockRedisKeys } from '../../lib/redis/lock-redis-keys';
import { redisKeySlot } from '../harness/redis-key-slot';

// No type declarations ship with it; it is the function ioredis routes every Cluster command by.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const ioredisSlot = require('cluster-key-slot') as (key: string) => number;

/** The one slot of all the names, or a description of the disagreement. */
const slotsOf = (names: string[]) => ({ redis: new Set(names.map(redisKeySlot)), ioredis: new Set(names.map(ioredisSlot)) });
const expectOneSlot = (names: string[]) => {
  const { redis, ioredis } = slotsOf(names);
  expect(redis.size).toBe(1);
  expect([...ioredis]).toEqual([...redis]);
};

const namesOf = (prefix: string, key: string): string[] => {
  const k = lockRedisKeys(prefix, key);
  return [k.lock, k.fence, k.queue, k.waiters];
};

// Braces, the escape's own text and the suffix letters, so that hash-tag and escaping edge cases
// come up in almost every run; plus any well-formed Unicode text.
const trickyUnit = fc.constantFrom('{', '}', '%', '7', 'D', 'B', '2', '5', ':', 'f', 'q', 'w', 'a');
const tricky = fc.string({ minLength: 1, maxLength: 12, unit: trickyUnit });
const anyKey = fc.oneof(tricky, fc.string({ minLength: 1, maxLength: 20, unit: 'binary' }));
// Prefixes with braces are refused by the module options (they would decide the slot themselves).
const prefix = fc.oneof(fc.constant('lock:'), fc.string({ maxLength: 6, unit: fc.constantFrom('l', ':', '%', '7', 'D', '-') }));

/** The same key, except that one spot holds a character in one and its escaped spelling (or a suffix look-alike) in the other. */
const LOOKALIKES: ReadonlyArray<readonly [string, string]> = [
  ['}', '%7D'],
  ['%', '%25'],
  ['%7D', '%257D'],
  ['{', '%7B'],
  ['}', '}}'],
  ['', '}:f'],
  ['', '}:q'],
  ['', ':w'],
];
const lookalikePair = fc.tuple(tricky, fc.nat(), fc.constantFrom(...LOOKALIKES), fc.boolean()).map(([s, n, [x, y], flip]) => {
  const at = n % (s.length + 1);
  const a = s.slice(0, at) + x + s.slice(at);
  const b = s.slice(0, at) + y + s.slice(at);
  return flip ? ([b, a] as const) : ([a, b] as const);
});

describe('lockRedisKeys', () => {
  it.each(['}x', '{}', '}', '{', 'a}b{c', '%7D', '}}', '{x}', '%', 'order:42'])('puts every name of %p in one slot', (key) => {
    expectOneSlot(namesOf('lock:', key));
  });

  it('keeps the readable names of keys without "%" or "}" (lock:{order:42}, lock:{order:42}:f, …)', () => {
    expect(namesOf('lock:', 'order:42')).toEqual(['lock:{order:42}', 'lock:{order:42}:f', 'lock:{order:42}:q', 'lock:{order:42}:w']);
    expect(lockRedisKeys('lock:', '{tag}').lock).toBe('lock:{{tag%7D}');
    expect(lockRedisKeys('lock:', '100%').lock).toBe('lock:{100%25}');
  });

  it('puts every name of one lock in one slot, for any key and prefix (2,000 runs)', () => {
    fc.assert(
      fc.property(prefix, anyKey, (p, key) => {
        expectOneSlot(namesOf(p, key));
      }),
      { numRuns: 2_000 },
    );
  });

  it('is injective: different keys share no name, look-alikes included (2,000 runs)', () => {
    fc.assert(
      fc.property(prefix, fc.oneof(lookalikePair, fc.tuple(tricky, tricky)), (p, [a, b]) => {
        const first = namesOf(p, a);
        const second = namesOf(p, b);
        expect(new Set(first).size).toBe(4);
        if (a === b) expect(second).toEqual(first);
        else expect(first.filter((name) => second.includes(name))).toEqual([]);
      }),
      { numRuns: 2_000 },
    );
  });
});

describe('keyPrefix', () => {
  // A brace in the prefix comes before the key's hash tag, so it could decide the slot of every
  // lock (all locks on one node) or, as `{}`, scatter one lock's names over several slots.
  it.each(['lock{}:', '{app}:', 'lock{', 'lock}'])('refuses braces in %p when the service is made', (keyPrefix) => {
    const make = () => void new LockService({ redis: 'redis://127.0.0.1:1', keyPrefix }).close(); // closed if it was made
    expect(make).toThrow(LockOptionsError);
    expect(make).toThrow(/"keyPrefix": ".*" contains "[{}]".*hash tag/);
  });
});
