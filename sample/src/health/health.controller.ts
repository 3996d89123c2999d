import { Controller, Get } from '@nestjs/common';
import { HealthCheck, HealthCheckService } from '@nestjs/terminus';
import { LockHealthIndicator } from '../../../lib/terminus';

/** GET /health: 200 while the lock's Redis answers and its leases are kept alive, 503 with the reason otherwise. */
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly lock: LockHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.lock.isHealthy('lock')]);
  }
}
