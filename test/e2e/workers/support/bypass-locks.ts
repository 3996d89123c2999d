/**
 * Negative control for the history checker: what the history worker uses of a LockService, with no
 * lock behind it. Every acquisition "succeeds" at once, isHeld() is always true and fences come from
 * a per-process counter, so concurrent sections overlap and fences from different processes
 * interleave: a checker that passes this history cannot see anything.
 */
import type { Lock, LockService } from '../../../../lib';

export function bypassLocks(): LockService {
  let fence = 0;
  const fake = (keys: string | readonly string[]): Lock => {
    const list = typeof keys === 'string' ? [keys] : [...new Set(keys)];
    const fences = new Map(list.map((k) => [k, ++fence]));
    return { fencingTokens: fences, isHeld: () => true, signal: new AbortController().signal, release: async () => true } as unknown as Lock;
  };
  const locks = {
    onModuleInit: async () => undefined,
    acquire: async (keys: string | readonly string[]) => fake(keys),
    withLock: async <T>(keys: string | readonly string[], fn: (lock: Lock) => T | Promise<T>) => fn(fake(keys)),
    close: async () => undefined,
    getStats: () => ({}),
  };
  return locks as unknown as LockService;
}
