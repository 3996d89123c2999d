import { Injectable } from '@nestjs/common';
import { HealthIndicatorService, type HealthIndicatorResult } from '@nestjs/terminus';
import { LockService } from '../lock.service';
import { judgeLockHealth, type PingOutcome, resolveHealthOptions } from './lock-health-check';
import type { LockHealthOptions } from './lock-health-options.interface';

/**
 * A `@nestjs/terminus` (11+) health indicator for the application's `LockService`: add it to the
 * `providers` of the module that imports `TerminusModule`, then
 * `health.check([() => lockHealth.isHealthy('lock')])`.
 *
 * Down, with a `message` saying why, when Redis does not answer a PING within `commandTimeout` or
 * answers slower than `maxRoundTrip`, the wake-channel subscriber is disconnected, the watchdog is
 * not keeping up (a held lease within one renewal interval of its deadline), a renewal failed
 * recently, or the service is shutting down. Never hangs: the PING is bounded like every lock call.
 */
@Injectable()
export class LockHealthIndicator {
  constructor(
    private readonly locks: LockService,
    private readonly indicators: HealthIndicatorService,
  ) {}

  async isHealthy<const Key extends string>(key: Key, options?: LockHealthOptions): Promise<HealthIndicatorResult<Key>> {
    const engine = this.locks.engine;
    const limits = resolveHealthOptions(key, options, engine.settings.commandTimeout);
    const indicator = this.indicators.check(key);
    // The local facts as they are when the probe asks: a slow PING must not hide a lease that was lagging then.
    const health = engine.health();
    let ping: PingOutcome | undefined;
    if (!health.closing)
      ping = await engine.pingRedis().then(
        (ms) => ({ ms }),
        (error: Error) => ({ error }),
      );
    const { problems, data } = judgeLockHealth(health, ping, limits);
    return problems.length > 0 ? indicator.down(data) : indicator.up(data);
  }
}
