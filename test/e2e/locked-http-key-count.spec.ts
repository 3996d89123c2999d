/**
 * A route handler whose `@Locked` key function returns the ids a client sends (`body.ids`) locks at most 1,000 of
 * them (MAX_KEYS_PER_LOCK): more answer 400 (`reason: 'too-many-keys'`) before any Redis command, on Express and
 * on Fastify, as every key a request cannot make does: not logged, no `Retry-After`, the method not run. So does a
 * deferring handler's `deferKey` function. Before, every id was locked, one Redis round trip each: 3,000 ids held
 * Redis and the route for 1.2 s per request, and nothing bounded the list.
 */
import 'reflect-metadata';
import { Body, Controller, INestApplication, Injectable, Module, Post } from '@nestjs/common';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import request from 'supertest';
import { Deferred, DistributedLockModule, Locked } from '../../lib';
import { commandsServed } from '../harness/command-stats';
import { ErrorLog } from '../harness/error-log';
import { RedisProcess } from '../harness/redis-process';

const LIMIT = 1_000;

interface Batch {
  ids: string[];
}

/** `n` distinct ids. */
const idsOf = (n: number): string[] => Array.from({ length: n }, (_, i) => String(i));

/** A service's lock over the ids it is given: too many is the code's doing (its caller's), a server bug. */
@Injectable()
class Ledger {
  @Locked((ids: string[]) => ids.map((id) => `ledger:${id}`))
  async post(ids: string[]) {
    return { posted: ids.length };
  }
}

@Controller('orders')
class OrdersController {
  runs = 0;

  constructor(private readonly ledger: Ledger) {}

  @Post('settle')
  @Locked((body: Batch) => body.ids.map((id) => `order:${id}`))
  async settle(@Body() body: Batch) {
    this.runs++;
    return { settled: body.ids.length };
  }

  @Post('export')
  @Locked('export:all', { onBusy: 'defer', deferKey: (body: Batch) => body.ids })
  async export(@Body() body: Batch): Promise<{ exported: number } | Deferred> {
    this.runs++;
    return { exported: body.ids.length };
  }

  /** No @Locked of its own: the key error is the service's. */
  @Post('ledger')
  async postLedger(@Body() body: Batch) {
    return this.ledger.post(body.ids);
  }
}

type Platform = 'express' | 'fastify';

describe.each<Platform>(['express', 'fastify'])('a route handler locking more keys than one lock takes, on %s', (platform) => {
  let redis: RedisProcess;
  let client: Redis;
  let app: INestApplication;
  let controller: OrdersController;
  const logged = new ErrorLog();

  beforeAll(async () => {
    // No worker here: an idle worker polls its queue, and every command Redis serves is counted below.
    redis = await RedisProcess.start();
    client = redis.client();
    @Module({
      imports: [DistributedLockModule.forRoot({ redis: redis.url, defer: { queueName: `key-count-${platform}`, worker: false } })],
      controllers: [OrdersController],
      providers: [Ledger],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app =
      platform === 'express'
        ? moduleRef.createNestApplication({ logger: logged })
        : moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), { logger: logged });
    await app.init();
    if (platform === 'fastify') await (app as NestFastifyApplication).getHttpAdapter().getInstance().ready();
    controller = app.get(OrdersController);
  });

  afterAll(async () => {
    await app?.close();
    await redis?.stop();
  });

  beforeEach(() => {
    logged.errors.length = 0;
    controller.runs = 0;
  });

  /** The 400 of `OrdersController.<lock>` for `count` keys: the lock named, the count and the limit said, nothing logged, nothing run. */
  function expectTooManyKeys(res: request.Response, lock: string, count: number): void {
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      statusCode: 400,
      error: 'Bad Request',
      message: `This request makes ${count} keys for the lock "${lock}"; one lock takes at most 1000 (duplicates count). Send fewer items in one request.`,
      resource: lock,
      reason: 'too-many-keys',
    });
    expect(res.headers['retry-after']).toBeUndefined();
    expect(logged.errors).toEqual([]);
    expect(controller.runs).toBe(0);
  }

  it('1,000 ids are locked and served; 1,001 answer 400 (not a logged 500, not 1,001 round trips), before any Redis command', async () => {
    let before = await commandsServed(client);
    await request(app.getHttpServer())
      .post('/orders/settle')
      .send({ ids: idsOf(LIMIT) })
      .expect(201, { settled: LIMIT });
    // What the refusal is measured with: every key taken and released is counted.
    expect((await commandsServed(client)) - before).toBeGreaterThanOrEqual(2 * LIMIT);
    controller.runs = 0;

    before = await commandsServed(client);
    const res = await request(app.getHttpServer())
      .post('/orders/settle')
      .send({ ids: idsOf(LIMIT + 1) });
    expectTooManyKeys(res, 'OrdersController.settle', LIMIT + 1);
    expect(await commandsServed(client)).toBe(before);
  });

  it('1,001 ids of which 2 are repeated answer 400 too: the keys are counted as made, duplicates included', async () => {
    const ids = [...idsOf(LIMIT - 1), '0', '1'];
    expectTooManyKeys(await request(app.getHttpServer()).post('/orders/settle').send({ ids }), 'OrdersController.settle', LIMIT + 1);
  });

  it("a deferring handler's deferKey of 1,001 ids answers 400, before any Redis command: nothing locked, nothing enqueued", async () => {
    const before = await commandsServed(client);
    const res = await request(app.getHttpServer())
      .post('/orders/export')
      .send({ ids: idsOf(LIMIT + 1) });
    expectTooManyKeys(res, 'OrdersController.export deferKey', LIMIT + 1);
    expect(await commandsServed(client)).toBe(before);
  });

  it("(a service's key function fed too many ids is a server bug: still a logged 500)", async () => {
    const res = await request(app.getHttpServer())
      .post('/orders/ledger')
      .send({ ids: idsOf(LIMIT + 1) });
    expect(res.status).toBe(500);
    expect(logged.errors).toHaveLength(1);
  });
});
