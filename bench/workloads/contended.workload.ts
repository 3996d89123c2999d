import { setTimeout as sleep } from 'node:timers/promises';
import type { LockAdapter, LockClient } from '../adapters';
import { BenchFixture, freshServer } from '../measure/bench-server';
import { nowMs } from '../measure/clock';
import { sumServer, sumTrips } from '../measure/aggregate';
import { percentile } from '../measure/percentiles';
import { RoundTripCounts, startRoundTripCount } from '../measure/round-trips';
import type { ServerDelta } from '../measure/redis-server-stats';

/** What a run counts; everything else in a ContendedResult is derived from these, so repeats add up. */
interface ContendedCounts {
  workers: number;
  sectionMs: number;
  /** Wall time from start until the last worker finished (window + drain of the waiters). */
  elapsedMs: number;
  acquisitions: number;
  /** Every completed wait in ms (call → entering the section), across library give-ups. */
  waits: number[];
  /** Release of one holder → a DIFFERENT worker entering, in ms. */
  handoffs: number[];
  /** Acquisitions by the worker that had just released (the other successors are the handoffs). */
  reacquired: number;
  /** Times the library itself gave up waiting (its timeout / retry budget); the worker then asked again. */
  giveUps: number;
  overlaps: number;
  /** Acquisitions per worker (fairness at a glance). */
  perWorker: number[];
  client: RoundTripCounts;
  server: ServerDelta;
}

export interface ContendedResult extends ContendedCounts {
  /** Runs merged into this result (1 for a single run). */
  repeats: number;
  /** Acquisitions / elapsed over all repeats. */
  acquisitionsPerSec: number;
  /** acquisitions/s of each repeat, in run order (aligned across libraries for paired ratios). */
  acquisitionsPerSecRepeats: number[];
  /** Redis CPU µs per acquisition of each repeat, in run order (paired with the perfect-handover floor's repeats). */
  cpuUsPerAcqRepeats: number[];
  waitP50: number;
  waitP99: number;
  waitMax: number;
  handoffP50: number;
  handoffP99: number;
  /** Share of acquisitions taken by the worker that had just released. */
  reacquireShare: number;
  roundTripsPerAcq: number;
  commandsPerAcq: number;
  cpuUsPerAcq: number;
}

function contendedResult(counts: ContendedCounts, acquisitionsPerSecRepeats: number[], cpuUsPerAcqRepeats: number[]): ContendedResult {
  const n = counts.acquisitions;
  return {
    ...counts,
    repeats: acquisitionsPerSecRepeats.length,
    acquisitionsPerSec: n / (counts.elapsedMs / 1000),
    acquisitionsPerSecRepeats,
    cpuUsPerAcqRepeats,
    waitP50: percentile(counts.waits, 50),
    waitP99: percentile(counts.waits, 99),
    waitMax: percentile(counts.waits, 100),
    handoffP50: percentile(counts.handoffs, 50),
    handoffP99: percentile(counts.handoffs, 99),
    // Every acquisition but a run's first follows a release: either the releaser's again or a handoff.
    reacquireShare: counts.reacquired / (counts.reacquired + counts.handoffs.length),
    roundTripsPerAcq: counts.client.roundTrips / n,
    commandsPerAcq: counts.server.commands / n,
    cpuUsPerAcq: counts.server.cpuUs / n,
  };
}

/**
 * Repeats of one library at one section length as one result: counts, times and server deltas
 * summed, waits and handoffs pooled (percentiles over all of them), per-worker counts added up.
 */
