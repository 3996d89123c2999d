/**
 * An application instance in its own process whose BullMQ worker runs `Stock.write` jobs, for the tests that
 * kill -9 or SIGSTOP it mid-job. env: REDIS_URL, QUEUE, STALL_MS, JOB_LEASE, ATTEMPTS. Lines: ready, started {token}, wrote {accepted}.
 */
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import Redis from 'ioredis';
import { DistributedLockModule } from '../../../lib';
import { emit } from '../../harness/worker-log';
import { STOCK_IO, Stock } from './support/deferred-stock';
import { requiredEnv } from './support/worker-env';

const env = requiredEnv('defer-stock.worker');

async function main(): Promise<void> {
  const client = new Redis(env('REDIS_URL'), { maxRetriesPerRequest: 1 });
  @Module({
    imports: [
      DistributedLockModule.forRoot({
        redis: env('REDIS_URL'),
        keyPrefix: 'defer-crash:',
        defer: { queueName: env('QUEUE'), jobLease: Number(env('JOB_LEASE')), attempts: Number(env('ATTEMPTS')), backoff: 50 },
      }),
    ],
    providers: [Stock, { provide: STOCK_IO, useValue: { client, stallMs: Number(env('STALL_MS')), report: emit } }],
  })
  class WorkerModule {}
  const app = await NestFactory.createApplicationContext(WorkerModule, { logger: ['error'] });
  emit({ event: 'ready' });
  process.on(
    'SIGTERM',
    () =>
      void app
        .close()
        .then(() => client.quit())
        .then(() => process.exit(0)),
  );
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
