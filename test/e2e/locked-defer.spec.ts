/**
 * onBusy 'defer' on a real Redis with real BullMQ: three Nest applications (instances) in this process share
 * one queue; a busy key makes the call a job that some instance's worker runs later under the same lock.
 */
import { Controller, INestApplication, Injectable, Logger, Module, Param, Post } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Queue } from 'bullmq';
import { AsyncResource } from 'node:async_hooks';
import { performance } from 'perf_hooks';
import request from 'supertest';
import '../harness/quiet-logs';
import { DeferArgumentError, Deferred, DistributedLockModule, LockKeyError, LockService, LockTimeoutError, Locked, currentLock } from '../../lib';
import type { DeferModuleOptions } from '../../lib';
import { RedisProcess } from '../harness/redis-process';
import { pollUntil, sleep } from '../unit/core-helpers';

interface Run {
  user: string;
  token: number;
  start: number;
  end: number;
}

/** Every run of every instance (the three applications share this process). */
const runs: Run[] = [];
/** What `Claims.refund` depends on. */
const gateway = { down: false };

@Injectable()
class Claims {
  @Locked('claim:<0>', { onBusy: 'defer', ttl: 2_000 })
  async claim(campaign: string, user: { id: string }): Promise<{ claimedBy: string } | Deferred> {
    const start = performance.now();
    const token = currentLock()!.fencingToken;
    await sleep(15);
    runs.push({ user: user.id, token, start, end: performance.now() });
    return { claimedBy: `${campaign}/${user.id}` };
  }

  @Locked('broken:<0>', { onBusy: 'defer' })
  async alwaysFails(id: string): Promise<void | Deferred> {
    await sleep(1);
    throw new TypeError(`inventory for ${id} is unreachable`);
  }

  @Locked('order:<0>', { onBusy: 'defer', deferKey: 'request:<1>' })
  async pay(order: string, requestId: string): Promise<string | Deferred> {
    runs.push({ user: `${order}/${requestId}`, token: currentLock()!.fencingToken, start: 0, end: 0 });
    return 'paid';
  }

  @Locked('anything:<0>', { onBusy: 'defer' })
  async takes(id: string, _payload: unknown): Promise<string | Deferred> {
    return id;
  }

  /** Throws while the gateway is down: its job can reach its final failure. */
  @Locked('refund:<0>', { onBusy: 'defer', deferKey: 'refund-request:<1>' })
  async refund(order: string, requestId: string): Promise<string | Deferred> {
    if (gateway.down) throw new Error('payment gateway down');
    runs.push({ user: `refunded ${order}/${requestId}`, token: currentLock()!.fencingToken, start: 0, end: 0 });
    return 'refunded';
  }

  readonly tenant = 't1';

  /** Key and deferKey functions that read the instance, as key functions may. */
  @Locked(
    function (this: Claims, id: string) {
      return `doc:${this.tenant}:${id}`;
    },
    {
      onBusy: 'defer',
      deferKey: function (this: Claims, _id: string, requestId: string) {
        return `save-request:${this.tenant}:${requestId}`;
      },
    },
  )
  async save(id: string, requestId: string): Promise<string | Deferred> {
    runs.push({ user: `saved ${id}/${requestId}`, token: currentLock()!.fencingToken, start: 0, end: 0 });
    return 'saved';
  }

  @Locked('item:<0>', { onBusy: 'defer', deferKey: 'put-request:<1.requestId>' })
  async put(id: string, _dto: { requestId?: string }): Promise<string | Deferred> {
    runs.push({ user: `put ${id}`, token: currentLock()!.fencingToken, start: 0, end: 0 });
    return 'put';
  }

  /** A result JSON cannot hold: an ORM-like entity with a back reference, or a BigInt. */
  @Locked('entity:<0>', { onBusy: 'defer' })
  async load(id: string, kind: 'circular' | 'bigint'): Promise<unknown> {
    runs.push({ user: `load ${id}`, token: currentLock()!.fencingToken, start: 0, end: 0 });
    if (kind === 'bigint') return { total: 10n };
    const order: Record<string, unknown> = { id, lines: [] };
    (order.lines as unknown[]).push({ order });
    return order;
  }

