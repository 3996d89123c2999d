import { ConflictException } from '@nestjs/common';
import { InProcessLockTimeoutError } from './in-process-mutex';

/**
 * The in-process mode's "busy, try again" as the same 409 the lock module gives LockTimeoutError
 * (DistributedLockModule maps its own errors in HTTP handlers; this mutex is not its).
 */
export function lockErrorToHttp(error: unknown): unknown {
  if (error instanceof InProcessLockTimeoutError) {
    return new ConflictException({ statusCode: 409, error: 'Conflict', message: error.message, resource: error.key, reason: 'timeout' });
  }
  return error;
}
