import { LockStateError } from '../errors/lock-state.error';
import type { LockRedisKeys } from './lock-redis-keys';
import { LOCK_STATE_ERROR_PREFIX, NO_EXPIRY_REFUSAL } from './scripts/lua-functions';

/**
 * What a refused call left as it was, said to the user: only a refused acquire means that nothing ran
 * under the lock; a refused release comes after the work did.
 */
function leftAsItWas(operation: string): string {
  switch (operation) {
    case 'acquire':
      return 'nothing ran under the lock';
    case 'release':
    case 'shorten':
      return 'the lock was not released: it stays taken until its lease lapses';
    case 'extend':
    case 'renew':
      return 'the lease was not prolonged';
    case 'abandon':
      return 'the queue place lapses by itself';
    default:
      return 'nothing was changed';
  }
}

/**
 * The typed error for a script that Redis refused because of the data it found, or undefined for
 * any other failure (those are connection trouble). Redis does not roll a script back, so the scripts
 * check everything they could refuse before they write (see lua-functions.ts).
 */
export function lockStateError(keys: LockRedisKeys, operation: string, error: unknown): LockStateError | undefined {
  const message = error instanceof Error ? error.message : String(error);
  if (message.startsWith(`${LOCK_STATE_ERROR_PREFIX} fence `)) {
    const value = message.slice(LOCK_STATE_ERROR_PREFIX.length + 7).replace(/ script: [0-9a-f]+, on @user_script:\d+\.$/, '');
    return new LockStateError(
      keys.key,
      keys.fence,
      `Lock "${keys.key}": Redis key "${keys.fence}" should hold the last fencing token (a decimal integer below 2^53) but holds "${value}". ` +
        `Something other than this library wrote it, or the data is damaged. The ${operation} was refused before anything was written. ` +
        `Delete that key (tokens come from the server clock, so the next one is still above every earlier one) or restore it.`,
      { cause: error },
    );
  }
  if (message.startsWith(`${LOCK_STATE_ERROR_PREFIX} ${NO_EXPIRY_REFUSAL}`)) {
    return new LockStateError(
      keys.key,
      keys.lock,
      `Lock "${keys.key}": Redis key "${keys.lock}" exists without an expiry. Every lease this library writes expires, so something ` +
        `else wrote that key, and it would keep the lock taken for good. The ${operation} was refused before anything was written; ` +
        `${leftAsItWas(operation)}. Find what writes under this keyPrefix and delete the key, or use a keyPrefix no other code writes under.`,
      { cause: error },
    );
  }
  if (message.startsWith('WRONGTYPE')) {
    return new LockStateError(
      keys.key,
      undefined,
      `Lock "${keys.key}": one of its Redis keys ("${keys.lock}", "${keys.fence}", "${keys.queue}", "${keys.waiters}") holds a value of the wrong type; ` +
        `something other than this library wrote it. The ${operation} failed; ${leftAsItWas(operation)}. Use a keyPrefix no other code writes under, or delete the stray key.`,
      { cause: error },
    );
  }
  return undefined;
}
