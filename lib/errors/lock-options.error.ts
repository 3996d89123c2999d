import { DistributedLockError } from './distributed-lock.error';

/** An option has a value the library cannot honour; the message names the option and the allowed range. */
export class LockOptionsError extends DistributedLockError {
  constructor(
    readonly option: string,
    message: string,
  ) {
    super(`Invalid option "${option}": ${message}`);
  }
}
