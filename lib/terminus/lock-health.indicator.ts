import { Injectable } from '@nestjs/common';
import { HealthIndicatorService, type HealthIndicatorResult } from '@nestjs/terminus';
import { LockService } from '../lock.service';
import { judgeLockHealth, resolveHealthOptions } from './lock-health-check';
import type { LockHealthOptions } from './lock-health-options.interface';

/**
 * A `@nestjs/terminus` (11+) health indicator for the application's `LockService`: add it to the
 * `providers` of the module that imports `TerminusModule`, then
 * `health.check([() => lockHealth.isHealthy('lock')])`.
 *
 * The round trip is a probe write under the keyPrefix (lock calls write; a Redis that answers PING
 * may refuse writes; on a Cluster, one on every master); in Redlock mode it counts the nodes
 * that can vote. Down, with a `message` saying why, when that probe fails or does not answer within
 * `commandTimeout` (Redlock: fewer than a majority can vote) or answers slower than `maxRoundTrip`,
 * the wake-channel subscriber is disconnected, the watchdog is not keeping up (a held lease within one
 * renewal interval of its deadline), a renewal failed recently, or the service is shutting down.
 * Never hangs: the probe is bounded like every lock call.
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
    // The local facts as they are when the probe asks: a slow probe must not hide a lease that was lagging then.
    const health = engine.health();
    const probe = health.closing ? undefined : await engine.probeStore();
    const { problems, data } = judgeLockHealth(health, probe, limits);
    return problems.length > 0 ? indicator.down(data) : indicator.up(data);
  }
}
