/**
 * A common test habit: replace LockService with a test double (`overrideProvider(LockService).useValue(…)`)
 * to assert that code takes a lock without running the engine. The module's HTTP interceptor must not
 * depend on the real service: before, it read the double's missing engine on every request, and every
 * route answered 500, those that take no lock too.
 */
import 'reflect-metadata';
import { Controller, Get, INestApplication, Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { LockService } from '../../lib';
import { DistributedLockTestingModule } from '../../lib/testing';

@Injectable()
class Reports {
  constructor(private readonly locks: LockService) {}
  build(): Promise<string> {
    return this.locks.withLock('report', () => 'built');
  }
}

@Controller()
class ReportsController {
  constructor(private readonly reports: Reports) {}
  @Get('ping')
  ping(): string {
    return 'pong';
  }
  @Get('report')
  report(): Promise<string> {
    return this.reports.build();
  }
}

@Module({ imports: [DistributedLockTestingModule.forRoot({})], controllers: [ReportsController], providers: [Reports] })
class AppModule {}

describe('LockService replaced by a test double', () => {
  let app: INestApplication | undefined;
  afterEach(() => app?.close());

  it('routes answer as usual, those that take no lock too, and the double is what the code calls', async () => {
    const locks = { withLock: jest.fn((_key: unknown, fn: () => unknown) => Promise.resolve(fn())) };
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] })
      .overrideProvider(LockService)
      .useValue(locks)
      .compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    await request(app.getHttpServer()).get('/ping').expect(200, 'pong');
    await request(app.getHttpServer()).get('/report').expect(200, 'built');
    expect(locks.withLock).toHaveBeenCalledWith('report', expect.any(Function));
    // The module's shutdown does not reach into the double (it has no engine to drain).
    await app.close();
    app = undefined;
  });
});
