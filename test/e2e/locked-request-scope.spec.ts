/**
 * @Locked on request-scoped instances: a REQUEST-scoped provider, and a controller that becomes
 * request-scoped because it injects one. Nest creates those per request, after startup, so the lock
 * service must reach each new instance; before the fix every such call failed (500). Each test
 * holds the lock in one request and sends a second on the same key: exactly one runs, the other
 * gets 409, on Express and on Fastify, against a real Redis.
 */
import 'reflect-metadata';
import { Controller, Get, Inject, INestApplication, Injectable, Module, Param, Scope } from '@nestjs/common';
import { REQUEST } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { DistributedLockModule, Locked, LockService, currentLock } from '../../lib';
import { pollUntil, redisSuite } from '../unit/core-helpers';

const PREFIX = 'rs:';

/** Holds every locked body that passes it until opened, and counts who got in. */
class Gate {
  entered: string[] = [];
  private wait: Promise<void> = Promise.resolve();
  private release: () => void = () => undefined;

  close(): void {
    this.wait = new Promise((resolve) => (this.release = resolve));
  }

  open(): void {
    this.release();
  }

  async pass(label: string): Promise<void> {
    this.entered.push(label);
    await this.wait;
  }
}

const gate = new Gate();
/** Instances Nest made of each request-scoped class: more than one proves a new instance per request. */
const made = { bookings: 0, controllers: 0 };

@Injectable({ scope: Scope.REQUEST })
class Bookings {
  constructor(@Inject(REQUEST) private readonly req: { url?: string }) {
    made.bookings++;
  }

  @Locked('booking:<0>', { onBusy: 'throw' })
  async book(id: string) {
    await gate.pass(`booking:${id}`);
    return { booked: id, lock: currentLock()?.key, url: this.req.url };
  }
}

/** One instance per consumer, made at startup. */
@Injectable({ scope: Scope.TRANSIENT })
class Stamps {
  @Locked('stamp:<0>')
  async stamp(_id: string) {
    return currentLock()?.key;
  }
}

@Injectable()
class StampDesk {
  constructor(readonly stamps: Stamps) {}
}

/** Request-scoped only because it injects Bookings. */
@Controller('scoped')
class ScopedController {
  constructor(private readonly bookings: Bookings) {
    made.controllers++;
  }

  @Get('provider/:id')
  viaProvider(@Param('id') id: string) {
    return this.bookings.book(id);
  }

  @Get('controller/:id')
  @Locked('room:<0>', { onBusy: 'throw' })
  async room(@Param('id') id: string) {
    await gate.pass(`room:${id}`);
    return { room: id, lock: currentLock()?.key };
  }
}

type Platform = 'express' | 'fastify';

async function createApp(platform: Platform, redisUrl: string, keyPrefix = PREFIX): Promise<INestApplication> {
  @Module({
    imports: [DistributedLockModule.forRoot({ redis: redisUrl, keyPrefix })],
    controllers: [ScopedController],
    providers: [Bookings, Stamps, StampDesk],
  })
  class AppModule {}
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
  const app: INestApplication =
    platform === 'express'
      ? moduleRef.createNestApplication({ logger: false })
      : moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), { logger: false });
  await app.init();
  if (platform === 'fastify') await (app as NestFastifyApplication).getHttpAdapter().getInstance().ready();
  return app;
}

describe.each<Platform>(['express', 'fastify'])('@Locked in request-scoped instances on %s', (platform) => {
  const suite = redisSuite();
  let app: INestApplication;

  beforeAll(async () => {
    app = await createApp(platform, suite.redis.url);
  });

  afterEach(() => gate.open());

  afterAll(async () => {
    await app?.close();
  });

  it.each([
    ['a REQUEST-scoped provider', 'provider', 'booking'],
    ['a controller made request-scoped by injecting one', 'controller', 'room'],
  ])('%s: a free key answers 200 under the lock', async (_name, route, lockName) => {
    const res = await request(app.getHttpServer()).get(`/scoped/${route}/free`).expect(200);
    expect(res.body).toMatchObject({ lock: `${lockName}:free` });
  });

  it.each([
    ['a REQUEST-scoped provider', 'provider', 'booking'],
    ['a controller made request-scoped by injecting one', 'controller', 'room'],
  ])('%s: of two concurrent requests on one key, one runs and the other gets 409', async (_name, route, lockName) => {
    const server = app.getHttpServer();
    const id = `${route}-${platform}`;
    const before = { ...made };
    gate.close();
    gate.entered = [];
    const first = request(server)
      .get(`/scoped/${route}/${id}`)
      .then((r) => r);
    expect(await pollUntil(() => gate.entered.length === 1, 5_000)).toBe(true);
    // The first request is inside the locked body: the key is really taken in Redis.
    expect(await suite.client.exists(`${PREFIX}{${lockName}:${id}}`)).toBe(1);

    const second = await request(server).get(`/scoped/${route}/${id}`);
    expect(second.status).toBe(409);
    expect(gate.entered).toEqual([`${lockName}:${id}`]);

    gate.open();
    const firstRes = await first;
    expect(firstRes.status).toBe(200);
    expect(firstRes.body).toMatchObject({ lock: `${lockName}:${id}` });
    // One instance per request (a singleton would have been made once, at startup).
    expect(made.controllers - before.controllers).toBe(2);
    expect(made.bookings - before.bookings).toBe(2);
    expect(await suite.client.exists(`${PREFIX}{${lockName}:${id}}`)).toBe(0);
  });

  it('two applications in one process: each request-scoped instance locks through its own application', async () => {
    const other = await createApp(platform, suite.redis.url, 'rs-other:');
    try {
      const held = await app.get(LockService).acquire(`booking:two-${platform}`);
      try {
        // Same class, same key: busy in the application whose LockService holds it, free in the other (its own prefix).
        await request(app.getHttpServer()).get(`/scoped/provider/two-${platform}`).expect(409);
        const res = await request(other.getHttpServer()).get(`/scoped/provider/two-${platform}`).expect(200);
        expect(res.body).toMatchObject({ lock: `booking:two-${platform}` });
      } finally {
        await held.release();
      }
    } finally {
      await other.close();
    }
  });

  it('a TRANSIENT provider (its own instance per consumer) locks too', async () => {
    await expect(app.get(StampDesk).stamps.stamp('t')).resolves.toBe('stamp:t');
  });
});
