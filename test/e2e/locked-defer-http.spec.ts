/**
 * A deferring `@Locked` HTTP handler on Fastify (and Express, the same assertions), real Redis and BullMQ:
 * a busy key answers 202 Accepted with the job id at once, the job runs the handler later under the same
 * lock and its result is the job's return value; a free key answers with the handler's own status and result.
 * The 202 is not an error mapping: `httpErrors: false` (lock errors left to the application's filters) keeps it.
 */
import { Body, Controller, HttpCode, INestApplication, Param, Post } from '@nestjs/common';
import { Module } from '@nestjs/common';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { Queue } from 'bullmq';
import request from 'supertest';
import '../harness/quiet-logs';
import { Deferred, DistributedLockModule, LockService, Locked, currentLock } from '../../lib';
import { RedisProcess } from '../harness/redis-process';
import { pollUntil } from '../unit/core-helpers';

@Controller('seats')
class SeatsController {
  /** `@Locked` on the handler itself: the worker runs this controller method (a singleton) later. */
  @Post(':seat/:user')
  @HttpCode(201)
  @Locked('seat:<0>', { onBusy: 'defer' })
  async book(@Param('seat') seat: string, @Param('user') user: string): Promise<{ seat: string; user: string; fence: number } | Deferred> {
    return { seat, user, fence: currentLock()!.fencingToken };
  }

  @Post()
  @Locked('seat:<0.seat>', { onBusy: 'defer' })
  async bookFromBody(@Body() body: { seat: string }): Promise<{ seat: string } | Deferred> {
    return { seat: body.seat };
  }
}

type Platform = 'express' | 'fastify';

describe.each<Platform>(['fastify', 'express'])('a deferring @Locked handler on %s', (platform) => {
  let redis: RedisProcess;
  let app: INestApplication;
  let locks: LockService;
  let queue: Queue;
  const queueName = `defer-http-${platform}`;

  beforeAll(async () => {
    redis = await RedisProcess.start();
    @Module({
      imports: [DistributedLockModule.forRoot({ redis: redis.url, keyPrefix: 'defer-http:', defer: { queueName } })],
      controllers: [SeatsController],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app =
      platform === 'fastify'
        ? moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), { logger: false })
        : moduleRef.createNestApplication({ logger: false });
    await app.init();
    if (platform === 'fastify') await (app as NestFastifyApplication).getHttpAdapter().getInstance().ready();
    locks = app.get(LockService);
    queue = new Queue(queueName, { connection: { host: redis.host, port: redis.port } });
  });
  afterAll(async () => {
    await app?.close();
    await queue?.close();
    await redis?.stop();
  });

  it('busy key: 202 Accepted with the job id; the job runs the handler later under the lock and returns its result', async () => {
    const held = await locks.acquire('seat:12A', { name: 'seat:<0>' });
    const busy = await request(app.getHttpServer()).post('/seats/12A/ann');
    expect(busy.status).toBe(202);
    expect(busy.headers['content-type']).toMatch(/^application\/json/);
    expect(busy.body).toEqual({ status: 'deferred', jobId: expect.any(String), method: 'SeatsController.book', queue: queueName });
    const jobId = (busy.body as { jobId: string }).jobId;
    // Not run while the key is held (the worker may have taken it and wait for the lock: 'active').
    expect(['waiting', 'active']).toContain(await queue.getJobState(jobId));
    await held.release();

    expect(await pollUntil(async () => (await queue.getJobState(jobId)) === 'completed', 20_000, 20)).toBe(true);
    const job = (await queue.getJob(jobId))!;
    expect(job.returnvalue).toEqual({ seat: '12A', user: 'ann', fence: expect.any(Number) });
    expect((job.returnvalue as { fence: number }).fence).toBeGreaterThan(held.fencingToken);
  });

  it("free key: the handler's own 201 with its result, nothing enqueued", async () => {
    const before = await queue.getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed');
    const free = await request(app.getHttpServer()).post('/seats/14C/bob');
    expect(free.status).toBe(201);
    expect(free.body).toEqual({ seat: '14C', user: 'bob', fence: expect.any(Number) });
    expect(await queue.getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed')).toEqual(before);
  });

  it('a body that makes no key (an object for the seat): 400 naming the template, not the value; nothing enqueued', async () => {
    const before = await queue.getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed');
    const res = await request(app.getHttpServer())
      .post('/seats')
      .send({ seat: { $gt: '' } });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ statusCode: 400, resource: 'seat:<0.seat>', reason: 'invalid-key' });
    expect(res.text).not.toContain('$gt');
    expect(await queue.getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed')).toEqual(before);
  });
});

describe('a deferring @Locked handler with httpErrors: false', () => {
  let redis: RedisProcess;
  let app: INestApplication;
  const queueName = 'defer-http-errors-off';

  beforeAll(async () => {
    redis = await RedisProcess.start();
    @Module({
      imports: [DistributedLockModule.forRoot({ redis: redis.url, keyPrefix: 'defer-http-off:', httpErrors: false, defer: { queueName } })],
      controllers: [SeatsController],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
  });
  afterAll(async () => {
    await app?.close();
    await redis?.stop();
  });

  it('still answers a deferred call 202 Accepted (the option is about lock errors), and a bad key reaches the app as the typed error (500)', async () => {
    const locks = app.get(LockService);
    const held = await locks.acquire('seat:9F', { name: 'seat:<0>' });
    try {
      const busy = await request(app.getHttpServer()).post('/seats/9F/cy');
      expect(busy.status).toBe(202);
      expect(busy.body).toEqual({ status: 'deferred', jobId: expect.any(String), method: 'SeatsController.book', queue: queueName });
    } finally {
      await held.release();
    }
    // The mapping of errors is off: a LockKeyError is Nest's 500, not 400.
    const bad = await request(app.getHttpServer())
      .post('/seats')
      .send({ seat: { $gt: '' } });
    expect(bad.status).toBe(500);
  });
});
