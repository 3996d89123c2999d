/**
 * The README's mode table, measured: the same uncontended acquire + release through `LockService`
 * in each deployment mode — one redis-server, a primary with two replicas and `replicaAcks: 2`, a
 * 3-master Cluster, and Redlock over three independent nodes — started once each, measured in rounds
 * interleaved across modes (the shared machine's speed drifts; each round changes the starting mode).
 * Redis CPU is summed over every server of the mode (replicas included: they apply every write).
 */
import type Redis from 'ioredis';
import { DistributedLockModuleOptions, LockService } from '../../lib';
import { RedisCluster } from '../../test/harness/redis-cluster';
import { RedisProcess } from '../../test/harness/redis-process';
import { median, sumServer } from '../measure/aggregate';
import { nowMs } from '../measure/clock';
import { ignoreClient, startRoundTripCount } from '../measure/round-trips';
import { startServerDelta } from '../measure/redis-server-stats';
import { fmt, renderTable, Table } from '../report/format';

export interface ModesConfig {
  rounds: number;
  cyclesPerRound: number;
}

export const MODES_FULL: ModesConfig = { rounds: 7, cyclesPerRound: 500 };
export const MODES_QUICK: ModesConfig = { rounds: 3, cyclesPerRound: 200 };

interface Mode {
  name: string;
  configure: string;
  options: Partial<DistributedLockModuleOptions>;
  /** Every server of the mode, for the CPU sum. */
  admins: Redis[];
}

export interface ModeResult {
  name: string;
  configure: string;
  usPerCycle: number;
  roundTripsPerCycle: number;
  cpuUsPerCycle: number;
}

/** A running topology; `stop` stops every process it started. */
interface Topology {
  modes: Mode[];
  stop(): Promise<void>;
}

const FAST_SYNC = ['--repl-diskless-sync', 'yes', '--repl-diskless-sync-delay', '0'];

async function startTopologies(): Promise<Topology> {
  const processes: RedisProcess[] = [];
  const start = async (args: string[] = []) => {
    const p = await RedisProcess.start({ args });
    processes.push(p);
    return p;
  };
  let cluster: RedisCluster | undefined;
  try {
    const single = await start();
    const primary = await start(FAST_SYNC);
    const replicas = [
      await start([...FAST_SYNC, '--replicaof', '127.0.0.1', String(primary.port)]),
      await start([...FAST_SYNC, '--replicaof', '127.0.0.1', String(primary.port)]),
    ];
    const nodes = [await start(), await start(), await start()];
    cluster = await RedisCluster.start(3);
    const admin = (p: RedisProcess) => {
      const client = p.client();
      ignoreClient(client);
      return client;
    };
    const primaryAdmin = admin(primary);
    for (let i = 0; i < 100 && !/connected_slaves:2/.test(await primaryAdmin.info('replication')); i++) await new Promise((r) => setTimeout(r, 100));
    const clusterClient = cluster.client();
    const modes: Mode[] = [
      { name: 'single Redis', configure: "redis: 'redis://…'", options: { redis: single.url }, admins: [admin(single)] },
      {
        name: 'primary + 2 replicas, replicaAcks 2',
        configure: 'redis: { sentinels, name }, replicaAcks: 2',
        options: { redis: primary.url, replicaAcks: 2 },
        admins: [primaryAdmin, ...replicas.map(admin)],
      },
      {
        name: 'Cluster, 3 masters',
        configure: 'redis: new Cluster(…)',
        options: { redis: clusterClient },
        admins: cluster.nodes.map((n) => cluster!.admin(n)),
      },
      {
        name: 'Redlock, 3 nodes',
        configure: "nodes: ['redis://a', 'redis://b', 'redis://c']",
        // Fresh nodes would be quarantined for nodeRecoveryDelay; none restarts here.
        options: { nodes: nodes.map((n) => n.url), nodeRecoveryDelay: 0 },
        admins: nodes.map(admin),
      },
    ];
    for (const m of modes) for (const a of m.admins) ignoreClient(a);
    const started = cluster;
    return {
      modes,
      async stop() {
        await started.stop();
        await Promise.all(processes.map((p) => p.stop()));
      },
    };
  } catch (error) {
    await cluster?.stop();
    await Promise.all(processes.map((p) => p.stop()));
    throw error;
  }
}

interface RoundFigures {
  usPerCycle: number;
  roundTrips: number;
  cpuUs: number;
}

async function measureRound(mode: Mode, round: number, cycles: number): Promise<RoundFigures> {
  const service = new LockService({ keyPrefix: 'modes:', ttl: 30_000, ...mode.options });
  await service.onModuleInit();
  try {
    const key = `bench:modes:${round}`;
    const cycle = async () => {
      const lock = await service.acquire(key);
      await lock.release();
    };
    for (let i = 0; i < 100; i++) await cycle();
    const deltas = await Promise.all(mode.admins.map((a) => startServerDelta(a)));
    const trips = startRoundTripCount();
    const started = nowMs();
    for (let i = 0; i < cycles; i++) await cycle();
    const elapsed = nowMs() - started;
    const roundTrips = trips().roundTrips;
    const server = sumServer(await Promise.all(deltas.map((read) => read())));
    return { usPerCycle: (elapsed * 1000) / cycles, roundTrips: roundTrips / cycles, cpuUs: server.cpuUs / cycles };
  } finally {
    await service.close();
  }
}

export async function runModesSection(config: ModesConfig, log: (line: string) => void): Promise<ModeResult[]> {
  log(`(modes) single, replicaAcks, Cluster, Redlock: ${config.rounds} rounds × ${config.cyclesPerRound} uncontended cycles each…`);
  const topology = await startTopologies();
  try {
    const byMode = new Map<string, RoundFigures[]>();
    const { modes } = topology;
    for (let round = 0; round < config.rounds; round++) {
      for (let i = 0; i < modes.length; i++) {
        const mode = modes[(i + round) % modes.length];
        byMode.set(mode.name, [...(byMode.get(mode.name) ?? []), await measureRound(mode, round, config.cyclesPerRound)]);
      }
    }
    return modes.map((m) => {
      const rounds = byMode.get(m.name)!;
      return {
        name: m.name,
        configure: m.configure,
        usPerCycle: median(rounds.map((r) => r.usPerCycle)),
        roundTripsPerCycle: median(rounds.map((r) => r.roundTrips)),
        cpuUsPerCycle: median(rounds.map((r) => r.cpuUs)),
      };
    });
  } finally {
    await topology.stop();
  }
}

export function modesTable(results: ModeResult[]): Table {
  const single = results[0];
  return [
    ['mode', 'µs per acquire + release (median round)', '÷ single', 'round trips', 'Redis CPU µs, all servers', '÷ single'],
    ...results.map((r) => [
      r.name,
      fmt(r.usPerCycle),
      `${(r.usPerCycle / single.usPerCycle).toFixed(2)}×`,
      fmt(r.roundTripsPerCycle, 2),
      fmt(r.cpuUsPerCycle),
      `${(r.cpuUsPerCycle / single.cpuUsPerCycle).toFixed(2)}×`,
    ]),
  ];
}

export const modesMarkdown = (results: ModeResult[]): string =>
  ['## Deployment modes: uncontended acquire + release', '', renderTable(modesTable(results)), ''].join('\n');
