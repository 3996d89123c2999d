/**
 * Which errors are Redis refusing the module's user by its ACL (lib/redis/acl-refusal.ts makes them). Kept here,
 * beside the errors, so code that only reads the mark (the HTTP mapping, reachable from the testing entry
 * point) does not import lib/redis.
 */
const refusals = new WeakSet<object>();

/** Marks `error` as an ACL refusal (see isAclRefusal). */
export function markAclRefusal<T extends object>(error: T): T {
  refusals.add(error);
  return error;
}

/** Whether `error` (or what it wraps) is Redis refusing the module's user by its ACL. */
export function isAclRefusal(error: unknown): boolean {
  for (let e = error; typeof e === 'object' && e !== null; e = (e as { cause?: unknown }).cause) {
    if (refusals.has(e)) return true;
  }
  return false;
}
