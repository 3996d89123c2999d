import type { LockEngineHealth } from '../core/lock-engine-health';
import type { StoreProbe } from '../core/store-probe';
import { describeValue } from '../errors/describe-value';
import { LockOptionsError } from '../errors/lock-options.error';
import { assertKnownKeys, HEALTH_OPTION_KEYS } from '../options/known-keys';
import { HEALTH_DEFAULTS } from '../options/lock-defaults';
import { assertIntegerMs, assertOptionsObject, given } from '../options/validate-options';
import type { LockHealthData } from './lock-health-data.interface';
import type { LockHealthOptions } from './lock-health-options.interface';

/** @internal Validated options, defaults applied against the module's commandTimeout. */
export function resolveHealthOptions(key: unknown, options: LockHealthOptions | undefined, commandTimeout: number) {
  if (typeof key !== 'string' || key.length === 0) {
    throw new LockOptionsError('key', `isHealthy(key) needs the non-empty string terminus reports the result under, got ${describeValue(key)}.`);
  }
  // A misspelt limit (`maxRoundtrip`) would leave the default in force without a word.
  if (options !== undefined) {
    assertOptionsObject('isHealthy options', options);
    assertKnownKeys('isHealthy options', options, HEALTH_OPTION_KEYS);
  }
  return {
    maxRoundTrip: assertIntegerMs('maxRoundTrip', given(options?.maxRoundTrip, Math.max(1, Math.floor(commandTimeout / 2))), 1),
    renewalErrorWindow: assertIntegerMs('renewalErrorWindow', given(options?.renewalErrorWindow, HEALTH_DEFAULTS.renewalErrorWindow), 0),
  };
}

/** @internal Judges the engine's facts and the store's probe: the reasons it is unhealthy (none: healthy), and the data to report. */
export function judgeLockHealth(
  health: LockEngineHealth,
  probe: StoreProbe | undefined,
  limits: ReturnType<typeof resolveHealthOptions>,
): { problems: string[]; data: LockHealthData } {
  const problems: string[] = [];
  const { watchdog } = health;
  const data: LockHealthData = { wakeChannel: health.wakeChannel, leases: watchdog.leases, laggingLeases: watchdog.lagging };
  if (health.closing) problems.push('the LockService is shutting down');
  if (probe?.nodes) data.nodes = { ...probe.nodes };
  if (probe && 'error' in probe) problems.push(probe.error.message);
  if (probe && 'ms' in probe) {
    data.roundTripMs = Math.round(probe.ms);
    if (probe.ms > limits.maxRoundTrip)
      problems.push(`the health probe's round trip took ${data.roundTripMs} ms, above maxRoundTrip (${limits.maxRoundTrip} ms)`);
  }
  if (health.wakeChannel === 'disconnected') {
    problems.push('the wake-channel subscriber is not connected: waiters are not told of releases and fall back to polling');
  }
  // 'refused' (the ACL denies the channel) is not down: locks are granted, in order, by polling; restarting the
  // instance would not change the ACL. It stays visible in the data and was logged once as a warning, with the fix.
  if (watchdog.lagging > 0) {
    problems.push(
      `the watchdog is not keeping up: ${watchdog.lagging} held lease(s) within one renewal interval of their deadline ` +
        `(least left: ${Math.round(watchdog.tightestMarginMs ?? 0)} ms)`,
    );
  }
  if (watchdog.failing && watchdog.failing.agoMs <= limits.renewalErrorWindow) {
    problems.push(`a lease renewal failed ${Math.round(watchdog.failing.agoMs)} ms ago: ${watchdog.failing.message}`);
  }
  if (problems.length > 0) data.message = problems.join('; ');
  return { problems, data };
}
