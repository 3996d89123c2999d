/**
 * onBusy 'defer' with large arguments on a slow link: an enqueue writes its arguments as one Redis string, so it
 * takes longer the larger they are. Bounded by commandTimeout alone, a 6 MiB call through an 8 MiB/s link was told
 * "Redis did not answer the enqueue ... whether its job was stored is unknown" while Redis was healthy; its bound
 * now grows with the arguments (lib/defer/enqueue-bound.ts), and a frozen Redis still fails within that bound.
 */
import { INestApplication, Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Queue } from 'bullmq';
import '../harness/quiet-logs';
import { Deferred, DistributedLockModule, LockConnectionError, LockService, Locked } from '../../lib';
import { enqueueBound } from '../../lib/defer/enqueue-bound';
import { RedisProcess } from '../harness/redis-process';
import { TcpProxy } from '../harness/tcp-proxy';

const COMMAND_TIMEOUT = 500;
const LINK_BYTES_PER_SECOND = 8 * 1024 * 1024;
/**
 * 10 MiB: 1.25 s on the link, against a bound of 3 s (commandTimeout + 2.5 s for the arguments). With 6 MiB (0.75 s
 * of a 2 s bound) a loaded CI machine once ran out of the bound: the proxy paces the link with this process's timers,
 * so a busy event loop makes the link slower still.
 */
const BODY = 'x'.repeat(10 * 1024 * 1024);

@Injectable()
class Uploads {
  @Locked('upload:<0>', { onBusy: 'defer' })
  async store(id: string, body: string): Promise<number | Deferred> {
    return body.length;
  }
}

describe("onBusy 'defer': large arguments over a slow link", () => {
  let redis: RedisProcess;
  let proxy: TcpProxy;
  let app: INestApplication;
  let uploads: Uploads;
  let holder: LockService;
  let queue: Queue;
  const queueName = 'defer-slow-link';

  beforeAll(async () => {
    redis = await RedisProcess.start();
    proxy = await TcpProxy.start(redis.port);
    @Module({
      imports: [DistributedLockModule.forRoot({ redis: proxy.url, commandTimeout: COMMAND_TIMEOUT, defer: { queueName, worker: false } })],
      providers: [Uploads],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = moduleRef.createNestApplication({ logger: ['error'] });
    await app.init();
    uploads = app.get(Uploads);
    holder = new LockService({ redis: redis.url });
    await holder.onModuleInit();
    queue = new Queue(queueName, { connection: { host: redis.host, port: redis.port } });
  });
  afterAll(async () => {
    proxy?.setBandwidth(0);
    await app?.close();
    await holder?.close();
    await queue?.close();
    await proxy?.stop();
    await redis?.stop();
  });

  /** The call's outcome and how long it took, with `id`'s key held by another service. */
  async function deferWhileBusy(id: string): Promise<{ outcome: unknown; ms: number }> {
    const held = await holder.acquire(`upload:${id}`);
    try {
      const startedAt = performance.now();
      const outcome = await uploads.store(id, BODY).catch((error: unknown) => error);
      return { outcome, ms: performance.now() - startedAt };
    } finally {
      await held.release();
    }
  }

  it('a 10 MiB call through an 8 MiB/s link is deferred, though its enqueue takes longer than commandTimeout', async () => {
    proxy.setBandwidth(LINK_BYTES_PER_SECOND);
    const { outcome, ms } = await deferWhileBusy('1');
    console.log(
      `10 MiB deferred through 8 MiB/s: ${ms.toFixed(0)} ms, bound ${enqueueBound(COMMAND_TIMEOUT, Buffer.byteLength(JSON.stringify(['1', BODY])))} ms`,
    );
    // Before: LockConnectionError "did not answer the enqueue of Uploads.store within 500 ms (commandTimeout)".
    expect(outcome).toBeInstanceOf(Deferred);
    // The fault happened: the enqueue alone needed more than commandTimeout on this link.
    expect(ms).toBeGreaterThan(COMMAND_TIMEOUT);
    const job = await queue.getJob((outcome as Deferred).jobId);
    expect((job?.data as { args: [string, string] }).args[1]).toHaveLength(BODY.length);
  }, 30_000);

  it('control: the same call with Redis frozen after the busy answer fails once that longer bound is over, outcome unknown', async () => {
    proxy.setBandwidth(0);
    const bound = enqueueBound(COMMAND_TIMEOUT, Buffer.byteLength(JSON.stringify(['2', BODY])));
    expect(bound).toBe(COMMAND_TIMEOUT + 2_500);
    // Frozen between the lock attempt's "busy" and the enqueue (the attempt would fail first otherwise).
    const original = Queue.prototype.add;
    const add = jest.spyOn(Queue.prototype, 'add');
    add.mockImplementationOnce(function (this: Queue, ...args: Parameters<Queue['add']>) {
      redis.pause();
      return original.apply(this, args);
    });
    let result: { outcome: unknown; ms: number };
    let adds = 0;
    try {
      result = await deferWhileBusyFrozen('2');
    } finally {
      redis.resume();
      adds = add.mock.calls.length;
      add.mockRestore();
    }
    const { outcome, ms } = result;
    expect(adds).toBe(1);
    expect(outcome).toBeInstanceOf(LockConnectionError);
    expect((outcome as Error).message).toMatch(
      /did not answer the enqueue of Uploads\.store within 3000 ms \(commandTimeout 500 ms, plus time to write its arguments\).*unknown/,
    );
    expect(ms).toBeGreaterThanOrEqual(bound - 5);
    expect(ms).toBeLessThan(bound + 1_000);
  }, 30_000);

  /** deferWhileBusy, releasing the key only once Redis answers again (the caller resumes it). */
  async function deferWhileBusyFrozen(id: string): Promise<{ outcome: unknown; ms: number }> {
    const held = await holder.acquire(`upload:${id}`);
    const startedAt = performance.now();
    const outcome = await uploads.store(id, BODY).catch((error: unknown) => error);
    const ms = performance.now() - startedAt;
    redis.resume();
    await held.release();
    return { outcome, ms };
  }
});
