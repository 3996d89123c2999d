/**
 * A value's `then` method, read once (as `await` reads it: a getter runs once), or undefined when the value is
 * not a thenable.
 */
export function thenOf(value: unknown): ((onFulfilled: unknown, onRejected: unknown) => unknown) | undefined {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return undefined;
  const then: unknown = (value as { then?: unknown }).then;
  return typeof then === 'function' ? (then as (onFulfilled: unknown, onRejected: unknown) => unknown) : undefined;
}

/** Whether `value` has a `then` method (a promise, a query builder, any PromiseLike). */
export const isThenable = (value: unknown): value is PromiseLike<unknown> => thenOf(value) !== undefined;
