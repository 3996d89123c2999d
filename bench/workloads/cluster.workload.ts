/**
 * The Cluster section: this library on a 3-master loopback Redis Cluster against one redis-server,
 * in the same run. Two clusters are started: one as shipped (Redis 7: handovers go by SPUBLISH on
 * the lock's master) and one whose servers have SPUBLISH and SSUBSCRIBE renamed away, so the
 * library falls back to PUBLISH, which the cluster bus copies to every master. Redis CPU is read
 * from each server's `INFO` (`used_cpu_user + used_cpu_sys`) before and after, minus what the same
 * server burns idle over the same time (cluster housekeeping: the bus' pings and gossip).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type Redis from 'ioredis';
import type { Cluster } from 'ioredis';
import { LockService } from '../../lib';
import { RedisCluster } from '../../test/harness/redis-cluster';
import { RedisProcess } from '../../test/harness/redis-process';
import { nowMs } from '../measure/clock';
import { ServerDelta, startServerDelta } from '../measure/redis-server-stats';
import { ignoreClient } from '../measure/round-trips';

export type ClusterTarget = 'single' | 'cluster-spublish' | 'cluster-publish';

export interface ClusterSectionConfig {
  contended: { workers: number; sectionMs: number; durationMs: number; repeats: number };
  parallel: { rounds: number; ops: number; inFlight: number };
  /** How long each server's idle CPU is sampled. */
  idleMs: number;
}

export const CLUSTER_SECTION: Record<'full' | 'quick', ClusterSectionConfig> = {
  full: { contended: { workers: 8, sectionMs: 1, durationMs: 6_000, repeats: 3 }, parallel: { rounds: 3, ops: 6_000, inFlight: 64 }, idleMs: 2_000 },
  quick: { contended: { workers: 8, sectionMs: 1, durationMs: 2_000, repeats: 2 }, parallel: { rounds: 2, ops: 2_000, inFlight: 64 }, idleMs: 1_000 },
};

/** One server of a target: its admin connection and idle CPU rate. */
interface Server {
  name: string;
  admin: Redis;
  idleCpuUsPerMs: number;
}

interface Target {
  name: ClusterTarget;
  servers: Server[];
  /** A new client of this target (the caller's LockService owns nothing: closed via `close`). */
  client(): Cluster | Redis;
  /** Index in `servers` of the master that holds `lockName`. */
  ownerIndex(lockName: string): Promise<number>;
}

export interface ClusterContendedResult {
  target: ClusterTarget;
  acquisitions: number;
  elapsedMs: number;
  acquisitionsPerSec: number;
  overlaps: number;
  /** Redis CPU per acquisition on each server (idle share taken out), µs. */
  cpuUsPerAcqByServer: number[];
  /** Sum over the servers. */
  cpuUsPerAcq: number;
  /** The lock's own master. */
  lockMasterCpuUsPerAcq: number;
  /** Calls per acquisition summed over the servers. */
  publishPerAcq: number;
  spublishPerAcq: number;
}

export interface ClusterParallelResult {
  target: ClusterTarget;
  ops: number;
  opsPerSec: number;
  opsPerSecRounds: number[];
  cpuUsPerOp: number;
}

export interface ClusterSectionResult {
  config: ClusterSectionConfig;
  contended: ClusterContendedResult[];
  parallel: ClusterParallelResult[];
}

const KEY = 'bench:cluster:c';

async function measureIdle(admin: Redis, ms: number): Promise<number> {
  const delta = await startServerDelta(admin);
  await sleep(ms);
  return (await delta()).cpuUs / ms;
}

async function clusterTarget(name: ClusterTarget, cluster: RedisCluster, idleMs: number): Promise<Target> {
  const servers: Server[] = [];
  for (const [i, node] of cluster.nodes.entries()) {
    const admin = cluster.admin(node);
    ignoreClient(admin);
    servers.push({ name: `master ${i + 1}`, admin, idleCpuUsPerMs: 0 });
  }
  const idle = await Promise.all(servers.map((s) => measureIdle(s.admin, idleMs)));
  idle.forEach((rate, i) => (servers[i].idleCpuUsPerMs = rate));
  return {
    name,
    servers,
    client: () => cluster.client(),
    ownerIndex: async (lockName) => {
      const slot = Number(await servers[0].admin.call('CLUSTER', 'KEYSLOT', lockName));
      return cluster.nodes.indexOf(await cluster.ownerOf(slot));
    },
  };
}

