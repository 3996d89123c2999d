import type { Logger } from '@nestjs/common';
import type { DistributedLockModuleOptions } from '../options/distributed-lock-module-options.interface';
import type { ResolvedModuleOptions } from '../options/resolve-options';
import type { HandoverChannel } from './handover-channel';
import type { LockStore } from './lock-store';

/**
 * What the engine runs on: a store, the channel handovers arrive on, and the lifecycle of whatever
 * connects them (Redis: lib/redis/redis-backend.ts; in memory: lib/testing). The acquire, wait,
 * watchdog and shutdown logic is the engine's, the same over every backend.
 */
export interface LockBackend {
  readonly store: LockStore;
  readonly wakeChannel: HandoverChannel;
  /** A handed-over lock counts only once `store.confirmHandover` confirmed it (Redis `replicaAcks`). */
  readonly confirmsHandovers: boolean;
  /**
   * Where the locks live, as text two services of one process compare to tell whether they share locks (the
   * timeout's "held by another LockService of this process"); undefined: shared with no other service.
   */
  readonly location?: string;
  /** Waits (bounded) until the backend can serve, so the first lock does not fail on a handshake in progress. */
  ready(): Promise<void>;
  /** Called once, after shutdown drained: closes the wake channel and whatever the backend opened. */
  close(): Promise<void>;
}

/** What a backend is built from: the user's options, as given and as resolved, and its service's identity. */
export interface LockBackendContext {
  readonly options: DistributedLockModuleOptions;
  readonly settings: ResolvedModuleOptions;
  /** Prefix of every owner token of the service; names its wake channel. */
  readonly serviceId: string;
  readonly logger: Logger;
  /** Aborts when the service starts shutting down. */
  readonly shutdown: AbortSignal;
}

/** Builds the backend of one LockService; throws `LockOptionsError` for options of its own it refuses. */
export type LockBackendFactory = (context: LockBackendContext) => LockBackend;

/** Nest token of the backend factory a module gives its LockService (absent: Redis). */
export const LOCK_BACKEND = 'DistributedLock:backend';
