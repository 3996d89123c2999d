import { ConflictException } from '@nestjs/common';
import { LockBusyError, LockTimeoutError } from '../../../lib';
import { InProcessLockTimeoutError } from './in-process-mutex';

/** "Busy, try again" is a 409 for the client, not a 500. */
export function lockErrorToHttp(error: unknown): unknown {
  if (error instanceof InProcessLockTimeoutError || error instanceof LockBusyError || error instanceof LockTimeoutError) {
    return new ConflictException(error.message);
  }
  return error;
}
