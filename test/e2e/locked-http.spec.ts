/**
 * In HTTP handlers a busy key answers 409 Conflict (not 500), on Express and on Fastify, with nothing
 * written by the user; Redis trouble and a shutting-down instance answer 503. Every such answer has
 * `Retry-After`, and a 409 body names the lock by its template, never by the resolved key (which can
 * carry an e-mail address). A key that cannot be made from the request's input answers 400, names the
 * template, not the value, and logs nothing. The application's own exception filters keep working and see the mapped
 * exception. `httpErrors: false` turns the mapping off; `LockHttpErrorsFilter` gives the same answers
 * for lock errors of guards and middleware, which no interceptor sees.
 */
import 'reflect-metadata';
import {
  ArgumentsHost,
  CanActivate,
  Catch,
  Controller,
  Body,
  ExceptionFilter,
  Get,
  HttpException,
  INestApplication,
  Injectable,
  LoggerService,
  MiddlewareConsumer,
  Module,
  NestMiddleware,
  NestModule,
  Param,
  Post,
  UseGuards,
} from '@nestjs/common';
import { APP_FILTER, HttpAdapterHost } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import type Redis from 'ioredis';
import { DistributedLockModule, Locked, LockBusyError, LockHttpErrorsFilter, LockService, currentLock, lockKey } from '../../lib';
import { RedisProcess, SharedRedis } from '../harness/redis-process';
import { ErrorLog } from '../harness/error-log';

class TeapotError extends Error {}

/** An address that must never reach a client: it is in the keys of the locks below. */
const EMAIL = 'alice@example.com';
const GUARD_KEY = `guard:${EMAIL}`;
const MIDDLEWARE_KEY = `middleware:${EMAIL}`;
const MANUAL_KEY = `manual:${EMAIL}`;

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

  /** Its lock is taken from under it (the key deleted, as an expiry would), then it extends: LockLostError. */
  @Get('lost/:id')
  @Locked('seat:<0>')
  async lost(@Param('id') id: string) {
    const lock = currentLock()!;
    await lostKeys.del(`lock:{seat:${id}}`);
    await lock.extend();
    return { kept: id };
  }
}

/** The test's own connection, for the handler above to delete its lock's key. */
let lostKeys: Redis;

/** Takes a lock per user in a guard: the handler runs only when it was free. */
@Injectable()
class OnePerUserGuard implements CanActivate {
  constructor(private readonly locks: LockService) {}
  async canActivate(): Promise<boolean> {
    await (await this.locks.acquire(GUARD_KEY, { onBusy: 'throw' })).release();
    return true;
  }
}

@Injectable()
class OnePerUserMiddleware implements NestMiddleware {
  constructor(private readonly locks: LockService) {}
  async use(_req: unknown, _res: unknown, next: () => void): Promise<void> {
    await (await this.locks.acquire(MIDDLEWARE_KEY, { onBusy: 'throw' })).release();
    next();
  }
}

/** A service whose lock key is made from server state that a bug left undefined (a missing setting). */
@Injectable()
class TenantBilling {
  tenant: string | undefined = undefined;

  @Locked((self: TenantBilling) => self.tenant as string)
  async charge(id: string) {
    return { charged: id };
  }
}

@Controller('users')
class UsersController {
  constructor(
    private readonly locks: LockService,
    private readonly billing: TenantBilling,
  ) {}

  /** Valid input; the service's key (server state) is not: a server bug. */
  @Get('bill/:id')
  async bill(@Param('id') id: string) {
    return this.billing.charge(id);
  }

  /** Valid input; a key from an unset setting, no @Locked on the handler: a server bug. */
  @Get('manual-bad-key')
  async manualBadKey() {
    return this.locks.withLock(process.env.NO_SUCH_LOCK_SETTING ?? '', () => ({ ok: true }));
  }

  @Get(':email/claim')
  @Locked('user:<0>', { onBusy: 'throw' })
  async claim(@Param('email') email: string) {
    return { claimed: email };
  }

