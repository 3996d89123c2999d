/**
 * How many keys one lock may be asked to take (MAX_KEYS_PER_LOCK = 1,000), checked where every list of keys
 * passes before its keys are read: normalizeKeys (acquire, tryAcquire, withLock) and a `@Locked` key function's
 * result; an array of key templates is checked when the class is defined. Counted on the list as given,
 * duplicates included, so a list of any length is refused without being walked. Before, nothing bounded it:
 * 15,000 keys took 3.4 s of round trips under a 2 s waitTimeout, and every entry was checked and sorted first.
 */
import 'reflect-metadata';
import { LockKeyError, Locked } from '../../lib';
import { compileKeySource } from '../../lib/keys/key-source';
import { MAX_KEYS_PER_LOCK } from '../../lib/keys/key-limits';
import { normalizeKeys } from '../../lib/keys/normalize-keys';

const WHERE = '@Locked on Svc.method';
const LIMIT = 1_000;
const HUGE = 10_000_000;

/** `n` distinct keys, in an order normalizeKeys changes (descending). */
const distinctKeys = (n: number): string[] => Array.from({ length: n }, (_, i) => `item:${String(n - i).padStart(5, '0')}`);

/** What `fn` throws (it must throw). */
function thrownBy(fn: () => unknown): LockKeyError {
  try {
    fn();
  } catch (error) {
    return error as LockKeyError;
  }
  throw new Error('expected a throw');
}

/** A list of `n` keys that counts every read of an entry: a refusal by length must read none. */
function countingList(n: number): { list: string[]; reads: () => number } {
  let reads = 0;
  const list = new Proxy(distinctKeys(n), {
    get(target, property, receiver) {
      if (typeof property === 'string' && /^\d+$/.test(property)) reads++;
      return Reflect.get(target, property, receiver) as unknown;
    },
  });
  return { list, reads: () => reads };
}

/** Milliseconds `fn` takes. */
function timed(fn: () => void): number {
  const start = performance.now();
  fn();
  return performance.now() - start;
}

describe('MAX_KEYS_PER_LOCK', () => {
  it('is 1,000', () => {
    expect(MAX_KEYS_PER_LOCK).toBe(LIMIT);
  });
});

describe('normalizeKeys (every acquire, tryAcquire and withLock) counts the keys as given', () => {
  it('exactly 1,000 distinct keys are accepted, in canonical order; 1,001 are a LockKeyError saying how many were given, the limit and what to do', () => {
    const keys = distinctKeys(LIMIT);
    expect(normalizeKeys(keys)).toEqual([...keys].sort());
    const error = thrownBy(() => normalizeKeys(distinctKeys(LIMIT + 1)));
    expect(error).toBeInstanceOf(LockKeyError);
    expect(error.keyCount).toBe(LIMIT + 1);
    expect(error.message).toBe(
      'Lock keys: 1001 keys given; one lock takes at most 1000, counted as given (duplicates included). ' +
        'Each key is one Redis round trip while the lock is taken. Lock a coarser key (the batch, the order or the account ' +
        'rather than each item), or split the work into several locks (calls) of at most 1000 keys.',
    );
  });

  it('1,001 entries of which 2 are duplicates (999 distinct keys) are refused: counted as given, not after deduplication', () => {
    const keys = [...distinctKeys(LIMIT - 1), 'item:00001', 'item:00002'];
    expect(new Set(keys).size).toBe(LIMIT - 1);
    const error = thrownBy(() => normalizeKeys(keys));
    expect(error.keyCount).toBe(LIMIT + 1);
    expect(error.message).toMatch(/^Lock keys: 1001 keys given; .*\(duplicates included\)/);
    // One entry fewer (1,000 entries, 998 distinct keys) is within the limit, and deduplicated.
    expect(normalizeKeys(keys.slice(1))).toHaveLength(LIMIT - 2);
  });

  it('the count is checked before any entry is read: 1,001 keys are refused without reading one; 1,000 are read', () => {
    const over = countingList(LIMIT + 1);
    expect(() => normalizeKeys(over.list)).toThrow(/1001 keys given/);
    expect(over.reads()).toBe(0);
    // And before what each entry is: 1,001 numbers are refused for their count, not for the first number.
    expect(() => normalizeKeys(Array.from({ length: LIMIT + 1 }, (_, i) => i))).toThrow(/1001 keys given/);
    const at = countingList(LIMIT);
    normalizeKeys(at.list);
    expect(at.reads()).toBeGreaterThanOrEqual(LIMIT);
  });

  it('a list of 10 million entries is refused at once, without being walked', () => {
    const huge = new Array<string>(HUGE).fill('order:1');
    let error: LockKeyError | undefined;
    const ms = timed(() => (error = thrownBy(() => normalizeKeys(huge))));
    expect(error).toBeInstanceOf(LockKeyError);
    expect(error!.keyCount).toBe(HUGE);
    expect(error!.message).toMatch(/^Lock keys: 10000000 keys given; one lock takes at most 1000/);
    // Walking it (checking each entry, deduplicating) took about a second; a length check takes microseconds.
    expect(ms).toBeLessThan(50);
  });
});

