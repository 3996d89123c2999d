/**
 * `nestjs-distributed-lock/terminus`: health checks for `@nestjs/terminus` 11+ (an optional peer,
 * loaded only by this entry point; the main entry never imports it).
 */
export { LockHealthIndicator } from './lock-health.indicator';
export type { LockHealthOptions } from './lock-health-options.interface';
export type { LockHealthData } from './lock-health-data.interface';
