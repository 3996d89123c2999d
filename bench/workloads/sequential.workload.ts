import type { LockAdapter } from '../adapters';
import { median, sumServer, sumTrips } from '../measure/aggregate';
import { withFreshServer } from '../measure/bench-server';
import { startClientCpu } from '../measure/client-cpu';
import { nowMs } from '../measure/clock';
import { RoundTripCounts, startRoundTripCount } from '../measure/round-trips';
import { ServerDelta, startServerDelta } from '../measure/redis-server-stats';

/** One round of (a) on a fresh server. */
export interface SequentialRound {
  cycles: number;
  elapsedMs: number;
  clientCpuUs: number;
  client: RoundTripCounts;
  server: ServerDelta;
}

/** (a) over all rounds: time is the median round (noise-robust), counts are totals / cycles. */
export interface SequentialResult {
  cycles: number;
  rounds: number;
  usPerCycle: number;
  usPerCycleRounds: number[];
  roundTripsPerCycle: number;
  commandsPerCycle: number;
  cpuUsPerCycle: number;
  clientCpuUsPerCycle: number;
  client: RoundTripCounts;
  server: ServerDelta;
}

const WARMUP_CYCLES = 200;

/** (a) One client, one key, acquire + release back to back: the cost of the uncontended path. */
export async function runSequentialRound(adapter: LockAdapter, cycles: number): Promise<SequentialRound> {
  return withFreshServer(async ({ url, admin }) => {
    const client = await adapter.create(url);
    try {
      const cycle = async () => {
        const held = await client.acquire('bench:a');
        if (!held) throw new Error(`${adapter.name}: uncontended acquire gave up`);
        await held.release();
      };
      // Loads scripts (EVALSHA → NOSCRIPT → EVAL) and warms the JIT before anything is counted.
      for (let i = 0; i < WARMUP_CYCLES; i++) await cycle();
      const serverDelta = await startServerDelta(admin);
      const readTrips = startRoundTripCount();
      const readCpu = startClientCpu();
      const started = nowMs();
      for (let i = 0; i < cycles; i++) await cycle();
      const elapsedMs = nowMs() - started;
      const clientCpuUs = readCpu();
      const trips = readTrips();
      return { cycles, elapsedMs, clientCpuUs, client: trips, server: await serverDelta() };
    } finally {
      await client.close();
    }
  });
}

export function summarizeSequential(rounds: readonly SequentialRound[]): SequentialResult {
  const cycles = rounds.reduce((n, r) => n + r.cycles, 0);
  const client = sumTrips(rounds.map((r) => r.client));
  const server = sumServer(rounds.map((r) => r.server));
  const usPerCycleRounds = rounds.map((r) => (r.elapsedMs * 1000) / r.cycles);
  return {
    cycles,
    rounds: rounds.length,
    usPerCycle: median(usPerCycleRounds),
    usPerCycleRounds,
    roundTripsPerCycle: client.roundTrips / cycles,
    commandsPerCycle: server.commands / cycles,
    cpuUsPerCycle: server.cpuUs / cycles,
    clientCpuUsPerCycle: rounds.reduce((n, r) => n + r.clientCpuUs, 0) / cycles,
    client,
    server,
  };
}
