/**
 * A route handler's `@Locked` key FUNCTION is the request's input as much as its template is: a key it returns
 * that no lock may have (over 1,024 bytes, a lone UTF-16 surrogate) answers 400, names the lock by its method,
 * never shows the value, and logs nothing. Before, only the type of its result was checked as the keys were
 * resolved; the length and surrogates were left to the engine, whose LockKeyError was nobody's key error: a
 * logged 500 with a stack per request, where the template form answered 400 (locked-http.spec.ts).
 */
import 'reflect-metadata';
import { Body, Controller, INestApplication, Injectable, Module, Param, Post } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { DistributedLockModule, Locked } from '../../lib';
import { RedisProcess, SharedRedis } from '../harness/redis-process';
import { ErrorLog } from '../harness/error-log';

/** An id no key may be made of: 1,500 characters, which must never reach a client. */
const LONG_ID = 'x'.repeat(1_500);

/** A service's lock: its key is the server's doing, whatever the caller passed. */
@Injectable()
class OrderArchive {
  @Locked((id: string) => `archive:${id}`)
  async archive(id: string) {
    return { archived: id };
  }
}

@Controller('orders')
class OrdersController {
  runs = 0;

  constructor(private readonly archive: OrderArchive) {}

  @Post('one/:id')
  @Locked((id: string) => `order:${id}`)
  async one(@Param('id') id: string) {
    this.runs++;
    return { ok: id };
  }

  @Post('many')
  @Locked((body: { ids: string[] }) => body.ids.map((id) => `order:${id}`))
  async many(@Body() body: { ids: string[] }) {
    this.runs++;
    return { ok: body.ids.length };
  }

  /** No @Locked of its own: the key error is the service's. */
  @Post('archive/:id')
  async archiveOne(@Param('id') id: string) {
    return this.archive.archive(id);
  }
}

describe("a route handler's key function that returns a key no lock may have", () => {
  let redis: SharedRedis;
  let app: INestApplication;
  let controller: OrdersController;
  const logged = new ErrorLog();

  beforeAll(async () => {
    redis = await RedisProcess.shared();
    @Module({ imports: [DistributedLockModule.forRoot({ redis: redis.url })], controllers: [OrdersController], providers: [OrderArchive] })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = moduleRef.createNestApplication({ logger: logged });
    await app.init();
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

  /** The 400 of `OrdersController.<method>`: the lock named by its method, nothing of the value, nothing logged. */
  function expectInvalidKey(res: request.Response, method: string): void {
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      statusCode: 400,
      error: 'Bad Request',
      message:
        `The key of the lock "OrdersController.${method}" cannot be made from this request: a value it is built from is missing, ` +
        'empty, too long or not a valid key part (a string or a number).',
      resource: `OrdersController.${method}`,
      reason: 'invalid-key',
    });
    expect(res.headers['retry-after']).toBeUndefined();
    expect(JSON.stringify(res.headers) + res.text).not.toContain('xxxx');
    expect(logged.errors).toEqual([]);
    expect(controller.runs).toBe(0);
  }

  it('a valid id is served', async () => {
    await request(app.getHttpServer()).post('/orders/one/42').expect(201, { ok: '42' });
    await request(app.getHttpServer())
      .post('/orders/many')
      .send({ ids: ['1', '2'] })
      .expect(201, { ok: 2 });
  });

  it('a 1,500-character id (a key over 1,024 bytes) answers 400, not a logged 500', async () => {
    expectInvalidKey(await request(app.getHttpServer()).post(`/orders/one/${LONG_ID}`), 'one');
  });

  it('one over-long key among the keys of an array answers 400', async () => {
    expectInvalidKey(
      await request(app.getHttpServer())
        .post('/orders/many')
        .send({ ids: ['1', LONG_ID] }),
      'many',
    );
  });

  it('a key with a lone UTF-16 surrogate (JSON "\\ud800") answers 400', async () => {
    const res = await request(app.getHttpServer()).post('/orders/many').set('content-type', 'application/json').send('{"ids":["\\ud800"]}');
    expectInvalidKey(res, 'many');
  });

  it("(a service's key function fed the same id is a server bug: still a logged 500)", async () => {
    const res = await request(app.getHttpServer()).post(`/orders/archive/${LONG_ID}`);
    expect(res.status).toBe(500);
    expect(logged.errors).toHaveLength(1);
  });
});
