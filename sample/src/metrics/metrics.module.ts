import { Module } from '@nestjs/common';
import { MetricsController } from './metrics.controller';
import { PrometheusMetrics } from './prometheus';

@Module({ providers: [PrometheusMetrics], controllers: [MetricsController] })
export class MetricsModule {}
