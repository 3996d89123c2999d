import type { HandoverChannelState } from './handover-channel';
import type { WatchdogHealth } from './watchdog';

/**
 * @internal A plain snapshot of what a health check needs from one engine, read without touching
 * Redis (the round trip is `LockEngine.probeStore`). Read by lib/terminus; not public API.
 */
export interface LockEngineHealth {
  /** close() began: no new locks are taken. */
  closing: boolean;
  /** The wake channel waiters are told of releases on (see `WakeChannel.state`). */
  wakeChannel: HandoverChannelState;
  watchdog: WatchdogHealth;
  /** The bound on every Redis call, the health probe included (ms). */
  commandTimeout: number;
}
