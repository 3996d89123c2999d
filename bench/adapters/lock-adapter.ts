/**
 * What every benchmarked library is reduced to, so each workload is written once and runs the
 * same code path against ours, the peers and the raw floor.
 */

/** A held lock. */
export interface Held {
  release(): Promise<void>;
}

/** One "instance" of an application: its own connection(s) and lock objects. */
export interface LockClient {
  /**
   * Takes `key`, waiting the way the library waits. Resolves `null` when the library itself gave
   * up (its own timeout or retry budget); the workload then calls again and counts the give-up.
   */
  acquire(key: string): Promise<Held | null>;
  /**
   * Takes `key` with the library's automatic lease extension on (workload d), lease `ttl` ms.
   * Absent when the library has no auto-extension.
   */
  hold?(key: string, ttl: number): Promise<Held>;
  close(): Promise<void>;
}

export interface LockAdapter {
  /** Column name in the tables. */
  readonly name: string;
  /** One line for results.md: version and the settings this adapter uses. */
  readonly settings: string;
  /** Peers are the libraries the targets compare against; the raw floor is not a peer, nor is a diagnostic (a part of ours, measured alone). */
  readonly role: 'ours' | 'peer' | 'floor' | 'diagnostic';
  create(redisUrl: string): Promise<LockClient>;
}

/** Lease used by every adapter in workloads a–c (long enough that nothing expires mid-run). */
export const BENCH_TTL_MS = 30_000;
