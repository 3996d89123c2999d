import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import * as v8 from 'node:v8';
import * as vm from 'node:vm';
import type { Held, LockAdapter } from '../adapters';
import { withFreshServer } from '../measure/bench-server';
import { nowMs } from '../measure/clock';
import { RoundTripCounts, startRoundTripCount } from '../measure/round-trips';
import { ServerDelta, startServerDelta } from '../measure/redis-server-stats';

export interface HeldResult {
  locks: number;
  ttl: number;
  holdMs: number;
  /** Time to take all locks (ACQUIRE_IN_FLIGHT at a time). */
  acquireAllMs: number;
  /** Lease renewals Redis ran while held (script calls, from INFO commandstats). */
  renewals: number;
  /** renewals / locks: how many times each lease was renewed on average. */
  renewalRounds: number;
  /** Client round trips while held (every one of them is renewal traffic). */
  roundTrips: number;
  pipelines: number;
  /** Round trips per renewal round; connections: 1 for every library here. */
  roundTripsPerRound: number;
  /** Renewals carried per round trip (1 = one command per lock). */
  renewalsPerRoundTrip: number;
  /** Renewal commands sent on their own, outside any pipeline. */
  singleCommands: number;
  heapBytesPerLock: number;
  eventLoopDelayP99Ms: number;
  eventLoopDelayMaxMs: number;
  cpuUsPerRenewal: number;
  client: RoundTripCounts;
  server: ServerDelta;
}

/** Locks being taken at once while filling up (workload d measures holding, not a burst). */
const ACQUIRE_IN_FLIGHT = 256;

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

function settledHeap(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

/**
 * Every library renews one lease per script call (ours: pipelined EVALSHA of the renew script;
 * redis-semaphore: EVALSHA per lock; redlock: EVALSHA of its extend script per lock), and nothing
 * else runs a script while the locks are held: script calls = renewals.
 */
const renewalsIn = (server: ServerDelta): number => (server.byCommand.evalsha ?? 0) + (server.byCommand.eval ?? 0);

/**
 * (d) `locks` locks on distinct keys held at once by one client (one connection) with automatic
 * renewal on, for `holdMs`: how renewal traffic scales with the number of held locks, what a held
 * lock costs in heap, and whether renewing stalls the event loop.
 */
export async function runHeldWatchdog(adapter: LockAdapter, locks: number, ttl: number, holdMs: number): Promise<HeldResult | undefined> {
  return withFreshServer(async ({ url, admin }) => {
    const client = await adapter.create(url);
    if (!client.hold) {
      await client.close();
      return undefined;
    }
    const hold = client.hold.bind(client);
    try {
      // One warm-up lock so scripts are loaded and code is compiled before the heap baseline.
      await (await hold('bench:d:warm', ttl)).release();
      const heapBefore = settledHeap();
      const acquireStarted = nowMs();
      // Taken ACQUIRE_IN_FLIGHT at a time, like a busy service would, not as one burst of 10,000 commands.
      const held: Held[] = new Array<Held>(locks);
      let next = 0;
      await Promise.all(
        Array.from({ length: ACQUIRE_IN_FLIGHT }, async () => {
          while (next < locks) {
            const i = next++;
            held[i] = await hold(`bench:d:${i}`, ttl);
          }
        }),
      );
      const acquireAllMs = nowMs() - acquireStarted;
      const heapBytesPerLock = (settledHeap() - heapBefore) / locks;

      const serverDelta = await startServerDelta(admin);
      const readTrips = startRoundTripCount();
      const loopDelay = monitorEventLoopDelay({ resolution: 5 });
      loopDelay.enable();
      await sleep(holdMs);
      loopDelay.disable();
      const trips = readTrips();
      const server = await serverDelta();

      await Promise.all(held.map((h) => h.release()));
      const renewals = renewalsIn(server);
      const renewalRounds = renewals / locks;
      return {
        locks,
        ttl,
        holdMs,
        acquireAllMs,
        renewals,
        renewalRounds,
        roundTrips: trips.roundTrips,
        pipelines: trips.pipelines,
        roundTripsPerRound: renewalRounds > 0 ? trips.roundTrips / renewalRounds : NaN,
        renewalsPerRoundTrip: trips.roundTrips > 0 ? renewals / trips.roundTrips : NaN,
        singleCommands: trips.roundTrips - trips.pipelines,
        heapBytesPerLock,
        eventLoopDelayP99Ms: loopDelay.percentile(99) / 1e6,
        eventLoopDelayMaxMs: loopDelay.max / 1e6,
        cpuUsPerRenewal: renewals > 0 ? server.cpuUs / renewals : NaN,
        client: trips,
        server,
      };
    } finally {
      await client.close();
    }
  });
}
