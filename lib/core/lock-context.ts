import { AsyncLocalStorage } from 'node:async_hooks';
import type { Lock } from './lock';

interface LockContextFrame {
  /** Innermost lock of this async context. */
  readonly lock: Lock;
  /** Every lock held along this call chain, by `${service id}\0${key}`. */
  readonly held: ReadonlyMap<string, Lock>;
}

// `run` only, never `enterWith`: a context must end with the callback that opened it, or it
// would leak into whatever the same async resource serves next (another request).
const storage = new AsyncLocalStorage<LockContextFrame>();

/** The Lock of the innermost `@Locked` method or `withLock` callback running in this async context. */
export function currentLock(): Lock | undefined {
  return storage.getStore()?.lock;
}

/** @internal */
export function runInLockContext<T>(engineId: number, lock: Lock, fn: () => T): T {
  const held = new Map(storage.getStore()?.held);
  for (const key of lock.keys) held.set(contextKey(engineId, key), lock);
  return storage.run({ lock, held }, fn);
}

/**
 * @internal Runs `fn` outside every lock context: for what the library keeps past the call that made it (the
 * watchdog's timer, which would carry that call's context into every later tick) and for the loss notifications
 * (a lost lock's signal listeners and onLockLost), which run in whatever call noticed the loss. Inside a lock
 * context they would see currentLock() name another lock, and a lock call made there would borrow its keys.
 */
export function outsideLockContext<T>(fn: () => T): T {
  return storage.exit(fn);
}

/** @internal Whether any lock context is open here (most acquisitions run outside one). */
export function insideLockContext(): boolean {
  return storage.getStore() !== undefined;
}

/** @internal The lock of this call chain that holds `key`, if any (reentrancy). */
export function heldInContext(engineId: number, key: string): Lock | undefined {
  return storage.getStore()?.held.get(contextKey(engineId, key));
}

/** @internal Every lock held along this call chain (the innermost one per key). */
export function locksInContext(): Iterable<Lock> {
  return storage.getStore()?.held.values() ?? [];
}

const contextKey = (engineId: number, key: string) => `${engineId}\0${key}`;
