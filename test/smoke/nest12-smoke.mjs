// Nest 12 is ESM-only, so jest (CommonJS) cannot load it. This plain-Node run proves the BUILT
// package works on Nest 12: a real application context, LockService injected, @Locked on a provider,
// against a real redis-server. Run by scripts/smoke-nest12.sh inside a scratch project.
import 'reflect-metadata';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import lockLib from 'nestjs-distributed-lock';

// Our package is CommonJS: Node hands it to ESM as a default export; it in turn require()s the ESM-only Nest 12.
const { DistributedLockModule, LockService, Locked, LockBusyError } = lockLib;

const freePort = () =>
  new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

const port = await freePort();
const redis = spawn(process.env.REDIS_SERVER ?? 'redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
  stdio: 'ignore',
});
const stopRedis = () => redis.kill('SIGKILL');
process.on('exit', stopRedis);
await new Promise((r) => setTimeout(r, 300));

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
Module({ imports: [DistributedLockModule.forRoot({ redis: `redis://127.0.0.1:${port}`, ttl: 5_000 })], providers: [Jobs] })(AppModule);

const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
const jobs = app.get(Jobs);
const locks = app.get(LockService);
const results = await Promise.all([jobs.settle('monday'), jobs.settle('monday')]);
const lock = await locks.acquire('order:1', { onBusy: 'throw' });
const busy = await locks.acquire('order:1', { onBusy: 'throw' }).catch((e) => e);
await lock.release();
await app.close();
stopRedis();

const nestVersion = JSON.parse(
  await (await import('node:fs/promises')).readFile(new URL(import.meta.resolve('@nestjs/core/package.json')), 'utf8'),
).version;
const ok =
  results.filter((r) => r === 'settled monday').length === 1 && results.includes('skipped') && jobs.runs === 1 && busy instanceof LockBusyError;
console.log(JSON.stringify({ nest: nestVersion, node: process.version, results, runs: jobs.runs, busy: busy?.name, ok }));
process.exit(ok ? 0 : 1);
