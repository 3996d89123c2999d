/**
 * LOCK_MODE=distributed (default): claims and the settlement job lock in Redis, shared by every instance.
 * LOCK_MODE=in-process: each instance has its own mutex — the setup of the incident this library
 * exists for (fine on one instance, oversells on three).
 */
export type LockMode = 'distributed' | 'in-process';

export const LOCK_MODES: readonly LockMode[] = ['distributed', 'in-process'];

export function parseLockMode(value: string | undefined): LockMode {
  const mode = value === undefined || value === '' ? 'distributed' : value;
  if (!(LOCK_MODES as readonly string[]).includes(mode)) {
    throw new Error(`LOCK_MODE must be one of ${LOCK_MODES.join(', ')}; got "${value}".`);
  }
  return mode as LockMode;
}
