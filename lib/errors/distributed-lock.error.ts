/**
 * Base class of every error this library throws, so callers can catch "anything the lock said"
 * with one `instanceof` while still telling busy, timeout, lost, bad key and Redis trouble apart.
 */
export class DistributedLockError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}