export function mergeContendedRepeats(repeats: readonly ContendedResult[]): ContendedResult {
  const sum = (pick: (r: ContendedResult) => number) => repeats.reduce((n, r) => n + pick(r), 0);
  const { workers, sectionMs } = repeats[0];
  return contendedResult(
    {
      workers,
      sectionMs,
      elapsedMs: sum((r) => r.elapsedMs),
      acquisitions: sum((r) => r.acquisitions),
      waits: repeats.flatMap((r) => r.waits),
      handoffs: repeats.flatMap((r) => r.handoffs),
      reacquired: sum((r) => r.reacquired),
      giveUps: sum((r) => r.giveUps),
      overlaps: sum((r) => r.overlaps),
      perWorker: Array.from({ length: workers }, (_, w) => sum((r) => r.perWorker[w])),
      client: sumTrips(repeats.map((r) => r.client)),
      server: sumServer(repeats.map((r) => r.server)),
    },
    repeats.flatMap((r) => r.acquisitionsPerSecRepeats),
    repeats.flatMap((r) => r.cpuUsPerAcqRepeats),
  );
}

const KEY = 'bench:c';

/**
 * (c) `workers` clients — each its own connection(s)/LockService, as if separate instances — loop
 * on ONE key: acquire, hold `sectionMs`, release, ask again at once. They run in this process so
 * one monotonic clock stamps every event exactly: handoff latency and the in-section overlap flag
 * need no cross-process clock. The run lasts `durationMs`; workers still waiting then finish
 * their wait (drain), so the longest waits are measured, not cut off.
 */
export async function runContended(
  adapter: LockAdapter,
  workers: number,
  sectionMs: number,
  durationMs: number,
  fixture: BenchFixture = freshServer,
): Promise<ContendedResult> {
  return fixture(async ({ url, startDelta }) => {
    const clients: LockClient[] = [];
    try {
      for (let i = 0; i < workers; i++) clients.push(await adapter.create(url));
      const state = {
        inside: 0,
        overlaps: 0,
        lastHolder: -1,
        lastReleaseAt: 0,
        acquisitions: 0,
        reacquired: 0,
        giveUps: 0,
      };
      const waits: number[] = [];
      const handoffs: number[] = [];
      const perWorker = new Array<number>(workers).fill(0);
      let measuring = false;

      const acquireForSure = async (client: LockClient) => {
        for (;;) {
          const held = await client.acquire(KEY);
          if (held) return held;
          if (measuring) state.giveUps++;
        }
      };
      const worker = async (w: number, until: () => boolean) => {
        while (until()) {
          const askedAt = nowMs();
          const held = await acquireForSure(clients[w]);
          const enteredAt = nowMs();
          if (state.inside > 0) state.overlaps++;
          state.inside++;
          if (measuring) {
            waits.push(enteredAt - askedAt);
            state.acquisitions++;
            perWorker[w]++;
            if (state.lastHolder === w) state.reacquired++;
            else if (state.lastHolder >= 0) handoffs.push(enteredAt - state.lastReleaseAt);
          }
          await sleep(sectionMs);
          state.inside--;
          state.lastHolder = w;
          state.lastReleaseAt = nowMs();
          await held.release();
        }
      };

      // Warm-up under contention: connections, script cache, subscriber connections, JIT.
      const warmEnd = nowMs() + Math.min(500, durationMs / 4);
      await Promise.all(clients.map((_, w) => worker(w, () => nowMs() < warmEnd)));
      state.lastHolder = -1;

      const serverDelta = await startDelta();
      const readTrips = startRoundTripCount();
      measuring = true;
      const started = nowMs();
      const stopAt = started + durationMs;
      await Promise.all(clients.map((_, w) => worker(w, () => nowMs() < stopAt)));
      const elapsedMs = nowMs() - started;
      measuring = false;
      const trips = readTrips();
      const server = await serverDelta();

      return contendedResult(
        {
          workers,
          sectionMs,
          elapsedMs,
          acquisitions: state.acquisitions,
          waits,
          handoffs,
          reacquired: state.reacquired,
          giveUps: state.giveUps,
          // Overlaps of the warm-up count too: mutual exclusion must hold always.
          overlaps: state.overlaps,
          perWorker,
          client: trips,
          server,
        },
        [state.acquisitions / (elapsedMs / 1000)],
        [server.cpuUs / state.acquisitions],
      );
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  });
}