  @Post('register')
  @Locked('user:<0.email>')
  async register(@Body() body: { email: string }) {
    return { registered: body.email };
  }

  @Get('manual')
  async manual() {
    await (await this.locks.acquire(MANUAL_KEY, { onBusy: 'throw' })).release();
    return { ok: true };
  }

  @Get('guarded')
  @UseGuards(OnePerUserGuard)
  guarded() {
    return { ok: true };
  }

  @Get('behind-middleware')
  behindMiddleware() {
    return { ok: true };
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

interface AppExtras {
  commandTimeout?: number;
  shutdownTimeout?: number;
  httpErrors?: boolean;
  userFilter?: boolean;
  lockFilter?: boolean;
  /** LockHttpErrorsFilter registered as a provider (APP_FILTER) instead of with useGlobalFilters. */
  lockFilterProvider?: boolean;
  /** Nest's logger for the application (default: none). */
  logger?: LoggerService;
}

async function createApp(platform: Platform, redisUrl: string, extra: AppExtras = {}) {
  @Module({
    imports: [
      DistributedLockModule.forRoot({
        redis: redisUrl,
        commandTimeout: extra.commandTimeout,
        shutdownTimeout: extra.shutdownTimeout,
        httpErrors: extra.httpErrors,
        // One test points at a stopped server on purpose, to see the 503 of a request.
        requireRedisAtStartup: false,
      }),
    ],
    controllers: [SeatsController, UsersController],
    providers: [OnePerUserGuard, TenantBilling, ...(extra.lockFilterProvider ? [{ provide: APP_FILTER, useClass: LockHttpErrorsFilter }] : [])],
  })
  class AppModule implements NestModule {
    configure(consumer: MiddlewareConsumer) {
      consumer.apply(OnePerUserMiddleware).forRoutes('users/behind-middleware');
    }
  }
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
  const app: INestApplication =
    platform === 'express'
      ? moduleRef.createNestApplication({ logger: extra.logger ?? false })
      : moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), { logger: extra.logger ?? false });
  if (extra.userFilter) app.useGlobalFilters(new UserFilter(app.get(HttpAdapterHost)));
  if (extra.lockFilter) app.useGlobalFilters(new LockHttpErrorsFilter(app.get(HttpAdapterHost)));
  await app.init();
  if (platform === 'fastify') await (app as NestFastifyApplication).getHttpAdapter().getInstance().ready();
  return app;
}

/** The whole answer a client sees, headers included, for "does the key leak anywhere" checks. */
const wholeAnswer = (res: request.Response) => JSON.stringify(res.headers) + res.text;

/** Request bodies from which `user:<0.email>` makes no key: missing, empty, an object (an operator injection), too long. */
const BAD_EMAIL_BODIES: ReadonlyArray<[string, object]> = [
  ['no email', {}],
  ['an empty email', { email: '' }],
  ['an object', { email: { $ne: 1 } }],
  ['2000 characters', { email: 'alice'.repeat(400) }],
];

/** The 400 of a key `user:<0.email>` cannot be made for: the template named, nothing of the value. */
function expectInvalidKeyAnswer(res: request.Response): void {
  expect(res.status).toBe(400);
  expect(res.body).toEqual({
    statusCode: 400,
    error: 'Bad Request',
    message:
      'The key of the lock "user:<0.email>" cannot be made from this request: a value it is built from is missing, empty, ' +
      'too long or not a valid key part (a string or a number).',
    resource: 'user:<0.email>',
    reason: 'invalid-key',
  });
  expect(res.headers['retry-after']).toBeUndefined();
  expect(wholeAnswer(res)).not.toContain('alice');
  expect(wholeAnswer(res)).not.toContain('$ne');
}

