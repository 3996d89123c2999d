/**
 * A locked call whose result does its work only when consumed (a stream, an async iterable, an
 * Observable from withLock) would run that work after the release, unlocked: two downloads of one
 * locked report interleaved their chunks. Such a result is refused with a DistributedLockError that
 * says what to do, what it holds is freed, and the lock is released; data already produced (arrays,
 * Buffers, a StreamableFile made from a Buffer) passes.
 */
import 'reflect-metadata';
import { Readable } from 'node:stream';
import { Controller, Get, INestApplication, Injectable, Param, StreamableFile } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { BehaviorSubject, Observable } from 'rxjs';
import { DistributedLockError, DistributedLockModule, Locked, LockService } from '../../lib';
import { RedisProcess, SharedRedis } from '../harness/redis-process';

/** What ran of each lazy result: nothing may, since it would have run unlocked. */
const ran: string[] = [];

function lazyStream(label: string): Readable {
  return new Readable({
    read() {
      ran.push(label);
      this.push(null);
    },
  });
}

@Injectable()
class Reports {
  lastStream?: Readable;

  @Locked('report:<0>')
  async items(id: string): Promise<AsyncIterable<number>> {
    return (async function* () {
      ran.push(`items ${id}`);
      yield 1;
    })();
  }

  @Locked('report:<0>')
  async stream(id: string): Promise<Readable> {
    this.lastStream = lazyStream(`stream ${id}`);
    return this.lastStream;
  }

  @Locked('report:<0>')
  async generator(id: string): Promise<Iterable<number>> {
    return (function* () {
      ran.push(`generator ${id}`);
      yield 1;
    })();
  }

  @Locked('report:<0>')
  async computed(id: string): Promise<unknown[]> {
    return [[id], new Map([[id, 1]]), Buffer.from(id), `text ${id}`];
  }
}

@Controller('reports')
class ReportsController {
  lastStream?: Readable;

  @Get('lazy/:id')
  @Locked('report:<0>')
  async lazy(@Param('id') id: string): Promise<StreamableFile> {
    this.lastStream = lazyStream(`http ${id}`);
    return new StreamableFile(this.lastStream);
  }

  @Get('buffered/:id')
  @Locked('report:<0>')
  async buffered(@Param('id') id: string): Promise<StreamableFile> {
    return new StreamableFile(Buffer.from(`report ${id}`));
  }
}

describe('a locked call that returns work done later', () => {
  let redis: SharedRedis;
  let app: INestApplication;
  let reports: Reports;
  let controller: ReportsController;
  let locks: LockService;

  beforeAll(async () => {
    redis = await RedisProcess.shared();
    const moduleRef = await Test.createTestingModule({
      imports: [DistributedLockModule.forRoot({ redis: redis.url, keyPrefix: 'deferred-work:' })],
      providers: [Reports],
      controllers: [ReportsController],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    reports = app.get(Reports);
    controller = app.get(ReportsController);
    locks = app.get(LockService);
  });

  afterAll(async () => {
    await app?.close();
    await redis?.stop();
  });

  beforeEach(() => (ran.length = 0));

  it('an async generator from @Locked is refused, never iterated, and the lock released', async () => {
    const call = reports.items('1');
    await expect(call).rejects.toThrow(DistributedLockError);
    await expect(call).rejects.toThrow(/Reports\.items.*returned an async generator.*unlocked/);
    expect(await locks.isLocked('report:1')).toBe(false);
    expect(ran).toEqual([]);
  });

  it('a lazy Node stream from @Locked is refused and destroyed (its file or socket closed), never read', async () => {
    await expect(reports.stream('2')).rejects.toThrow(/returned a stream/);
    expect(reports.lastStream?.destroyed).toBe(true);
    expect(await locks.isLocked('report:2')).toBe(false);
    expect(ran).toEqual([]);
  });

  it('a generator object from @Locked is refused', async () => {
    await expect(reports.generator('3')).rejects.toThrow(/returned a generator/);
    expect(ran).toEqual([]);
  });

  // A review found these refused (and an entity's getStream() called, opening a file) when kinds were told by method names.
  it('values that only look like streams or Observables pass, and nothing is called on them', async () => {
    let opened = 0;
    const recording = { id: 7, getStream: () => ++opened, getReader: () => ++opened, pipe: () => ++opened };
    expect(await locks.withLock('report:7', () => recording)).toBe(recording);
    const state = new BehaviorSubject(3); // a Subject is state others feed, not work that runs on subscription
    expect(await locks.withLock('report:7', () => state)).toBe(state);
    expect(opened).toBe(0);
  });

  it('data already produced passes: arrays, Maps, Buffers, strings', async () => {
    const [array, map, buffer, text] = (await reports.computed('4')) as [string[], Map<string, number>, Buffer, string];
    expect(array).toEqual(['4']);
    expect(map.get('4')).toBe(1);
    expect(buffer.toString()).toBe('4');
    expect(text).toBe('text 4');
  });

  it('over HTTP, a StreamableFile of a lazy stream answers 500 without streaming it; one made from a Buffer is sent', async () => {
    const lazy = await request(app.getHttpServer()).get('/reports/lazy/5');
    expect(lazy.status).toBe(500);
    expect(controller.lastStream?.destroyed).toBe(true);
    expect(ran).toEqual([]);
    const buffered = await request(app.getHttpServer()).get('/reports/buffered/5');
    expect(buffered.status).toBe(200);
    expect(Buffer.from(buffered.body as Buffer).toString()).toBe('report 5');
    expect(await locks.isLocked('report:5')).toBe(false);
  });

  it('withLock refuses an Observable, a stream or an async iterable from its callback, and releases the lock', async () => {
    let subscribed = 0;
    const observable = new Observable<number>(() => void subscribed++);
    await expect(locks.withLock('report:6', () => observable)).rejects.toThrow(/withLock\("report:6"\).*returned an Observable/);
    const stream = lazyStream('withLock stream');
    await expect(locks.withLock('report:6', async () => stream)).rejects.toThrow(/returned a stream/);
    expect(stream.destroyed).toBe(true);
    await expect(
      locks.withLock('report:6', () =>
        (async function* () {
          ran.push('withLock items');
          yield 1;
        })(),
      ),
    ).rejects.toThrow(/returned an async generator/);
    const iterable = { [Symbol.asyncIterator]: () => ({ next: () => Promise.resolve({ done: true, value: undefined }) }) };
    await expect(locks.withLock('report:6', () => iterable)).rejects.toThrow(/returned an async iterable/);
    expect(subscribed).toBe(0);
    expect(ran).toEqual([]);
    expect(await locks.isLocked('report:6')).toBe(false);
    expect(await locks.withLock('report:6', () => [1, 2])).toEqual([1, 2]);
  });
});