describe("a @Locked key function's result is counted as the call's keys are made", () => {
  const source = (result: unknown) => compileKeySource(() => result as string[], 0, WHERE);

  it('1,000 keys are made; 1,001 are refused naming the method, saying the method was not run', () => {
    expect(source(distinctKeys(LIMIT)).resolve(undefined, [])).toHaveLength(LIMIT);
    const error = thrownBy(() => source(distinctKeys(LIMIT + 1)).resolve(undefined, []));
    expect(error).toBeInstanceOf(LockKeyError);
    expect(error.keyCount).toBe(LIMIT + 1);
    expect(error.message).toMatch(
      /^@Locked on Svc\.method: the key function's result: 1001 keys given; one lock takes at most 1000, .*Lock a coarser key .*The method was not run\.$/,
    );
  });

  it('before any of its keys is read (their type and length included)', () => {
    const over = countingList(LIMIT + 1);
    expect(() => source(over.list).resolve(undefined, [])).toThrow(/1001 keys given/);
    expect(over.reads()).toBe(0);
    expect(() => source(Array.from({ length: LIMIT + 1 }, () => '')).resolve(undefined, [])).toThrow(/1001 keys given/);
  });

  it('10 million ids (body.ids) are refused at once', () => {
    const ids = new Array<string>(HUGE).fill('order:1');
    const ms = timed(() => expect(() => source(ids).resolve(undefined, [])).toThrow(/10000000 keys given/));
    expect(ms).toBeLessThan(50);
  });

  it("a deferKey (compiled like the lock's keys) is held to the same limit", () => {
    const deferKey = compileKeySource((ids: string[]) => ids, 1, `${WHERE} deferKey`);
    expect(deferKey.resolve(undefined, [distinctKeys(LIMIT)])).toHaveLength(LIMIT);
    expect(() => deferKey.resolve(undefined, [distinctKeys(LIMIT + 1)])).toThrow(
      /^@Locked on Svc\.method deferKey: the key function's result: 1001 keys given/,
    );
  });
});

describe('an array of key templates is counted when the class is defined', () => {
  const templates = (n: number) => Array.from({ length: n }, (_, i) => `slot:${i}:<0>`);
  const define = (keys: string[]) => () => {
    class Svc {
      @Locked(keys)
      async method(_id: string): Promise<void> {}
    }
    return Svc;
  };

  it('1,000 templates are accepted; 1,001 are a LockKeyError naming the method (each template makes one key)', () => {
    expect(define(templates(LIMIT))).not.toThrow();
    expect(define(templates(LIMIT + 1))).toThrow(LockKeyError);
    expect(define(templates(LIMIT + 1))).toThrow(/^@Locked on Svc\.method: the array of key templates: 1001 keys given; one lock takes at most 1000/);
  });
});
