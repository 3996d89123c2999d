import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';
import { BENCH_TTL_MS } from '../adapters/lock-adapter';
import { COMPARE_AND_DELETE } from '../adapters/raw-floor.adapter';
import { withFreshServer } from './bench-server';
import { nowMs } from './clock';
import { startRoundTripCount } from './round-trips';
import { startServerDelta } from './redis-server-stats';

/** The least Redis work per acquisition of workload (c), measured with the same workers and section. */
export interface HandoverFloorResult {
  workers: number;
  sectionMs: number;
  elapsedMs: number;
  acquisitions: number;
  roundTripsPerAcq: number;
  commandsPerAcq: number;
  /** Redis CPU per acquisition, idle housekeeping over the run included (as in every (c) figure). */
  cpuUsPerAcq: number;
  /** cpuUsPerAcq of each run merged into this one, in run order (paired with the libraries' repeats). */
  cpuUsPerAcqRepeats: number[];
}

/** Runs of the floor as one result: per-acquisition figures weighted by each run's acquisitions. */
export function mergeHandoverFloorRepeats(repeats: readonly HandoverFloorResult[]): HandoverFloorResult {
  const acquisitions = repeats.reduce((n, r) => n + r.acquisitions, 0);
  const perAcq = (pick: (r: HandoverFloorResult) => number) => repeats.reduce((n, r) => n + pick(r) * r.acquisitions, 0) / acquisitions;
  return {
    workers: repeats[0].workers,
    sectionMs: repeats[0].sectionMs,
    elapsedMs: repeats.reduce((n, r) => n + r.elapsedMs, 0),
    acquisitions,
    roundTripsPerAcq: perAcq((r) => r.roundTripsPerAcq),
    commandsPerAcq: perAcq((r) => r.commandsPerAcq),
    cpuUsPerAcq: perAcq((r) => r.cpuUsPerAcq),
    cpuUsPerAcqRepeats: repeats.flatMap((r) => r.cpuUsPerAcqRepeats),
  };
}

const KEY = 'bench:c';

type HandoverClient = Redis & { benchCompareAndDelete(key: string, token: string): Promise<number> };

/**
 * A reference for "Redis CPU per acquisition" in (c): what any Redis lock must at least spend when
 * `workers` instances take turns on one key. An oracle in this process knows who is next, so
 * nobody waits on Redis, polls or gets woken: worker i takes the key (`SET NX PX`, which must
 * succeed), holds it `sectionMs`, frees it with the owner-checked delete script (EVALSHA, as the
 * raw floor does), and worker i + 1 — its own connection — takes it at once, round-robin, for
 * `durationMs` on a fresh server. Two round trips per acquisition, nothing else.
 */
export async function runHandoverFloor(workers: number, sectionMs: number, durationMs: number): Promise<HandoverFloorResult> {
  return withFreshServer(async ({ url, admin }) => {
    const clients = Array.from({ length: workers }, () => {
      const client = new Redis(url) as HandoverClient;
      client.defineCommand('benchCompareAndDelete', { numberOfKeys: 1, lua: COMPARE_AND_DELETE });
      return client;
    });
    try {
      await Promise.all(clients.map((c) => c.ping()));
      const turn = async (w: number) => {
        const token = randomUUID();
        if ((await clients[w].set(KEY, token, 'PX', BENCH_TTL_MS, 'NX')) !== 'OK') throw new Error('handover floor: the key was not free');
        await sleep(sectionMs);
        if ((await clients[w].benchCompareAndDelete(KEY, token)) !== 1) throw new Error('handover floor: the key was not ours at release');
      };
      // One turn each first: the script gets loaded (EVALSHA → NOSCRIPT → EVAL) outside the count.
      for (let w = 0; w < workers; w++) await turn(w);

      const serverDelta = await startServerDelta(admin);
      const readTrips = startRoundTripCount();
      const started = nowMs();
      let acquisitions = 0;
      for (let w = 0; nowMs() < started + durationMs; w = (w + 1) % workers) {
        await turn(w);
        acquisitions++;
      }
      const elapsedMs = nowMs() - started;
      const trips = readTrips();
      const server = await serverDelta();
      return {
        workers,
        sectionMs,
        elapsedMs,
        acquisitions,
        roundTripsPerAcq: trips.roundTrips / acquisitions,
        commandsPerAcq: server.commands / acquisitions,
        cpuUsPerAcq: server.cpuUs / acquisitions,
        cpuUsPerAcqRepeats: [server.cpuUs / acquisitions],
      };
    } finally {
      await Promise.all(clients.map((c) => c.quit()));
    }
  });
}
