import { LockKeyError } from '../errors/lock-key.error';
import { MAX_KEYS_PER_LOCK } from './key-limits';

/**
 * Refuses a list of more than MAX_KEYS_PER_LOCK keys by its length alone: nothing in it is read, so a list of
 * any size is refused at once, before any Redis command. Counted as given, duplicates included: deduplicating
 * first would mean walking (and hashing) the whole list, the very cost this limit bounds.
 * `subject` begins the message (what the list is); `outcome` ends it.
 */
export function assertKeyCount(count: number, subject: string, outcome = ''): void {
  if (count <= MAX_KEYS_PER_LOCK) return;
  throw new LockKeyError(
    `${subject}: ${count} keys given; one lock takes at most ${MAX_KEYS_PER_LOCK}, counted as given (duplicates included). ` +
      `Each key is one Redis round trip while the lock is taken. Lock a coarser key (the batch, the order or the account ` +
      `rather than each item), or split the work into several locks (calls) of at most ${MAX_KEYS_PER_LOCK} keys.${outcome}`,
    { keyCount: count },
  );
}
