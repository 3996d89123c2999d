'use strict';
/**
 * The checks of the package smoke (scripts/smoke-package.sh), shared by a CommonJS and an ESM
 * consumer: each loads the packed package its own way and passes the modules in. Against a real
 * redis-server started here on a free port: a Nest application context with DistributedLockModule,
 * @Locked on a provider (two concurrent calls, one runs), LockService (a busy key throws
 * LockBusyError), and the /terminus subpath's LockHealthIndicator through terminus' HealthCheckService.
 */
const { spawn } = require('node:child_process');
const net = require('node:net');

const freePort = () =>
  new Promise((resolve, reject) => {
    const server = net.createServer().once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });

/** Resolves once something accepts connections on `port` (bounded). */
async function listening(port, timeoutMs = 5_000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => socket.end(() => resolve(true))).once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > until) throw new Error(`redis-server did not listen on ${port} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** `mods`: { common, core, lock, lockTerminus, lockTesting, terminus }, each the module object as the consumer loaded it. */
module.exports = async function smoke(mods) {
  const { Injectable, Module } = mods.common;
  const { NestFactory } = mods.core;
  const { DistributedLockModule, LockService, Locked, LockBusyError } = mods.lock;
  const { LockHealthIndicator } = mods.lockTerminus;
  const { TerminusModule, HealthCheckService } = mods.terminus;

  const port = await freePort();
  const redis = spawn(
    process.env.REDIS_SERVER || 'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    {
      stdio: 'ignore',
    },
  );
  const stopRedis = () => redis.kill('SIGKILL');
  process.on('exit', stopRedis);
  await listening(port);

  class Jobs {
    constructor() {
      this.runs = 0;
    }
    async settle(day) {
      this.runs++;
      await new Promise((r) => setTimeout(r, 200));
      return `settled ${day}`;
    }
  }
  // Decorators applied by hand: this file is plain JavaScript.
  const descriptor = Object.getOwnPropertyDescriptor(Jobs.prototype, 'settle');
  Locked('jobs:<0>', { onBusy: 'fail-fast', fallback: 'skipped' })(Jobs.prototype, 'settle', descriptor);
  Object.defineProperty(Jobs.prototype, 'settle', descriptor);
  Injectable()(Jobs);

  class AppModule {}
  Module({
    imports: [DistributedLockModule.forRoot({ redis: `redis://127.0.0.1:${port}`, ttl: 5_000 }), TerminusModule],
    providers: [Jobs, LockHealthIndicator],
  })(AppModule);

  const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
  try {
    const jobs = app.get(Jobs);
    const locks = app.get(LockService);
    const results = await Promise.all([jobs.settle('monday'), jobs.settle('monday')]);
    const lock = await locks.acquire('order:1', { onBusy: 'throw' });
    const busy = await locks.acquire('order:1', { onBusy: 'throw' }).catch((e) => e);
    const health = await app.get(HealthCheckService).check([() => app.get(LockHealthIndicator).isHealthy('lock')]);
    await lock.release();
    const ok =
      results.filter((r) => r === 'settled monday').length === 1 &&
      results.includes('skipped') &&
      jobs.runs === 1 &&
      busy instanceof LockBusyError &&
      health.status === 'ok' &&
      health.details.lock.status === 'up' &&
      health.details.lock.leases === 1;
    const testing = await testingModuleSkips(mods, Jobs);
    return { results, runs: jobs.runs, busy: busy && busy.name, health: health.details.lock, testing, ok: ok && testing === 'skipped' };
  } finally {
    await app.close();
    stopRedis();
  }
};

/** The /testing entry, no Redis: a key made busy by LockTestingController turns the fail-fast call into its fallback. */
async function testingModuleSkips(mods, Jobs) {
  const { Module } = mods.common;
  const { NestFactory } = mods.core;
  const { DistributedLockTestingModule, LockTestingController } = mods.lockTesting;
  class TestingAppModule {}
  Module({ imports: [DistributedLockTestingModule.forRoot({})], providers: [Jobs] })(TestingAppModule);
  const app = await NestFactory.createApplicationContext(TestingAppModule, { logger: false });
  try {
    const held = app.get(LockTestingController).hold('jobs:tuesday');
    const answer = await app.get(Jobs).settle('tuesday');
    held.release();
    return answer;
  } finally {
    await app.close();
  }
}
