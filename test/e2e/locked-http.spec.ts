/**
 * In HTTP handlers a busy key answers 409 Conflict naming the resource (not 500), on Express and on
 * Fastify, with nothing written by the user; Redis trouble answers 503. The application's own
 * exception filters keep working and see the mapped exception.
 */
import 'reflect-metadata';
import { ArgumentsHost, Catch, Controller, ExceptionFilter, Get, HttpException, INestApplication, Module, Param } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { DistributedLockModule, Locked, LockBusyError, LockService } from '../../lib';
import { RedisProcess, SharedRedis } from '../harness/redis-process';

class TeapotError extends Error {}

@Controller('seats')
class SeatsController {
  runs = 0;

  @Get('throw/:id')
  @Locked('seat:<0>', { onBusy: 'throw' })
  async book(@Param('id') id: string) {
    this.runs++;
    return { booked: id };
  }

  @Get('wait/:id')
  @Locked('seat:<0>', { waitTimeout: 100 })
  async waitFor(@Param('id') id: string) {
    this.runs++;
    return { booked: id };
  }

  @Get('teapot')
  @Locked('teapot')
  async teapot() {
    throw new TeapotError('short and stout');
  }
}

/** A user's own global filter: formats its own error and wraps every HttpException in an envelope. */
@Catch(TeapotError, HttpException)
class UserFilter implements ExceptionFilter {
  constructor(private readonly adapterHost: HttpAdapterHost) {}
  catch(error: Error, host: ArgumentsHost) {
    const response = host.switchToHttp().getResponse();
    const { httpAdapter } = this.adapterHost;
    if (error instanceof HttpException) {
      httpAdapter.reply(response, { envelope: true, cause: (error.cause as Error)?.name, ...(error.getResponse() as object) }, error.getStatus());
    } else {
      httpAdapter.reply(response, { teapot: error.message }, 418);
    }
  }
}

type Platform = 'express' | 'fastify';

async function createApp(
  platform: Platform,
  redisUrl: string,
  extra: { commandTimeout?: number; shutdownTimeout?: number; userFilter?: boolean } = {},
) {
  @Module({
    imports: [DistributedLockModule.forRoot({ redis: redisUrl, commandTimeout: extra.commandTimeout, shutdownTimeout: extra.shutdownTimeout })],
    controllers: [SeatsController],
  })
  class AppModule {}
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
  const app: INestApplication =
    platform === 'express'
      ? moduleRef.createNestApplication({ logger: false })
      : moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), { logger: false });
  if (extra.userFilter) app.useGlobalFilters(new UserFilter(app.get(HttpAdapterHost)));
  await app.init();
  if (platform === 'fastify') await (app as NestFastifyApplication).getHttpAdapter().getInstance().ready();
  return app;
}

describe.each<Platform>(['express', 'fastify'])('HTTP mapping on %s', (platform) => {
  let redis: SharedRedis;
  let app: INestApplication;
  let locks: LockService;

  beforeAll(async () => {
    redis = await RedisProcess.shared();
    app = await createApp(platform, redis.url);
    locks = app.get(LockService);
  });

  afterAll(async () => {
    await app?.close();
    await redis?.stop();
  });

  it('a free key answers 200 and takes exactly one lock per request (never locked twice)', async () => {
    const before = locks.getStats().acquired;
    await request(app.getHttpServer()).get('/seats/throw/1').expect(200, { booked: '1' });
    expect(locks.getStats().acquired - before).toBe(1);
  });

  it('LockBusyError answers 409 with a JSON body naming the resource; the handler does not run', async () => {
    const controller = app.get(SeatsController);
    const held = await locks.acquire('seat:A1');
    try {
      const runs = controller.runs;
      const res = await request(app.getHttpServer()).get('/seats/throw/A1').expect(409).expect('content-type', /json/);
      expect(res.body).toMatchObject({ statusCode: 409, error: 'Conflict', resource: 'seat:A1', reason: 'busy' });
      expect(res.body.message).toMatch(/Lock "seat:A1" is held by another owner/);
      expect(controller.runs).toBe(runs);
    } finally {
      await held.release();
    }
  });

  it('LockTimeoutError answers 409 too', async () => {
    const held = await locks.acquire('seat:B2');
    try {
      const res = await request(app.getHttpServer()).get('/seats/wait/B2').expect(409);
      expect(res.body).toMatchObject({ statusCode: 409, resource: 'seat:B2', reason: 'timeout' });
    } finally {
      await held.release();
    }
  });

  it("the user's own global filter still handles its errors and sees the 409 as a standard HttpException", async () => {
    const filtered = await createApp(platform, redis.url, { userFilter: true });
    const held = await locks.acquire('seat:C3');
    try {
      await request(filtered.getHttpServer()).get('/seats/teapot').expect(418, { teapot: 'short and stout' });
      const res = await request(filtered.getHttpServer()).get('/seats/throw/C3').expect(409);
      expect(res.body).toMatchObject({ envelope: true, cause: LockBusyError.name, statusCode: 409, resource: 'seat:C3' });
    } finally {
      await held.release();
      await filtered.close();
    }
  });

  it('a request reaching an instance whose LockService is closing answers 503 (retry elsewhere), not 500', async () => {
    const closing = await createApp(platform, redis.url);
    try {
      await closing.get(LockService).close();
      const res = await request(closing.getHttpServer()).get('/seats/throw/E5').expect(503);
      expect(res.body).toMatchObject({ statusCode: 503, error: 'Service Unavailable', message: expect.stringContaining('shutting down') });
    } finally {
      await closing.close();
    }
  });

  it('LockConnectionError (Redis down) answers 503, not 409 or 500', async () => {
    const dead = await RedisProcess.start();
    const url = dead.url;
    await dead.stop();
    const down = await createApp(platform, url, { commandTimeout: 150, shutdownTimeout: 300 });
    const started = Date.now();
    try {
      const res = await request(down.getHttpServer()).get('/seats/throw/D4').expect(503);
      expect(res.body).toMatchObject({ statusCode: 503, error: 'Service Unavailable', operation: expect.any(String) });
      expect(Date.now() - started).toBeLessThan(1_000); // bounded by commandTimeout, not a hang
    } finally {
      await down.close();
    }
  });
});
