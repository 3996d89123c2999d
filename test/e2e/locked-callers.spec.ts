/**
 * @Locked on every kind of caller, written above and below the other decorator: HTTP routes, plain
 * service methods, @Interval jobs, @OnEvent handlers, microservice @MessagePattern/@EventPattern.
 * Each still works (the other decorator's metadata survived) and is really locked: same key never
 * overlaps, another key runs in parallel.
 */
import 'reflect-metadata';
import { Catch, Controller, Get, INestApplication, Injectable, Module, Param, RpcExceptionFilter, UseFilters } from '@nestjs/common';
import { PATH_METADATA } from '@nestjs/common/constants';
import { EventEmitter2, EventEmitterModule, OnEvent } from '@nestjs/event-emitter';
import { ClientProxy, ClientProxyFactory, EventPattern, MessagePattern, Payload, Transport } from '@nestjs/microservices';
import { Interval, ScheduleModule, SchedulerRegistry } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import { Observable, firstValueFrom, throwError } from 'rxjs';
import request from 'supertest';
import { DistributedLockModule, LOCKED_METADATA, Locked, LockService, currentLock } from '../../lib';
import { freePort } from '../harness/free-port';
import { RedisProcess, SharedRedis } from '../harness/redis-process';
import { SectionLog, expectSerialSameKeyParallelOtherKey, overlap, sleep } from './locked-helpers';

const log = new SectionLog();
const WORK_MS = 150;
const ticks = { aboveSkipped: 0, belowSkipped: 0 };

@Controller('routes')
class RoutesController {
  @Locked('route:above:<0>')
  @Get('above/:id')
  async lockedAbove(@Param('id') id: string) {
    await log.run(`route-above:${id}`, WORK_MS);
    return { id, lock: currentLock()?.key };
  }

  @Get('below/:id')
  @Locked('route:below:<0>')
  async lockedBelow(@Param('id') id: string) {
    await log.run(`route-below:${id}`, WORK_MS);
    return { id, lock: currentLock()?.key };
  }
}

@Injectable()
class Inventory {
  @Locked('stock:<0>', { ttl: 5_000 })
  async take(sku: string) {
    return log.run(`stock:${sku}`, WORK_MS, `took ${sku}`);
  }
}

@Injectable()
class Shop {
  constructor(private readonly inventory: Inventory) {}
  buy(sku: string) {
    return this.inventory.take(sku);
  }
}

@Injectable()
class Jobs {
  @Locked('tick:above', { onBusy: 'fail-fast', fallback: () => void ticks.aboveSkipped++ })
  @Interval('tick-above', 30)
  async above() {
    await log.run('tick-above', 100);
  }

  @Interval('tick-below', 30)
  @Locked('tick:below', { onBusy: 'fail-fast', fallback: () => void ticks.belowSkipped++ })
  async below() {
    await log.run('tick-below', 100);
  }
}

@Injectable()
class Listeners {
  @Locked('seat:above:<0.seat>')
  @OnEvent('seat.above')
  async above(event: { seat: string }) {
    await log.run(`event-above:${event.seat}`, WORK_MS);
  }

  @OnEvent('seat.below')
  @Locked('seat:below:<0.seat>')
  async below(event: { seat: string }) {
    await log.run(`event-below:${event.seat}`, WORK_MS);
  }
}

/** Sends the error's class name and key over the wire, so the test sees what the handler threw. */
@Catch()
class ErrorNameFilter implements RpcExceptionFilter {
  catch(error: { name?: string; key?: string }): Observable<never> {
    return throwError(() => ({ name: error.name, key: error.key }));
  }
}

@Controller()
class RpcController {
  @MessagePattern('rpc.throw')
  @UseFilters(ErrorNameFilter)
  @Locked('rpc:throw:<0.id>', { onBusy: 'throw' })
  async throwing(@Payload() data: { id: string }) {
    return data.id;
  }

  @Locked('rpc:above:<0.id>')
  @MessagePattern('rpc.above')
  async above(@Payload() data: { id: string }) {
    await log.run(`rpc-above:${data.id}`, WORK_MS);
    return { id: data.id, lock: currentLock()?.key };
  }

  @MessagePattern('rpc.below')
  @Locked('rpc:below:<0.id>')
  async below(@Payload() data: { id: string }) {
    await log.run(`rpc-below:${data.id}`, WORK_MS);
    return { id: data.id, lock: currentLock()?.key };
  }

  @Locked('rpc:event:above:<0.id>')
  @EventPattern('rpc.event.above')
  async eventAbove(@Payload() data: { id: string }) {
    await log.run(`rpc-event-above:${data.id}`, WORK_MS);
  }

  @EventPattern('rpc.event.below')
  @Locked('rpc:event:below:<0.id>')
  async eventBelow(@Payload() data: { id: string }) {
    await log.run(`rpc-event-below:${data.id}`, WORK_MS);
  }
}

