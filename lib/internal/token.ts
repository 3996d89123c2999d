import { randomFillSync } from 'node:crypto';

// Random bytes are drawn from the OS CSPRNG in blocks: one system call per 256 tokens, not per lock.
const POOL_SIZE = 4_096;
const pool = Buffer.alloc(POOL_SIZE);
let offset = POOL_SIZE;

function randomBytesFromPool(size: number): Buffer {
  if (offset + size > POOL_SIZE) {
    randomFillSync(pool);
    offset = 0;
  }
  const bytes = Buffer.from(pool.subarray(offset, offset + size));
  offset += size;
  return bytes;
}

/** Identifies one LockService (one process's lock client) in owner tokens and its wake channel. */
export const newServiceId = (): string => randomBytesFromPool(9).toString('base64url');

/**
 * `<service id>.<ttl>.<128 random bits>`: no two holders, processes or restarts share a token, and a
 * release that hands the lock to a queued waiter reads from its token which service to notify and
 * what lease it asked for. base64url has no '.'.
 */
export const newOwnerToken = (serviceId: string, ttl: number): string =>
  `${serviceId}.${ttl}.${randomBytesFromPool(16).toString('base64url')}`;
