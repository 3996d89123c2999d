/**
 * `waitTimeout` bounds a waiting multi-key acquisition too. Keys are taken one by one in canonical order, one round
 * trip each at least; a lock on many free keys through a slow link took them all however long that was (20 keys at a
 * 50 ms round trip: a second, against a waitTimeout of 400 ms), since only waiting on a busy key looked at the bound.
 * Now no key is begun once the bound is over: `LockTimeoutError` naming the first key not tried, the keys taken given
 * back. Provoked with the harness TCP proxy (25 ms each way).
 */
import { LockService, LockTimeoutError } from '../../lib';
import { TcpProxy } from '../harness/tcp-proxy';
import { faultSuite, startService } from './workers/support/fault-helpers';
import { pollUntil, timed } from './workers/support/timing';

const ONE_WAY_MS = 25;
const WAIT_TIMEOUT = 400;
/** Scheduling around the last round trip; the bound below adds the time this process was measured stalled. */
const SLACK = 150;

const keysNamed = (prefix: string, count: number): string[] => Array.from({ length: count }, (_, i) => `${prefix}:${String(i).padStart(2, '0')}`);

describe('waitTimeout bounds a multi-key acquisition on a slow link', () => {
  let proxy: TcpProxy;
  const suite = faultSuite({
    heal: () => proxy.setDelay(0),
    afterClose: () => proxy.stop(),
  });

  beforeEach(async () => {
    proxy = await TcpProxy.start(suite.redis.port);
  });

  async function slowService(): Promise<{ service: LockService; roundTripMs: number }> {
    const service = await startService(suite.services, { redis: proxy.url, keyPrefix: 'mk:', waitTimeout: WAIT_TIMEOUT });
    proxy.setDelay(ONE_WAY_MS);
    // The fault: one key's acquire + release through the proxy, i.e. two round trips.
    const probe = await timed(async () => (await service.acquire('mk:probe')).release());
    return { service, roundTripMs: probe.ms / 2 };
  }

  it('20 free keys: LockTimeoutError once waitTimeout is over, naming the first key not tried; the keys taken go back', async () => {
    const { service, roundTripMs } = await slowService();
    const keys = keysNamed('many', 20);
    // Before: every key was taken, one round trip each, and the lock came after about 20 round trips.
    expect(keys.length * roundTripMs).toBeGreaterThan(2 * WAIT_TIMEOUT);

    const attempt = await timed(suite.calls.track('20 keys', service.acquire(keys)));
    expect(attempt.error).toBeInstanceOf(LockTimeoutError);
    const error = attempt.error as LockTimeoutError;
    const taken = Number(/after (\d+) of the 20 keys/.exec(error.message)?.[1]);
    console.log(
      `round trip ${roundTripMs.toFixed(0)} ms; timed out after ${attempt.ms.toFixed(0)} ms with ${taken} of 20 keys taken: ${error.message}`,
    );
    expect(taken).toBeGreaterThan(0);
    expect(taken).toBeLessThan(keys.length);
    expect(error.key).toBe(keys[taken]);
    expect(error.message).toMatch(/waitTimeout \(400 ms\) ran out .* the keys taken were given back\. Raise waitTimeout, or lock fewer keys at once/);
    // Within the bound, plus the one attempt begun before it ended.
    expect(attempt.ms).toBeLessThan(WAIT_TIMEOUT + roundTripMs + SLACK + suite.lateness.stalledMs(attempt.startedPerf, attempt.settledPerf));
    // Every key it took is free again (the give-back is sent without waiting for its answer).
    proxy.setDelay(0);
    expect(await pollUntil(async () => (await suite.client.keys('mk:{many:*}')).length === 0, 2_000)).toBe(true);
    expect(service.getStats().acquired).toBe(1); // the probe's only
  });

  it('control: 4 free keys fit in waitTimeout on the same link and are all taken', async () => {
    const { service, roundTripMs } = await slowService();
    const keys = keysNamed('few', 4);
    expect(keys.length * roundTripMs).toBeLessThan(WAIT_TIMEOUT - SLACK);

    const lock = await suite.calls.track('4 keys', service.acquire(keys));
    expect(lock.isHeld()).toBe(true);
    expect(await suite.client.exists(...keys.map((k) => `mk:{${k}}`))).toBe(4);
    expect(await lock.release()).toBe(true);
  });

  it("control: onBusy 'throw' never waits, so waitTimeout does not apply: 20 free keys are all taken", async () => {
    const { service } = await slowService();
    const keys = keysNamed('throw', 20);
    const lock = await suite.calls.track('20 keys, throw', service.acquire(keys, { onBusy: 'throw' }));
    expect(lock.isHeld()).toBe(true);
    expect(await suite.client.exists(...keys.map((k) => `mk:{${k}}`))).toBe(20);
    expect(await lock.release()).toBe(true);
  });
});
