import { randomFillSync } from 'node:crypto';

// Random bytes are drawn from the OS CSPRNG in blocks: one system call per 256 tokens, not per lock.
const POOL_SIZE = 4_096;
const pool = Buffer.alloc(POOL_SIZE);
let offset = POOL_SIZE;

/** `size` fresh random bytes as base64url text, read straight out of the pool (no copy). */
function randomText(size: number): string {
  if (offset + size > POOL_SIZE) {
    randomFillSync(pool);
    offset = 0;
  }
  const text = pool.toString('base64url', offset, offset + size);
  offset += size;
  return text;
}

/** Identifies one LockService (one process's lock client) in owner tokens and its wake channel. */
export const newServiceId = (): string => randomText(9);

/**
 * `<service id>.<ttl>.<128 random bits>`: no two holders, processes or restarts share a token, and a
 * release that hands the lock to a queued waiter reads from its token which service to notify and
 * what lease it asked for. base64url has no '.'.
 */
export const newOwnerToken = (serviceId: string, ttl: number): string => `${serviceId}.${ttl}.${randomText(16)}`;

/**
 * One acquisition of one key (an owner token serves every key of a multi-key lock), as a map key: what waits for a
 * handover, what a Redlock ticket, a win with answers due or a clean-up kept for a reconnect is about.
 */
export const acquisitionId = (token: string, lockName: string): string => `${token} ${lockName}`;

/** The ttl an owner token carries (newOwnerToken): how long its lock or queue place can outlive the call that took it; 0 when unreadable. */
export function ttlOfOwnerToken(token: string): number {
  const ttl = Number(token.split('.', 2)[1]);
  return Number.isSafeInteger(ttl) && ttl > 0 ? ttl : 0;
}