  /**
   * Charges, then calls a nested @Locked method on the same key from a callback that runs in another async
   * context (a pool created at startup binds its callbacks to its own context, as some database drivers do):
   * the nested call does not see the outer lock and times out waiting for it.
   */
  @Locked('charge:<0>', { onBusy: 'defer' })
  async charge(id: string): Promise<string | Deferred> {
    runs.push({ user: `charged ${id}`, token: currentLock()!.fencingToken, start: 0, end: 0 });
    await startupPool.query(() => this.audit(id));
    return 'charged';
  }

  @Locked('charge:<0>', { waitTimeout: 200 })
  async audit(id: string): Promise<void> {
    runs.push({ user: `audited ${id}`, token: 0, start: 0, end: 0 });
  }
}

/** A resource made at startup: its callbacks run in the startup async context, not the caller's. */
const startupContext = new AsyncResource('startup-pool');
const startupPool = { query: (callback: () => Promise<unknown>) => startupContext.runInAsyncScope(callback) };

@Controller('claims')
class ClaimsController {
  constructor(private readonly claims: Claims) {}

  @Post(':campaign/:user')
  claim(@Param('campaign') campaign: string, @Param('user') user: string): Promise<{ claimedBy: string } | Deferred> {
    return this.claims.claim(campaign, { id: user });
  }
}

