/**
 * A deferring `@Locked` HTTP handler on Fastify (and Express, the same assertions), real Redis and BullMQ:
 * a busy key answers 202 Accepted with the job id at once, the job runs the handler later under the same
 * lock and its result is the job's return value; a free key answers with the handler's own status and result.
 * The 202 is not an error mapping: `httpErrors: false` (lock errors left to the application's filters) keeps it.
 * A request body over a limit of a job (nested too deep, too large) answers 400, not logged, naming neither
 * a value nor a property of it; a DeferArgumentError the code caused (a service's arguments, a pipe's Date)
 * stays a logged 500.
 */
import { Body, Controller, HttpCode, INestApplication, Injectable, Param, PipeTransform, Post } from '@nestjs/common';
import { Module } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { Queue } from 'bullmq';
import request from 'supertest';
import '../harness/quiet-logs';
import { Deferred, DistributedLockModule, LockHttpErrorsFilter, LockService, Locked, currentLock } from '../../lib';
import { ErrorLog } from '../harness/error-log';
import { RedisProcess } from '../harness/redis-process';
import { pollUntil } from '../unit/core-helpers';

/** A service's deferring method, called by a handler with the request's body. */
@Injectable()
class Seating {
  @Locked('seat:<0.seat>', { onBusy: 'defer' })
  async book(body: { seat: string }): Promise<{ seat: string } | Deferred> {
    return { seat: body.seat };
  }
}

/** A pipe that makes a Date of the body's `at`: a value JSON cannot carry, made by the code, not sent by the client. */
class ToDate implements PipeTransform {
  transform(value: string): Date {
    return new Date(value);
  }
}

/** A property name that must never reach a client: it is in the bodies refused below. */
const SECRET_PROPERTY = 'alice@example.com';

/** A JSON body whose `SECRET_PROPERTY` nests `levels` objects. */
const nestedBody = (seat: string, levels: number) =>
  `{"seat":"${seat}","${SECRET_PROPERTY}":${'{"c":'.repeat(levels - 1)}{"leaf":1}${'}'.repeat(levels - 1)}}`;

/** Big enough for the size limit of a job (16 MiB of arguments): the platforms' own limits are far lower by default. */
const BODY_LIMIT = 80 * 1024 * 1024;

@Controller('seats')
class SeatsController {
  constructor(private readonly seating: Seating) {}

  @Post('via-service')
  viaService(@Body() body: { seat: string }): Promise<{ seat: string } | Deferred> {
    return this.seating.book(body);
  }

  @Post('dated/:seat')
  @Locked('seat:<0>', { onBusy: 'defer' })
  async bookDated(@Param('seat') seat: string, @Body('at', ToDate) _at: Date): Promise<{ seat: string } | Deferred> {
    return { seat };
  }

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
  const logged = new ErrorLog();

