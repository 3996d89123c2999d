/**
 * The name of the lock a `LockBusyError`/`LockTimeoutError`/`LockKeyError` is about, as an HTTP answer may
 * show it: the `@Locked` template (`'user:<0>'`), never the resolved key or the value that made it, which
 * can carry user data (an e-mail address). Kept beside the error, not in it, so the error itself stays as thrown.
 */
const names = new WeakMap<object, string>();

/** Names `error` after the lock of the innermost `@Locked` call whose own keys it is about (the first name sticks). */
export function nameLockError(error: unknown, name: string): void {
  if (typeof error === 'object' && error !== null && !names.has(error)) names.set(error, name);
}

export function lockNameOf(error: object): string | undefined {
  return names.get(error);
}