async function singleTarget(redis: RedisProcess, idleMs: number): Promise<Target> {
  const admin = redis.client();
  ignoreClient(admin);
  const server: Server = { name: 'single', admin, idleCpuUsPerMs: await measureIdle(admin, idleMs) };
  return { name: 'single', servers: [server], client: () => redis.client(), ownerIndex: () => Promise.resolve(0) };
}

async function serverDeltas(target: Target): Promise<() => Promise<ServerDelta[]>> {
  const reads = await Promise.all(target.servers.map((s) => startServerDelta(s.admin)));
  return () => Promise.all(reads.map((read) => read()));
}

/** `workers` LockServices (each its own client, as separate instances) loop on one key: acquire, hold `sectionMs`, release. */
async function runContended(target: Target, cfg: ClusterSectionConfig['contended'], durationMs: number): Promise<ClusterContendedResult> {
  const services: LockService[] = [];
  const clients: Array<Cluster | Redis> = [];
  try {
    for (let i = 0; i < cfg.workers; i++) {
      const client = target.client();
      clients.push(client);
      const service = new LockService({ redis: client, ttl: 30_000 });
      await service.onModuleInit();
      services.push(service);
    }
    const state = { inside: 0, overlaps: 0, acquisitions: 0, measuring: false };
    const worker = async (service: LockService, until: () => boolean) => {
      while (until()) {
        const lock = await service.acquire(KEY, { waitTimeout: 30_000 });
        if (state.inside > 0) state.overlaps++;
        state.inside++;
        if (state.measuring) state.acquisitions++;
        await sleep(cfg.sectionMs);
        state.inside--;
        await lock.release();
      }
    };
    // Warm-up: connections, script caches, every service's wake subscription, JIT.
    const warmEnd = nowMs() + 500;
    await Promise.all(services.map((s) => worker(s, () => nowMs() < warmEnd)));

    const read = await serverDeltas(target);
    state.measuring = true;
    const started = nowMs();
    const stopAt = started + durationMs;
    await Promise.all(services.map((s) => worker(s, () => nowMs() < stopAt)));
    const elapsedMs = nowMs() - started;
    state.measuring = false;
    const deltas = await read();

    const n = state.acquisitions;
    const cpuUsPerAcqByServer = deltas.map((d, i) => Math.max(0, d.cpuUs - target.servers[i].idleCpuUsPerMs * elapsedMs) / n);
    const calls = (name: string) => deltas.reduce((sum, d) => sum + (d.byCommand[name] ?? 0), 0) / n;
    const owner = await target.ownerIndex(`lock:{${KEY}}`);
    return {
      target: target.name,
      acquisitions: n,
      elapsedMs,
      acquisitionsPerSec: n / (elapsedMs / 1000),
      overlaps: state.overlaps,
      cpuUsPerAcqByServer,
      cpuUsPerAcq: cpuUsPerAcqByServer.reduce((a, b) => a + b, 0),
      lockMasterCpuUsPerAcq: cpuUsPerAcqByServer[owner],
      publishPerAcq: calls('publish'),
      spublishPerAcq: calls('spublish'),
    };
  } finally {
    await Promise.all(services.map((s) => s.close()));
    clients.forEach((c) => c.disconnect());
  }
}

