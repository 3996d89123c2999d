/**
 * Telemetry is the user's code (a meter, a span processor, an exporter) and runs inside acquire,
 * release and the watchdog's tick. When it throws, locks must behave exactly as without it: the
 * method runs, the key is released and renewed as usual, and the failure is logged once per kind.
 */
import { Logger } from '@nestjs/common';
import { Meter, metrics, trace } from '@opentelemetry/api';
import { BasicTracerProvider, ReadableSpan, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { commandCalls, pollUntil, redisSuite, sleep } from './core-helpers';

/** A span processor whose onEnd throws, as a buggy exporter would; the SDK around it is real. */
class ThrowingSpanProcessor implements SpanProcessor {
  ended = 0;
  onStart(): void {}
  onEnd(_span: ReadableSpan): void {
    this.ended++;
    throw new Error('span processor exploded');
  }
  forceFlush(): Promise<void> {
    return Promise.resolve();
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** A user's meter provider whose counters throw on add (an attribute check in a custom meter, say). */
function throwingMeterProvider(counted: { adds: number }) {
  const noop = metrics.getMeterProvider().getMeter('noop');
  const meter = {
    ...noop,
    createCounter: () => ({
      add: () => {
        counted.adds++;
        throw new Error('counter exploded');
      },
    }),
    createHistogram: () => ({ record: () => undefined }),
  } as unknown as Meter;
  return { getMeter: () => meter };
}

describe('telemetry that throws does not affect locks', () => {
  const suite = redisSuite();
  let errors: string[];
  beforeEach(() => {
    errors = [];
    jest.spyOn(Logger.prototype, 'error').mockImplementation((message: unknown) => void errors.push(String(message)));
    metrics.disable();
    trace.disable();
  });
  afterEach(() => {
    metrics.disable();
    trace.disable();
    jest.restoreAllMocks();
  });

  it('a span processor that throws: withLock runs and releases, the next caller gets the key, the failure logged once per service', async () => {
    const processor = new ThrowingSpanProcessor();
    trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [processor] }));
    const locks = await suite.pool.make();
    const other = await suite.pool.make();
    let ran = 0;
    for (let i = 0; i < 3; i++) await locks.withLock('tel:1', () => void ran++, { ttl: 2_000 });
    expect(processor.ended).toBe(3); // the fault happened, on every acquisition
    expect(ran).toBe(3);
    expect(await suite.client.exists('test:{tel:1}')).toBe(0);
    const next = await other.tryAcquire('tel:1');
    expect(next).not.toBeNull();
    await next!.release();
    // Once per kind and service: three failed spans of `locks`, one of `other`.
    expect(errors.filter((e) => /telemetry \(acquireFinished\) failed.*span processor exploded/.test(e))).toHaveLength(2);
  });

  it('a meter whose counters throw: the lock is taken, renewed by the watchdog without a retry storm, and released', async () => {
    const counted = { adds: 0 };
    metrics.setGlobalMeterProvider(throwingMeterProvider(counted));
    const locks = await suite.pool.make();
    const other = await suite.pool.make();
    const renewalsBefore = await commandCalls(suite.client, 'evalsha');
    const lock = await locks.acquire('tel:2', { ttl: 300 });
    await sleep(700); // a watchdog renewal every 100 ms
    expect(counted.adds).toBeGreaterThan(1); // acquire and renewals counted, each add threw
    expect(lock.isHeld()).toBe(true);
    expect(await other.tryAcquire('tel:2')).toBeNull();
    // About 7 renewals and the acquire: a tick that threw would be retried at once, hundreds of times.
    expect((await commandCalls(suite.client, 'evalsha')) - renewalsBefore).toBeLessThan(30);
    expect(await lock.release()).toBe(true);
    expect(await pollUntil(async () => (await suite.client.exists('test:{tel:2}')) === 0, 500)).toBe(true);
    // Once per kind and service, however many records failed: acquireFinished of both, renewal of `locks`.
    const kinds = errors.map((e) => /telemetry \((\w+)\) failed/.exec(e)?.[1]);
    expect(kinds.sort()).toEqual(['acquireFinished', 'acquireFinished', 'renewal']);
  });
});
