import { LockKeyError } from '../errors/lock-key.error';
import { describeValue } from '../errors/describe-value';
import { assertKeyText } from './key-text';
import { assertKeyCount } from './key-count';

/**
 * Validates keys before any Redis command and puts them in the one canonical order (sorted,
 * duplicates dropped) in which every caller takes them, so `['a','b']` and `['b','a']` cannot
 * deadlock each other. Keys are taken literally: `*`, `?`, `[`, braces, CR/LF and unicode are data;
 * only text Redis cannot store as it is (lone UTF-16 surrogates) is refused.
 */
export function normalizeKeys(input: unknown): string[] {
  if (typeof input === 'string') {
    assertKey(input);
    return [input];
  }
  const list = asKeyList(input, 'Lock keys');
  if (list.length === 0) throw new LockKeyError('Lock keys: expected at least one key, got an empty array.');
  for (const key of list) assertKey(key);
  return [...new Set(list as string[])].sort();
}

/**
 * @internal `value` as a list of keys: itself when an array, else a list of one; a revoked Proxy is a LockKeyError,
 * not a TypeError. The one place every list of keys passes through before its keys are read (normalizeKeys for every
 * acquire, tryAcquire and withLock, on Redis or in memory; a `@Locked` key function's or `deferKey`'s result as the
 * call's keys are made), so the count is checked here, on the list as given (see MAX_KEYS_PER_LOCK).
 */
export function asKeyList(value: unknown, where: string, outcome = ''): readonly unknown[] {
  let list: readonly unknown[];
  try {
    list = Array.isArray(value) ? value : [value];
  } catch {
    // Array.isArray throws only for a revoked Proxy.
    throw new LockKeyError(`${where}: expected a string or an array of strings, got a revoked Proxy.`);
  }
  assertKeyCount(list.length, where, outcome);
  return list;
}

function assertKey(key: unknown): void {
  if (typeof key !== 'string') {
    throw new LockKeyError(`Lock key: expected a non-empty string, got ${describeValue(key)}. Build the key from a string or number id.`);
  }
  if (key.length === 0)
    throw new LockKeyError('Lock key: expected a non-empty string, got "". An empty key would make unrelated callers share one lock.');
  assertKeyText(key, 'Lock key');
}