  beforeAll(async () => {
    redis = await RedisProcess.start();
    @Module({
      imports: [DistributedLockModule.forRoot({ redis: redis.url, keyPrefix: 'defer-http:', defer: { queueName } })],
      controllers: [SeatsController],
      providers: [Seating],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    if (platform === 'fastify') {
      app = moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter({ bodyLimit: BODY_LIMIT }), { logger: logged });
    } else {
      app = moduleRef.createNestApplication<NestExpressApplication>({ logger: logged }).useBodyParser('json', { limit: BODY_LIMIT });
    }
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

  it('a body with -0 (valid JSON) is deferred on a busy key and served on a free one', async () => {
    // Before: a logged 500 either way (DeferArgumentError "-0").
    const body = '{"seat":"21B","amount":-0}';
    const held = await locks.acquire('seat:21B', { name: 'seat:<0>' });
    const busy = await request(app.getHttpServer()).post('/seats').set('content-type', 'application/json').send(body);
    await held.release();
    expect(busy.status).toBe(202);
    const jobId = (busy.body as { jobId: string }).jobId;
    const job = (await queue.getJob(jobId))!;
    expect(job.data.args[0]).toEqual({ seat: '21B', amount: 0 });
    // The worker takes the released key for the deferred run: until that is over the key is busy again (a run found
    // the second request deferred, 202, and left its job active for the next case's count).
    expect(await pollUntil(async () => (await queue.getJobState(jobId)) === 'completed', 20_000, 20)).toBe(true);
    const free = await request(app.getHttpServer()).post('/seats').set('content-type', 'application/json').send(body);
    expect(free.status).toBe(201);
  });

  it.each([
    [
      'nested 4000 levels deep',
      () => nestedBody('22C', 4000),
      'arguments-too-deep',
      'it is nested more than 1000 levels deep (objects and arrays inside one another)',
    ],
    [
      'of 17 MiB',
      () => `{"seat":"22C","${SECRET_PROPERTY}":"${'x'.repeat(17 * 1024 * 1024)}"}`,
      'arguments-too-large',
      'it takes more than 16777216 bytes (16 MiB) as JSON',
    ],
  ])(
    'a body %s: 400 naming the problem and the template, never the body; no Retry-After, nothing logged, nothing enqueued',
    async (_what, body, reason, problem) => {
      const before = await queue.getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed');
      logged.errors.length = 0;
      // Before: a logged 500 (the nesting: a stack overflow read as "a value that threw when read"); the 17 MiB
      // body was served, or enqueued on a busy key.
      const res = await request(app.getHttpServer()).post('/seats').set('content-type', 'application/json').send(body());
      expect(res.body).toEqual({
        statusCode: 400,
        error: 'Bad Request',
        message: `This request's input cannot be deferred under the lock "seat:<0.seat>": ${problem}.`,
        resource: 'seat:<0.seat>',
        reason,
      });
      expect(res.headers['retry-after']).toBeUndefined();
      expect(JSON.stringify(res.headers) + res.text).not.toContain(SECRET_PROPERTY);
      expect(logged.errors).toEqual([]);
      expect(await queue.getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed')).toEqual(before);
    },
    30_000,
  );

  it.each([
    ["a service's arguments refused (the same deep body, passed on by the handler)", '/seats/via-service', nestedBody('23D', 4000)],
    ["the handler's own arguments holding a value the code made (a pipe's Date)", '/seats/dated/23D', '{"at":"2026-01-01T00:00:00Z"}'],
  ])('%s: a server bug, not the request: 500 and logged', async (_what, path, body) => {
    logged.errors.length = 0;
    const res = await request(app.getHttpServer()).post(path).set('content-type', 'application/json').send(body);
    expect(res.status).toBe(500);
    expect(logged.errors).toHaveLength(1);
  });
});

describe('a deferring @Locked handler with httpErrors: false', () => {
  let redis: RedisProcess;
  let app: INestApplication;
  const queueName = 'defer-http-errors-off';

  /** An application with lock errors left to its filters; with `lockFilter`, LockHttpErrorsFilter is one. */
  async function createApp(lockFilter = false): Promise<INestApplication> {
    @Module({
      imports: [DistributedLockModule.forRoot({ redis: redis.url, keyPrefix: 'defer-http-off:', httpErrors: false, defer: { queueName } })],
      controllers: [SeatsController],
      providers: [Seating],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    const made = moduleRef.createNestApplication({ logger: false });
    if (lockFilter) made.useGlobalFilters(new LockHttpErrorsFilter(made.get(HttpAdapterHost)));
    await made.init();
    return made;
  }

  beforeAll(async () => {
    redis = await RedisProcess.start();
    app = await createApp();
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

  it('LockHttpErrorsFilter answers a body nested too deep 400, as the interceptor does', async () => {
    const filtered = await createApp(true);
    try {
      // Before: not caught by the filter, Nest's 500.
      const res = await request(filtered.getHttpServer()).post('/seats').set('content-type', 'application/json').send(nestedBody('9G', 4000));
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ statusCode: 400, resource: 'seat:<0.seat>', reason: 'arguments-too-deep' });
      expect(res.headers['retry-after']).toBeUndefined();
      expect(res.text).not.toContain(SECRET_PROPERTY);
    } finally {
      await filtered.close();
    }
  });
});
