import { DistributedLockError } from './distributed-lock.error';

/** A lock key (or key template) is unusable: empty, not a string, too long, or a template that cannot resolve. */
export class LockKeyError extends DistributedLockError {}
