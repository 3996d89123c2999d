import { createHash } from 'node:crypto';

/**
 * How long a completed job still stands for repeated defers with its `deferKey` (idempotency window):
 * BullMQ keeps completed jobs this long; the in-memory queue of the testing module goes by it too.
 */
export const DEFER_KEY_WINDOW_MS = 3600 * 1000;

/** A jobId BullMQ accepts (no ':' and not an integer), one per resolved deferKey of the method. */
export function deferKeyJobId(method: string, keys: readonly string[]): string {
  return `${method}#${createHash('sha256').update(keys.join('\0')).digest('base64url').slice(0, 32)}`;
}