/** One LockService, `inFlight` loops each on its own key, `ops` acquire + release in total (the single-node section's b). */
async function runParallel(target: Target, ops: number, inFlight: number): Promise<{ opsPerSec: number; cpuUs: number }> {
  const client = target.client();
  const service = new LockService({ redis: client, ttl: 30_000 });
  await service.onModuleInit();
  try {
    const loops = async (total: number) => {
      let started = 0;
      await Promise.all(
        Array.from({ length: inFlight }, async (_, slot) => {
          const key = `bench:cluster:b:${slot}`;
          while (started < total) {
            started++;
            const lock = await service.acquire(key, { onBusy: 'throw' });
            await lock.release();
          }
        }),
      );
    };
    await loops(inFlight * 4); // warm-up
    const read = await serverDeltas(target);
    const started = nowMs();
    await loops(ops);
    const elapsedMs = nowMs() - started;
    const deltas = await read();
    const cpuUs = deltas.reduce((sum, d, i) => sum + Math.max(0, d.cpuUs - target.servers[i].idleCpuUsPerMs * elapsedMs), 0);
    return { opsPerSec: ops / (elapsedMs / 1000), cpuUs };
  } finally {
    await service.close();
    client.disconnect();
  }
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** Merges repeats of one target: counts and CPU summed, so per-acquisition figures weigh each acquisition alike. */
function mergeRepeats(runs: ClusterContendedResult[]): ClusterContendedResult {
  const n = runs.reduce((sum, r) => sum + r.acquisitions, 0);
  const elapsedMs = runs.reduce((sum, r) => sum + r.elapsedMs, 0);
  const weighted = (pick: (r: ClusterContendedResult) => number) => runs.reduce((sum, r) => sum + pick(r) * r.acquisitions, 0) / n;
  const servers = runs[0].cpuUsPerAcqByServer.length;
  return {
    target: runs[0].target,
    acquisitions: n,
    elapsedMs,
    acquisitionsPerSec: n / (elapsedMs / 1000),
    overlaps: runs.reduce((sum, r) => sum + r.overlaps, 0),
    cpuUsPerAcqByServer: Array.from({ length: servers }, (_, i) => weighted((r) => r.cpuUsPerAcqByServer[i])),
    cpuUsPerAcq: weighted((r) => r.cpuUsPerAcq),
    lockMasterCpuUsPerAcq: weighted((r) => r.lockMasterCpuUsPerAcq),
    publishPerAcq: weighted((r) => r.publishPerAcq),
    spublishPerAcq: weighted((r) => r.spublishPerAcq),
  };
}

/**
 * Runs the section: the three targets started once, the contended repeats and the parallel rounds
 * interleaved across them (each round starting with a different target), so the machine's drift
 * hits all alike.
 */
export async function runClusterSection(config: ClusterSectionConfig, log: (line: string) => void): Promise<ClusterSectionResult> {
  const started: Array<{ stop(): Promise<void> }> = [];
  try {
    log('(cluster) starting one redis-server and two 3-master clusters (one without SPUBLISH/SSUBSCRIBE)…');
    const single = await RedisProcess.start();
    started.push(single);
    const sharded = await RedisCluster.start(3);
    started.push(sharded);
    const plain = await RedisCluster.start(3, ['--rename-command', 'SPUBLISH', '', '--rename-command', 'SSUBSCRIBE', '']);
    started.push(plain);
    const targets = [
      await singleTarget(single, config.idleMs),
      await clusterTarget('cluster-spublish', sharded, config.idleMs),
      await clusterTarget('cluster-publish', plain, config.idleMs),
    ];

    const { contended: c, parallel: p } = config;
    log(
      `(cluster a) ${c.workers} workers, one key, ${c.sectionMs} ms section: ${c.repeats} repeats × ${c.durationMs / c.repeats / 1000} s per target…`,
    );
    const contendedRuns = new Map<ClusterTarget, ClusterContendedResult[]>(targets.map((t) => [t.name, []]));
    for (let round = 0; round < c.repeats; round++) {
      for (let i = 0; i < targets.length; i++) {
        const target = targets[(i + round) % targets.length];
        contendedRuns.get(target.name)!.push(await runContended(target, c, c.durationMs / c.repeats));
      }
    }

    log(`(cluster b) ${p.inFlight} in flight on distinct keys: ${p.rounds} rounds × ${p.ops} ops per target…`);
    const parallelTargets = targets.filter((t) => t.name !== 'cluster-publish');
    const parallelRuns = new Map<ClusterTarget, Array<{ opsPerSec: number; cpuUs: number }>>(parallelTargets.map((t) => [t.name, []]));
    for (let round = 0; round < p.rounds; round++) {
      for (let i = 0; i < parallelTargets.length; i++) {
        const target = parallelTargets[(i + round) % parallelTargets.length];
        parallelRuns.get(target.name)!.push(await runParallel(target, p.ops, p.inFlight));
      }
    }

    return {
      config,
      contended: targets.map((t) => mergeRepeats(contendedRuns.get(t.name)!)),
      parallel: parallelTargets.map((t) => {
        const runs = parallelRuns.get(t.name)!;
        const opsPerSecRounds = runs.map((r) => r.opsPerSec);
        return {
          target: t.name,
          ops: p.ops * runs.length,
          opsPerSec: median(opsPerSecRounds),
          opsPerSecRounds,
          cpuUsPerOp: runs.reduce((sum, r) => sum + r.cpuUs, 0) / (p.ops * runs.length),
        };
      }),
    };
  } finally {
    for (const server of started.reverse()) await server.stop().catch(() => undefined);
  }
}