describe.each<Platform>(['express', 'fastify'])('HTTP mapping on %s', (platform) => {
  let redis: SharedRedis;
  let app: INestApplication;
  let locks: LockService;

  /** Runs `fn` while `key` is held by someone else (this process, another LockService call). */
  async function whileHeld(key: string, fn: () => Promise<void>): Promise<void> {
    const held = await locks.acquire(key);
    try {
      await fn();
    } finally {
      await held.release();
    }
  }

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
    const res = await request(app.getHttpServer()).get('/seats/throw/1').expect(200, { booked: '1' });
    expect(res.headers['retry-after']).toBeUndefined();
    expect(locks.getStats().acquired - before).toBe(1);
  });

  it('LockBusyError answers 409 with Retry-After and a JSON body naming the lock by its template, not its key; the handler does not run', async () => {
    const controller = app.get(SeatsController);
    await whileHeld('seat:A1', async () => {
      const runs = controller.runs;
      const res = await request(app.getHttpServer()).get('/seats/throw/A1').expect(409).expect('content-type', /json/).expect('retry-after', '1');
      expect(res.body).toEqual({
        statusCode: 409,
        error: 'Conflict',
        message: 'The lock "seat:<0>" is held by another request; retry later.',
        resource: 'seat:<0>',
        reason: 'busy',
      });
      expect(res.text).not.toContain('A1');
      expect(controller.runs).toBe(runs);
    });
  });

  it('LockTimeoutError answers 409 too, with Retry-After, naming the template and the wait', async () => {
    await whileHeld('seat:B2', async () => {
      const res = await request(app.getHttpServer()).get('/seats/wait/B2').expect(409).expect('retry-after', '1');
      expect(res.body).toMatchObject({ statusCode: 409, resource: 'seat:<0>', reason: 'timeout' });
      expect(res.body.message).toMatch(/^The lock "seat:<0>" stayed held by another request for the whole wait \(\d+ ms\); retry later\.$/);
      expect(res.text).not.toContain('B2');
    });
  });

  it('a key carrying an e-mail address appears nowhere in the answer (body or headers)', async () => {
    const key = lockKey('user:<0>', EMAIL);
    await whileHeld(key, async () => {
      const res = await request(app.getHttpServer()).get(`/users/${EMAIL}/claim`).expect(409).expect('retry-after', '1');
      expect(res.body).toMatchObject({ resource: 'user:<0>', reason: 'busy' });
      expect(wholeAnswer(res)).not.toContain(EMAIL);
      expect(wholeAnswer(res)).not.toContain('alice');
    });
  });

  it('a lock taken by hand in a handler answers 409 without naming any key', async () => {
    await whileHeld(MANUAL_KEY, async () => {
      const res = await request(app.getHttpServer()).get('/users/manual').expect(409).expect('retry-after', '1');
      expect(res.body).toEqual({
        statusCode: 409,
        error: 'Conflict',
        message: 'A lock this request needs is held by another request; retry later.',
        reason: 'busy',
      });
      expect(wholeAnswer(res)).not.toContain('alice');
    });
  });

  it("the user's own global filter still handles its errors and sees the 409 as a standard HttpException (Retry-After kept)", async () => {
    const filtered = await createApp(platform, redis.url, { userFilter: true });
    try {
      await request(filtered.getHttpServer()).get('/seats/teapot').expect(418, { teapot: 'short and stout' });
      await whileHeld('seat:C3', async () => {
        const res = await request(filtered.getHttpServer()).get('/seats/throw/C3').expect(409).expect('retry-after', '1');
        expect(res.body).toMatchObject({ envelope: true, cause: LockBusyError.name, statusCode: 409, resource: 'seat:<0>' });
      });
    } finally {
      await filtered.close();
    }
  });

  it('a request reaching an instance whose LockService is closing answers 503 (retry elsewhere) with Retry-After, not 500', async () => {
    const closing = await createApp(platform, redis.url);
    try {
      await closing.get(LockService).close();
      const res = await request(closing.getHttpServer()).get('/seats/throw/E5').expect(503).expect('retry-after', '1');
      expect(res.body).toMatchObject({ statusCode: 503, error: 'Service Unavailable', message: expect.stringContaining('shutting down') });
      expect(res.text).not.toContain('E5');
    } finally {
      await closing.close();
    }
  });

  it('LockLostError (the lock ended under the handler) answers 503 with Retry-After, not 500, naming no key', async () => {
    lostKeys = redis.client();
    const res = await request(app.getHttpServer()).get(`/seats/lost/${EMAIL}`).expect(503).expect('retry-after', '1');
    // Before: Nest's 500 (the error was not mapped).
    expect(res.body).toEqual({
      statusCode: 503,
      error: 'Service Unavailable',
      message: 'The lock this request held was lost before it finished (the lock store unreachable, or the instance paused); retry.',
      operation: 'hold',
    });
    expect(wholeAnswer(res)).not.toContain('alice');
  });

  it('LockConnectionError (Redis down) answers 503 with Retry-After, not 409 or 500', async () => {
    const dead = await RedisProcess.start();
    const url = dead.url;
    await dead.stop();
    const down = await createApp(platform, url, { commandTimeout: 150, shutdownTimeout: 300 });
    const started = Date.now();
    try {
      const res = await request(down.getHttpServer()).get('/seats/throw/D4').expect(503).expect('retry-after', '1');
      expect(res.body).toMatchObject({ statusCode: 503, error: 'Service Unavailable', operation: expect.any(String) });
      expect(Date.now() - started).toBeLessThan(1_000); // bounded by commandTimeout, not a hang
    } finally {
      await down.close();
    }
  });

  describe('a key the request cannot make (LockKeyError)', () => {
    let logged: ErrorLog;
    let logging: INestApplication;
    beforeAll(async () => {
      logged = new ErrorLog();
      logging = await createApp(platform, redis.url, { logger: logged });
    });
    afterAll(() => logging?.close());

    it('a valid body is served', async () => {
      await request(logging.getHttpServer()).post('/users/register').send({ email: EMAIL }).expect(201, { registered: EMAIL });
    });

    it.each(BAD_EMAIL_BODIES)('%s: 400 naming the template, never the value; no Retry-After, nothing logged', async (_what, body) => {
      logged.errors.length = 0;
      expectInvalidKeyAnswer(await request(logging.getHttpServer()).post('/users/register').send(body));
      expect(logged.errors).toEqual([]);
    });

    it('(the log is watched: an unknown error of a handler, a 500, is logged by Nest)', async () => {
      logged.errors.length = 0;
      await request(logging.getHttpServer()).get('/seats/teapot').expect(500);
      expect(logged.errors).toHaveLength(1);
    });

    it('with httpErrors: false, LockHttpErrorsFilter gives the same 400', async () => {
      const filtered = await createApp(platform, redis.url, { httpErrors: false, lockFilter: true });
      try {
        for (const [, body] of BAD_EMAIL_BODIES) {
          expectInvalidKeyAnswer(await request(filtered.getHttpServer()).post('/users/register').send(body));
        }
      } finally {
        await filtered.close();
      }
    });

    it.each([
      ['a service lock whose key reads server state left undefined', '/users/bill/42'],
      ['withLock in a handler with a key from an unset setting', '/users/manual-bad-key'],
    ])('%s: a server bug, not the request: 500 and logged (interceptor and filter alike)', async (_what, path) => {
      // Made first: Nest's logger is process-wide, the last application made sets it (other tests make them with none).
      const filtered = await createApp(platform, redis.url, { httpErrors: false, lockFilter: true, logger: logged });
      try {
        logged.errors.length = 0;
        const res = await request(logging.getHttpServer()).get(path);
        expect(res.status).toBe(500);
        expect(logged.errors).toHaveLength(1);
        logged.errors.length = 0;
        const viaFilter = await request(filtered.getHttpServer()).get(path);
        expect(viaFilter.status).toBe(500);
        expect(viaFilter.body).toEqual({ statusCode: 500, message: 'Internal server error' });
        expect(logged.errors).toHaveLength(1);
      } finally {
        await filtered.close();
      }
    });
  });

  describe('httpErrors: false', () => {
    let plain: INestApplication;
    beforeAll(async () => (plain = await createApp(platform, redis.url, { httpErrors: false })));
    afterAll(() => plain?.close());

    it('leaves lock errors of handlers unmapped: the typed error reaches the filters (Nest answers 500), no Retry-After', async () => {
      await whileHeld('seat:F6', async () => {
        const res = await request(plain.getHttpServer()).get('/seats/throw/F6').expect(500);
        expect(res.body).toEqual({ statusCode: 500, message: 'Internal server error' });
        expect(res.headers['retry-after']).toBeUndefined();
      });
    });
  });

  describe('guards and middleware', () => {
    it('without LockHttpErrorsFilter, a lock error thrown in a guard is a 500 (no interceptor runs before guards)', async () => {
      await whileHeld(GUARD_KEY, async () => {
        await request(app.getHttpServer()).get('/users/guarded').expect(500);
      });
    });

    describe('with app.useGlobalFilters(new LockHttpErrorsFilter(app.get(HttpAdapterHost)))', () => {
      let filtered: INestApplication;
      beforeAll(async () => (filtered = await createApp(platform, redis.url, { lockFilter: true })));
      afterAll(() => filtered?.close());

      it('a guard whose lock is busy answers 409 with Retry-After and no key', async () => {
        await request(filtered.getHttpServer()).get('/users/guarded').expect(200, { ok: true });
        await whileHeld(GUARD_KEY, async () => {
          const res = await request(filtered.getHttpServer()).get('/users/guarded').expect(409).expect('retry-after', '1');
          expect(res.body).toMatchObject({ statusCode: 409, error: 'Conflict', reason: 'busy' });
          expect(wholeAnswer(res)).not.toContain('alice');
        });
      });

      it('a middleware whose lock is busy answers 409 with Retry-After and no key', async () => {
        await request(filtered.getHttpServer()).get('/users/behind-middleware').expect(200, { ok: true });
        await whileHeld(MIDDLEWARE_KEY, async () => {
          const res = await request(filtered.getHttpServer()).get('/users/behind-middleware').expect(409).expect('retry-after', '1');
          expect(res.body).toMatchObject({ statusCode: 409, error: 'Conflict', reason: 'busy' });
          expect(wholeAnswer(res)).not.toContain('alice');
        });
      });

      it('handler errors still go through the interceptor first (same answer)', async () => {
        await whileHeld('seat:G7', async () => {
          const res = await request(filtered.getHttpServer()).get('/seats/throw/G7').expect(409).expect('retry-after', '1');
          expect(res.body).toMatchObject({ resource: 'seat:<0>', reason: 'busy' });
        });
      });
    });

    it('registered as a provider (APP_FILTER), the filter answers a busy guard the same way', async () => {
      const provided = await createApp(platform, redis.url, { lockFilterProvider: true });
      try {
        await whileHeld(GUARD_KEY, async () => {
          const res = await request(provided.getHttpServer()).get('/users/guarded').expect(409).expect('retry-after', '1');
          expect(res.body).toMatchObject({ statusCode: 409, reason: 'busy' });
        });
      } finally {
        await provided.close();
      }
    });

    it('with httpErrors: false and the filter, handler errors get the same answer from the filter', async () => {
      const both = await createApp(platform, redis.url, { httpErrors: false, lockFilter: true });
      try {
        await whileHeld('seat:H8', async () => {
          const res = await request(both.getHttpServer()).get('/seats/throw/H8').expect(409).expect('retry-after', '1');
          expect(res.body).toMatchObject({ resource: 'seat:<0>', reason: 'busy' });
          expect(res.text).not.toContain('H8');
        });
      } finally {
        await both.close();
      }
    });
  });
});
