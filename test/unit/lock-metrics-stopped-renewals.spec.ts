/**
 * Leases whose renewals stopped on purpose (maxHold reached; shutdown stopped waiting for the work) run out by the
 * holder's clock. When the watchdog's deadline timer could not say so first (an event loop blocked past it; after
 * close() the watchdog is gone), the release that follows must report what an operator alerts on: the lease lost,
 * with its reason, and a release that found it gone; never a release error (Redis trouble) for a lease that lapsed.
 */
import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { OtelCapture } from '../harness/otel-capture';
import { pollUntil, redisSuite, sleep } from './core-helpers';

const LOST = 'lock.lost';
const VALIDATION = 'lock.release.validation_failures';
const RELEASE_ERRORS = 'lock.release.errors';

/** Keeps the event loop busy (a CPU-bound section, a long GC): no timer runs meanwhile. */
function blockUntil(monotonicMs: number): void {
  while (performance.now() < monotonicMs);
}

describe('metrics of a lease whose renewals were stopped', () => {
  const suite = redisSuite();
  let otel: OtelCapture;
  let loggedErrors: jest.SpyInstance;
  beforeEach(() => {
    otel = new OtelCapture();
    otel.install();
    // The shutdown cases log, on purpose, the work still running past shutdownTimeout.
    loggedErrors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
  });
  afterEach(async () => {
    loggedErrors.mockRestore();
    await otel.uninstall();
  });

  it("maxHold reached, then the event loop blocked past the lease: the release counts the loss as 'max-hold', once", async () => {
    const locks = await suite.pool.make();
    const lock = await locks.acquire('report:1', { name: 'report', ttl: 300, maxHold: 400 });
    expect(await pollUntil(() => !lock.watchdogRenews, 2_000)).toBe(true); // maxHold reached: no more renewals
    blockUntil(lock.deadline + 100);
    // Called before any timer could run: the watchdog's deadline check is still pending.
    const released = await lock.release();
    await sleep(20); // the deadline timer runs now, and must not count it again

    expect(released).toBe(false);
    expect(await otel.find(LOST, { 'lock.name': 'report' })).toEqual([
      expect.objectContaining({ attributes: { 'lock.name': 'report', 'lock.lost.reason': 'max-hold' }, value: 1 }),
    ]);
    expect(await otel.total(VALIDATION, { 'lock.name': 'report' })).toBe(1);
    expect(locks.getStats()).toMatchObject({ lost: 1, releaseFailures: 1 });
  });

  it('work that outlived shutdownTimeout and its lease: the late release resolves false and counts a loss (expired), not a release error', async () => {
    const locks = await suite.pool.make({ shutdownTimeout: 200 });
    const lock = await locks.acquire('export:1', { name: 'export', ttl: 600 });
    await locks.close(); // the work still runs: renewals stop at the bound and the lease lapses by its TTL
    expect(loggedErrors.mock.calls.map(([m]) => String(m))).toEqual([expect.stringMatching(/"export:1" was still held by running work/)]);
    // The fault happened: Redis let the key go (a renewal on the wire at the bound may have extended it past our deadline).
    const key = locks.engine.store.keysFor('export:1').lock;
    expect(await pollUntil(async () => (await suite.client.exists(key)) === 0, 3_000)).toBe(true);

    const released = await lock.release().catch((error: Error) => error.name);

    expect(released).toBe(false);
    expect(await otel.total(RELEASE_ERRORS)).toBe(0);
    expect(await otel.find(LOST, { 'lock.name': 'export' })).toEqual([
      expect.objectContaining({ attributes: { 'lock.name': 'export', 'lock.lost.reason': 'expired' }, value: 1 }),
    ]);
    expect(await otel.total(VALIDATION, { 'lock.name': 'export' })).toBe(1);
    expect(locks.getStats()).toMatchObject({ lost: 1, releaseFailures: 1, connectionErrors: 0 });
  });

  it('control: the same work released before its lease ran out after shutdown is not counted lost', async () => {
    const locks = await suite.pool.make({ shutdownTimeout: 100 });
    const lock = await locks.acquire('export:2', { name: 'export', ttl: 2_000 });
    await locks.close();
    await lock.release().catch(() => undefined); // the connection is closed: the lease lapses by TTL
    expect(await otel.total(LOST)).toBe(0);
    expect(await otel.total(VALIDATION)).toBe(0);
  });
});