describe('@Locked on every caller kind', () => {
  let redis: SharedRedis;
  let app: INestApplication;
  let client: ClientProxy;

  beforeAll(async () => {
    redis = await RedisProcess.shared();
    const rpcPort = await freePort();
    @Module({
      imports: [DistributedLockModule.forRoot({ redis: redis.url }), ScheduleModule.forRoot(), EventEmitterModule.forRoot()],
      controllers: [RoutesController, RpcController],
      providers: [Inventory, Shop, Jobs, Listeners],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    app.connectMicroservice({ transport: Transport.TCP, options: { host: '127.0.0.1', port: rpcPort } }, { inheritAppConfig: true });
    await app.startAllMicroservices();
    await app.init();
    client = ClientProxyFactory.create({ transport: Transport.TCP, options: { host: '127.0.0.1', port: rpcPort } });
    await client.connect();
  });

  afterAll(async () => {
    await client?.close();
    await app?.close();
    await redis?.stop();
  });

  describe('HTTP routes', () => {
    it.each(['above', 'below'])('@Locked %s @Get: the route answers, under the lock', async (order) => {
      const res = await request(app.getHttpServer()).get(`/routes/${order}/7`).expect(200);
      expect(res.body).toEqual({ id: '7', lock: `route:${order}:7` });
    });

    it.each(['above', 'below'])('@Locked %s @Get: same id serialised, other id in parallel', async (order) => {
      const server = app.getHttpServer();
      await expectSerialSameKeyParallelOtherKey(
        log,
        (id) => request(server).get(`/routes/${order}/${id}`).expect(200).then(),
        (id) => `route-${order}:${id}`,
      );
    });

    it('keeps the route metadata, name and length on the wrapper, and records its own', () => {
      for (const name of ['lockedAbove', 'lockedBelow'] as const) {
        const handler = RoutesController.prototype[name];
        expect(Reflect.getMetadata(PATH_METADATA, handler)).toBe(name === 'lockedAbove' ? 'above/:id' : 'below/:id');
        expect(handler.name).toBe(name);
        expect(handler.length).toBe(1);
      }
      expect(Reflect.getMetadata(LOCKED_METADATA, Inventory.prototype.take)).toEqual({ keys: 'stock:<0>', options: { ttl: 5_000 } });
    });
  });

  describe('plain service methods called by other services', () => {
    it('same sku serialised, other sku in parallel; the result comes back', async () => {
      const shop = app.get(Shop);
      await expect(shop.buy('x')).resolves.toBe('took x');
      await expectSerialSameKeyParallelOtherKey(
        log,
        (id) => shop.buy(id),
        (id) => `stock:${id}`,
      );
    });
  });

  describe('@Interval jobs', () => {
    it.each(['above', 'below'])('@Locked %s @Interval: the job fires, under the lock, never overlapping', async (order) => {
      const label = `tick-${order}`;
      const deadline = Date.now() + 5_000;
      while (log.of(label).length < 3 && Date.now() < deadline) await sleep(20);
      app.get(SchedulerRegistry).deleteInterval(label);
      await sleep(150); // let a run in flight finish
      const runs = log.of(label);
      expect(runs.length).toBeGreaterThanOrEqual(3);
      for (const run of runs) expect(run.lockKey).toBe(`tick:${order}`);
      for (let i = 1; i < runs.length; i++) expect(overlap(runs[i - 1], runs[i])).toBe(false);
      // Ticks every 30 ms, work takes 100 ms: without the lock they would overlap; with fail-fast they are skipped.
      expect(order === 'above' ? ticks.aboveSkipped : ticks.belowSkipped).toBeGreaterThan(0);
    });
  });

  describe('@OnEvent handlers', () => {
    it.each(['above', 'below'])('@Locked %s @OnEvent: the handler receives, same seat serialised, other seat in parallel', async (order) => {
      const emitter = app.get(EventEmitter2);
      await expectSerialSameKeyParallelOtherKey(
        log,
        (seat) => emitter.emitAsync(`seat.${order}`, { seat }),
        (seat) => `event-${order}:${seat}`,
      );
    });
  });

  describe('microservice handlers (TCP)', () => {
    it.each(['above', 'below'])('@Locked %s @MessagePattern: replies under the lock; same id serialised, other in parallel', async (order) => {
      await expect(firstValueFrom(client.send(`rpc.${order}`, { id: '1' }))).resolves.toEqual({ id: '1', lock: `rpc:${order}:1` });
      await expectSerialSameKeyParallelOtherKey(
        log,
        (id) => firstValueFrom(client.send(`rpc.${order}`, { id })),
        (id) => `rpc-${order}:${id}`,
      );
    });

    it.each(['above', 'below'])('@Locked %s @EventPattern: the handler receives, same id serialised, other in parallel', async (order) => {
      log.clear();
      for (const id of ['same', 'same', 'other']) client.emit(`rpc.event.${order}`, { id });
      const deadline = Date.now() + 5_000;
      const label = (id: string) => `rpc-event-${order}:${id}`;
      while ((log.of(label('same')).length < 2 || log.of(label('other')).length < 1) && Date.now() < deadline) await sleep(20);
      const same = log.of(label('same'));
      const [other] = log.of(label('other'));
      expect(same).toHaveLength(2);
      expect(overlap(same[0], same[1])).toBe(false);
      expect(overlap(other, same[0]) || overlap(other, same[1])).toBe(true);
      expect(same[0].lockKey).toBe(`rpc:event:${order}:same`);
    });

    it('a busy key stays a typed LockBusyError in the RPC context (no HTTP mapping)', async () => {
      const held = await app.get(LockService).acquire('rpc:throw:busy');
      try {
        await expect(firstValueFrom(client.send('rpc.throw', { id: 'busy' }))).rejects.toEqual({ name: 'LockBusyError', key: 'rpc:throw:busy' });
      } finally {
        await held.release();
      }
      await expect(firstValueFrom(client.send('rpc.throw', { id: 'busy' }))).resolves.toBe('busy');
    });
  });
});