describe("@Locked onBusy 'defer' (BullMQ)", () => {
  let redis: RedisProcess;
  let apps: INestApplication[] = [];
  let queue: Queue | undefined;
  let queueName = '';
  let testNo = 0;

  beforeAll(async () => {
    redis = await RedisProcess.start();
  });
  afterAll(async () => {
    startupContext.emitDestroy();
    await redis.stop();
  });
  beforeEach(() => {
    runs.length = 0;
    queueName = `defer-test-${++testNo}`;
  });
  afterEach(async () => {
    await Promise.all(apps.map((a) => a.close()));
    apps = [];
    await queue?.close();
    queue = undefined;
  });

  async function startApps(count: number, defer: DeferModuleOptions = {}): Promise<{ app: INestApplication; claims: Claims; locks: LockService }[]> {
    const made = [];
    for (let i = 0; i < count; i++) {
      @Module({
        imports: [
          DistributedLockModule.forRoot({
            redis: redis.url,
            keyPrefix: 'defer:',
            defer: { queueName, attempts: 3, backoff: 50, concurrency: 2, ...defer },
          }),
        ],
        providers: [Claims],
        controllers: [ClaimsController],
      })
      class AppModule {}
      const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
      const app = moduleRef.createNestApplication({ logger: ['error'] });
      await app.init();
      apps.push(app);
      made.push({ app, claims: app.get(Claims), locks: app.get(LockService) });
    }
    queue = new Queue(queueName, { connection: { host: redis.host, port: redis.port } });
    return made;
  }

  const counts = () => queue!.getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed', 'prioritized', 'waiting-children');
  const drained = async () => {
    const c = await counts();
    return c.waiting + c.active + c.delayed + c.prioritized === 0;
  };

  it('a burst on one key over three instances: every call ran here or was deferred and ran once later, one at a time, tokens rising', async () => {
    const instances = await startApps(3);
    const users = Array.from({ length: 30 }, (_, i) => `u${i}`);
    const results = await Promise.all(users.map((u, i) => instances[i % 3].claims.claim('spring', { id: u })));
    const deferred = results.filter((r): r is Deferred => r instanceof Deferred);
    const ranAtOnce = results.filter((r) => !(r instanceof Deferred));
    expect(deferred.length).toBeGreaterThan(0);
    expect(ranAtOnce.length).toBeGreaterThan(0);
    expect(new Set(deferred.map((d) => d.jobId)).size).toBe(deferred.length);

    expect(await pollUntil(drained, 40_000, 50)).toBe(true);
    const c = await counts();
    expect(c.failed).toBe(0);
    expect(c.completed).toBe(deferred.length);
    // 0 lost, 0 duplicates: each user ran exactly once.
    expect(runs.map((r) => r.user).sort()).toEqual([...users].sort());
    // Under the lock: no two runs overlapped, and the fencing token rose with each.
    const ordered = [...runs].sort((a, b) => a.start - b.start);
    for (let i = 1; i < ordered.length; i++) {
      expect(ordered[i].start).toBeGreaterThanOrEqual(ordered[i - 1].end);
      expect(ordered[i].token).toBeGreaterThan(ordered[i - 1].token);
    }
  }, 55_000);

  it('a method that always throws: retried, then in the failed set after `attempts` runs with its error type and message', async () => {
    const [{ claims, locks }] = await startApps(1, { attempts: 3, backoff: 20 });
    const held = await locks.acquire('broken:x');
    const answer = await claims.alwaysFails('x');
    expect(answer).toBeInstanceOf(Deferred);
    await held.release();
    expect(await pollUntil(async () => (await counts()).failed === 1, 20_000, 50)).toBe(true);
    const job = (await queue!.getJob((answer as Deferred).jobId))!;
    expect(job.attemptsMade).toBe(3);
    expect(job.failedReason).toBe('TypeError: inventory for x is unreachable');
    expect((await counts()).completed).toBe(0);
  });

  it("a job taken by another application's worker on the same queue fails saying the queue is shared, and how to fix it", async () => {
    // The application that defers runs no worker here, so the other one (same Redis, same queue name) takes the job.
    const [{ claims, locks }] = await startApps(1, { worker: false, attempts: 1 });
    @Injectable()
    class Mailer {
      @Locked('mail:<0>', { onBusy: 'defer' })
      async send(id: string): Promise<string | Deferred> {
        return id;
      }
    }
    @Module({
      imports: [DistributedLockModule.forRoot({ redis: redis.url, keyPrefix: 'mailer:', defer: { queueName, attempts: 1 } })],
      providers: [Mailer],
    })
    class MailerModule {}
    const other = await (await Test.createTestingModule({ imports: [MailerModule] }).compile()).createNestApplication({ logger: false }).init();
    apps.push(other);
    const held = await locks.acquire('claim:shared');
    const answer = await claims.claim('shared', { id: 'u1' });
    await held.release();
    expect(answer).toBeInstanceOf(Deferred);
    expect(await pollUntil(async () => (await counts()).failed === 1, 10_000, 50)).toBe(true);
    const job = (await queue!.getJob((answer as Deferred).jobId))!;
    // Before: "No singleton provider with the deferring method Claims.claim on this instance." and nothing more.
    expect(job.failedReason).toBe(
      'DistributedLockError: No singleton provider with the deferring method Claims.claim on this instance (it defers Mailer.send). ' +
        'Either another application shares this defer queue on the same Redis (every worker takes every job of its queue): give each ' +
        'application its own defer.queueName; or this instance runs a version without that method (a rolling deploy): an updated ' +
        'instance runs the job on a later attempt.',
    );
  });

  it('an application with the defer option but no deferring method runs no worker: it leaves the jobs of another application on the queue alone', async () => {
    const [{ claims, locks }] = await startApps(1, { worker: false, attempts: 1 });
    @Module({ imports: [DistributedLockModule.forRoot({ redis: redis.url, keyPrefix: 'plain:', defer: { queueName, attempts: 1 } })] })
    class PlainModule {}
    const other = await (await Test.createTestingModule({ imports: [PlainModule] }).compile()).createNestApplication({ logger: false }).init();
    apps.push(other);
    const held = await locks.acquire('claim:left');
    const answer = await claims.claim('left', { id: 'u1' });
    await held.release();
    expect(answer).toBeInstanceOf(Deferred);
    await sleep(1_000);
    // Before: the other application's worker took the job and failed it (no such method there).
    expect(await queue!.getJobState((answer as Deferred).jobId)).toBe('waiting');
    expect((await counts()).failed).toBe(0);
  });

  it('arguments that would not survive JSON: a typed DeferArgumentError naming the argument, and nothing enqueued', async () => {
    const [{ claims, locks }] = await startApps(1);
    const held = await locks.acquire('anything:x');
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    class Dto {
      constructor(readonly at = 1) {}
    }
    const bad: [unknown, RegExp][] = [
      [() => 1, /args\[1\] is a function/],
      [Symbol('s'), /args\[1\] is a symbol/],
      [10n, /args\[1\] is a BigInt/],
      [circular, /args\[1\]\.self is a circular reference/],
      [new Map(), /args\[1\] is an instance of Map/],
      [new Set([1]), /args\[1\] is an instance of Set/],
      [new Date(), /args\[1\] is an instance of Date/],
      [{ items: [new Dto()] }, /args\[1\]\.items\[0\] is an instance of Dto/],
      [[1, undefined], /args\[1\]\[1\] is undefined inside an array/],
      [NaN, /args\[1\] is NaN/],
      // Accepted by JSON.stringify, but they would arrive changed:
      // eslint-disable-next-line no-sparse-arrays -- the hole is the point
      [[1, , 3], /args\[1\]\[1\] is a hole in a sparse array \(it would arrive as null/],
      [{ seats: new Array(2) }, /args\[1\]\.seats\[0\] is a hole in a sparse array/],
      [Object.assign(['a'], { total: 5 }), /args\[1\]\.total is a property of an array that is not an index/],
      [Object.defineProperty({ a: 1 }, 'toJSON', { value: () => 'replaced' }), /args\[1\]\.toJSON is a non-enumerable property.*toJSON/],
      [Object.defineProperty({ a: 1 }, 'secret', { value: 2 }), /args\[1\]\.secret is a non-enumerable property/],
    ];
    for (const [payload, message] of bad) {
      const call = claims.takes('x', payload);
      await expect(call).rejects.toBeInstanceOf(DeferArgumentError);
      await expect(call).rejects.toThrow(message);
    }
    // Also refused while the key is free: the answer does not depend on contention.
    await held.release();
    await expect(claims.takes('x', new Map())).rejects.toBeInstanceOf(DeferArgumentError);
    const c = await counts();
    expect(c.waiting + c.delayed + c.active + c.completed + c.failed).toBe(0);
    // A plain object, an undefined property and an undefined argument are fine.
    const held2 = await locks.acquire('anything:x');
    await expect(claims.takes('x', { a: [1, 'b', null, { c: true }], gone: undefined })).resolves.toBeInstanceOf(Deferred);
    await held2.release();
  });

  it('-0 is accepted and stored as 0 (JSON writes it so; a request body carries it as -0)', async () => {
    const [{ claims, locks }] = await startApps(1);
    const held = await locks.acquire('anything:z');
    // Before: DeferArgumentError "args[1].delta is -0".
    const answer = await claims.takes('z', { delta: -0 });
    await held.release();
    expect(answer).toBeInstanceOf(Deferred);
    const job = (await queue!.getJob((answer as Deferred).jobId))!;
    expect(Object.is((job.data.args[1] as { delta: number }).delta, 0)).toBe(true);
  });

  it('arguments over a limit of a job: nested more than 1000 levels, or more than 16 MiB of JSON (a 600 MB one too): DeferArgumentError naming the limit, busy key or free, nothing enqueued', async () => {
    const [{ claims, locks }] = await startApps(1);
    const nested = (levels: number): unknown => {
      let value: unknown = { leaf: 1 };
      for (let i = 1; i < levels; i++) value = i % 2 ? [value] : { c: value };
      return value;
    };
    const chunk = 'x'.repeat(1024 * 1024);
    const mebibytes = (n: number) => ({ data: Array.from({ length: n }, () => chunk) });
    const refused: [string, () => unknown, 'depth' | 'size', RegExp][] = [
      // Before: accepted (1001 levels), and a stack overflow read as "a value that threw when read" (5000).
      ['1001 levels', () => nested(1001), 'depth', /args\[1\] is nested more than 1000 levels deep/],
      ['5000 levels', () => nested(5000), 'depth', /args\[1\] is nested more than 1000 levels deep/],
      // Before: enqueued (17 MiB), and a LockConnectionError "Check that Redis is reachable, and retry" (600 MB).
      ['17 MiB', () => mebibytes(17), 'size', /args is 17825\d{3} bytes as JSON, more than one job may store \(at most 16777216 bytes, 16 MiB\)/],
      ['600 MB', () => mebibytes(600), 'size', /args is longer as JSON than a JavaScript string can hold \(RangeError: Invalid string length\)/],
    ];
    for (const [what, payload, limit, message] of refused) {
      // The 600 MB one with the key busy only, the case that reached the enqueue: each try builds half a gigabyte.
      for (const busy of what === '600 MB' ? [true] : [true, false]) {
        const held = busy ? await locks.acquire('anything:x') : undefined;
        const error = await claims.takes('x', payload()).catch((e: unknown) => e);
        await held?.release();
        expect([what, busy, error]).toEqual([what, busy, expect.any(DeferArgumentError)]);
        expect((error as DeferArgumentError).limit).toBe(limit);
        expect((error as Error).message).toMatch(message);
      }
    }
    const c = await counts();
    expect(c.waiting + c.delayed + c.active + c.completed + c.failed).toBe(0);
    // Up to the limits, a call is deferred.
    const held = await locks.acquire('anything:x');
    await expect(claims.takes('x', nested(1000))).resolves.toBeInstanceOf(Deferred);
    await expect(claims.takes('x', mebibytes(15))).resolves.toBeInstanceOf(Deferred);
    await held.release();
  }, 60_000);

  it('deferKey: repeated defers of one logical call are one job, another request id another job', async () => {
    const [{ claims, locks }] = await startApps(1);
    const held = await locks.acquire('order:o1');
    const first = (await claims.pay('o1', 'r1')) as Deferred;
    const again = (await claims.pay('o1', 'r1')) as Deferred;
    const other = (await claims.pay('o1', 'r2')) as Deferred;
    expect(first).toBeInstanceOf(Deferred);
    expect(again.jobId).toBe(first.jobId);
    expect(other.jobId).not.toBe(first.jobId);
    await held.release();
    expect(await pollUntil(async () => (await counts()).completed === 2, 20_000, 50)).toBe(true);
    expect(runs.map((r) => r.user).sort()).toEqual(['o1/r1', 'o1/r2']);
    // After completion the same request id is still recognised (no third run).
    const held2 = await locks.acquire('order:o1');
    expect(((await claims.pay('o1', 'r1')) as Deferred).jobId).toBe(first.jobId);
    await held2.release();
    await sleep(200);
    expect(runs).toHaveLength(2);
  });

  it('a result JSON cannot hold (circular entity, BigInt): the job completes once with a null return value and a warning, never re-run', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn');
    try {
      const [{ claims, locks }] = await startApps(1, { attempts: 3, backoff: 20 });
      const held = [await locks.acquire('entity:c'), await locks.acquire('entity:b')];
      const jobs = [(await claims.load('c', 'circular')) as Deferred, (await claims.load('b', 'bigint')) as Deferred];
      expect(jobs.every((j) => j instanceof Deferred)).toBe(true);
      await Promise.all(held.map((h) => h.release()));
      expect(await pollUntil(async () => (await counts()).completed === 2, 20_000, 25)).toBe(true);
      await sleep(300); // a retry (the old failure) would run within the backoff
      for (const { jobId } of jobs) {
        const job = (await queue!.getJob(jobId))!;
        expect(await job.getState()).toBe('completed');
        expect(job.returnvalue).toBeNull();
        expect(job.failedReason).toBeFalsy();
      }
      expect((await counts()).failed).toBe(0);
      expect(runs.map((r) => r.user).sort()).toEqual(['load b', 'load c']);
      const warnings = warn.mock.calls.map(([message]) => String(message));
      expect(warnings).toEqual(
        expect.arrayContaining([
          expect.stringMatching(/Deferred Claims\.load \(job .+\) returned a value JSON cannot hold \(.*circular.*\)/i),
          expect.stringMatching(/Deferred Claims\.load \(job .+\) returned a value JSON cannot hold \(.*BigInt.*\)/i),
        ]),
      );
    } finally {
      warn.mockRestore();
    }
  });

  it('an error thrown by the method itself (a nested lock on its own key timing out) is not a busy key: rethrown, never deferred to run again', async () => {
    const [{ claims }] = await startApps(1, { worker: false });
    const call = claims.charge('c1');
    await expect(call).rejects.toBeInstanceOf(LockTimeoutError);
    await expect(call).rejects.toThrow(/charge:c1/);
    // It ran (and charged) once, here; nothing was enqueued to run it again.
    expect(runs.map((r) => r.user)).toEqual(['charged c1']);
    const c = await counts();
    expect(c.waiting + c.delayed + c.active + c.completed + c.failed).toBe(0);
  });

  it('deferKey: after its job failed for good, a repeat of the call runs (the failed job is retried, same id, all attempts again)', async () => {
    const [{ claims, locks }] = await startApps(1, { attempts: 2, backoff: 20 });
    gateway.down = true;
    let held = await locks.acquire('refund:o1');
    const first = (await claims.refund('o1', 'r1')) as Deferred;
    await held.release();
    expect(await pollUntil(async () => (await counts()).failed === 1, 20_000, 25)).toBe(true);
    gateway.down = false;
    held = await locks.acquire('refund:o1');
    const again = await claims.refund('o1', 'r1');
    await held.release();
    expect(again).toBeInstanceOf(Deferred);
    expect((again as Deferred).jobId).toBe(first.jobId);
    expect(await pollUntil(async () => (await queue!.getJobState(first.jobId)) === 'completed', 20_000, 25)).toBe(true);
    expect(runs.map((r) => r.user)).toEqual(['refunded o1/r1']);
    const job = (await queue!.getJob(first.jobId))!;
    expect(job.returnvalue).toBe('refunded');
    expect((job.stacktrace ?? []).join('\n')).toMatch(/payment gateway down/); // the earlier failure stays on the job
  });

  it('deferKey: a completed job older than the one-hour window no longer stands for the call, even on a quiet queue', async () => {
    const [{ claims, locks }] = await startApps(1);
    let held = await locks.acquire('order:o9');
    const first = (await claims.pay('o9', 'r9')) as Deferred;
    await held.release();
    expect(await pollUntil(async () => (await queue!.getJobState(first.jobId)) === 'completed', 20_000, 25)).toBe(true);
    // Two hours pass with nothing else completing on this queue (BullMQ trims completed jobs only then).
    const twoHoursAgo = Date.now() - 2 * 3_600_000;
    const client = redis.client();
    await client.zadd(`bull:${queueName}:completed`, twoHoursAgo, first.jobId);
    await client.hset(`bull:${queueName}:${first.jobId}`, 'finishedOn', String(twoHoursAgo));
    held = await locks.acquire('order:o9');
    const again = (await claims.pay('o9', 'r9')) as Deferred;
    await held.release();
    expect(again).toBeInstanceOf(Deferred);
    expect(await pollUntil(() => runs.length === 2, 20_000, 25)).toBe(true);
    expect(runs.map((r) => r.user)).toEqual(['o9/r9', 'o9/r9']);
    expect(await queue!.getJobState(again.jobId)).toBe('completed');
  });

  it("deferKey: a key function gets the method's `this`, and a deferKey that cannot be resolved fails every call, busy key or not", async () => {
    const [{ claims, locks }] = await startApps(1, { worker: false });
    const held = await locks.acquire('doc:t1:1');
    const first = await claims.save('1', 'r1');
    const again = await claims.save('1', 'r1');
    await held.release();
    expect(first).toBeInstanceOf(Deferred);
    expect((again as Deferred).jobId).toBe((first as Deferred).jobId);

    // No requestId: refused before anything runs, whether the key is free or busy.
    await expect(claims.put('1', {})).rejects.toBeInstanceOf(LockKeyError);
    const heldItem = await locks.acquire('item:1');
    await expect(claims.put('1', {})).rejects.toThrow(/deferKey/);
    await heldItem.release();
    expect(runs).toEqual([]);
    expect((await counts()).waiting).toBe(1);
  });

  it('HTTP: a deferred call answers 202 Accepted with the job id; a free key answers 201 with the result', async () => {
    const [{ app, locks }] = await startApps(1, { worker: false });
    const free = await request(app.getHttpServer()).post('/claims/fall/u1');
    expect(free.status).toBe(201);
    expect(free.body).toEqual({ claimedBy: 'fall/u1' });
    const held = await locks.acquire('claim:fall');
    const busy = await request(app.getHttpServer()).post('/claims/fall/u2');
    await held.release();
    expect(busy.status).toBe(202);
    expect(busy.body).toEqual({ status: 'deferred', jobId: expect.any(String), method: 'Claims.claim', queue: queueName });
    expect((await counts()).waiting).toBe(1); // worker: false: this instance only produces
  });
});
