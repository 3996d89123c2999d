import { Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { metrics } from '@opentelemetry/api';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';

/**
 * The app's OpenTelemetry MeterProvider, read by a Prometheus exporter that serves no port of its own
 * (`preventServerStart`): GET /metrics of the app answers with it. Registered as the global provider,
 * which is where the lock library records (meter "nestjs-distributed-lock").
 */
@Injectable()
export class PrometheusMetrics implements OnModuleInit, OnApplicationShutdown {
  readonly exporter = new PrometheusExporter({ preventServerStart: true });
  private readonly provider = new MeterProvider({ readers: [this.exporter] });
  private readonly logger = new Logger(PrometheusMetrics.name);

  onModuleInit(): void {
    // The lock library looks the global provider up as it records, so registering it here, after
    // LockService was created, is early enough: no lock is taken before the application starts.
    if (!metrics.setGlobalMeterProvider(this.provider))
      this.logger.warn('A global MeterProvider was already registered; /metrics shows only this app’s meters.');
  }

  async onApplicationShutdown(): Promise<void> {
    metrics.disable();
    await this.provider.shutdown();
  }
}
