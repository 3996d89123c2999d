import { Controller, Get, Req, Res } from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'http';
import { PrometheusMetrics } from './prometheus';

/** Prometheus scrape endpoint: the lock's health (lock_acquire_attempts_total, lock_wait_duration, ...) among the app's metrics. */
@Controller('metrics')
export class MetricsController {
  constructor(private readonly prometheus: PrometheusMetrics) {}

  @Get()
  scrape(@Req() request: IncomingMessage, @Res() response: ServerResponse): void {
    this.prometheus.exporter.getMetricsRequestHandler(request, response);
  }
}
