import { DistributedLockError } from './distributed-lock.error';

/**
 * A lock key (or key template) is unusable: empty, not a string, too long, or a template that cannot resolve;
 * or more keys than one lock may take (`keyCount` set).
 */
export class LockKeyError extends DistributedLockError {
  /** Set when the keys were refused for their number alone: how many were given (duplicates included). */
  readonly keyCount?: number;

  constructor(message: string, options?: { cause?: unknown; keyCount?: number }) {
    // Only a cause given is passed on: Error makes `cause` an own property whenever the option is present.
    super(message, options && 'cause' in options ? { cause: options.cause } : undefined);
    if (options?.keyCount !== undefined) this.keyCount = options.keyCount;
  }
}
