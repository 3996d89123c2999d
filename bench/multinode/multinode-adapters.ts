import { ExecutionError, ExecutionStats, Redlock, Settings } from '@sesamecare-oss/redlock';
import Redis from 'ioredis';
import { LockService } from '../../lib';
import { lockClientOf } from '../adapters/ours.adapter';
import type { RedlockStore } from '../../lib/redis/redlock/redlock-store';
import { BENCH_TTL_MS, Held, LockAdapter, LockClient } from '../adapters/lock-adapter';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const REDLOCK_VERSION = (require('@sesamecare-oss/redlock/package.json') as { version: string }).version;

/**
 * A library spread over independent Redis nodes. `create` gets the nodes' URLs separated by spaces
 * (bench-server's `freshNodes`); `splitVotes` counts attempts, since the last `resetSplitVotes`, in
 * which some nodes granted but no majority did (contended split votes).
 */
export interface MultiNodeAdapter extends LockAdapter {
  splitVotes(): number | undefined;
  resetSplitVotes(): void;
}

const urlsOf = (target: string): string[] => target.split(' ').filter(Boolean);

/** Split votes the Redlock store of `service` counted (an internal counter of RedlockStore). */
const splitVotesOf = (service: LockService): number | undefined => (service.engine.store as Partial<RedlockStore>).votes?.splitVotes;

/** This library in Redlock mode (`nodes`), defaults otherwise: one LockService per client. */
export function oursRedlockAdapter(): MultiNodeAdapter {
  const services = new Set<LockService>();
  // Split votes of services already closed, and the total at the last reset.
  let closedTotal = 0;
  let baseline = 0;
  let known = true;
  const total = (): number => {
    let sum = closedTotal;
    for (const service of services) {
      const votes = splitVotesOf(service);
      if (votes === undefined) known = false;
      else sum += votes;
    }
    return sum;
  };
  return {
    name: 'ours',
    settings: `nestjs-distributed-lock (this repo), Redlock mode (nodes), defaults (watchdog on, waitTimeout 5000 ms) but nodeRecoveryDelay 0 (every round starts fresh nodes, none restarts), ttl ${BENCH_TTL_MS} ms`,
    role: 'ours',
    async create(target: string): Promise<LockClient> {
      // Fresh nodes would otherwise be quarantined for nodeRecoveryDelay (the ttl): nobody restarts one here.
      const service = new LockService({ nodes: urlsOf(target), ttl: BENCH_TTL_MS, nodeRecoveryDelay: 0 });
      await service.onModuleInit();
      services.add(service);
      const client = lockClientOf(service);
      return {
        ...client,
        async close() {
          closedTotal += splitVotesOf(service) ?? 0;
          services.delete(service);
          await client.close();
        },
      };
    },
    splitVotes: () => {
      const now = total();
      return known ? now - baseline : undefined;
    },
    resetSplitVotes: () => {
      baseline = total();
    },
  };
}

/** An attempt some nodes granted while a majority refused: a split vote. */
const isSplitVote = (stats: ExecutionStats): boolean => stats.votesFor.size > 0 && stats.votesFor.size < stats.quorumSize;

/** @sesamecare-oss/redlock over the same nodes, one client per node per application instance. */
function peerRedlockAdapter(name: string, settings: Settings, describe: string): MultiNodeAdapter {
  let splitVotes = 0;
  const countSplitVotes = (attempts: ReadonlyArray<Promise<ExecutionStats>>) => {
    for (const attempt of attempts) void attempt.then((stats) => (splitVotes += isSplitVote(stats) ? 1 : 0)).catch(() => undefined);
  };
  return {
    name,
    settings: `@sesamecare-oss/redlock ${REDLOCK_VERSION} over the same nodes, ${describe}, duration ${BENCH_TTL_MS} ms`,
    role: 'peer',
    async create(target: string): Promise<LockClient> {
      const clients = urlsOf(target).map((url) => new Redis(url));
      await Promise.all(clients.map((c) => c.ping()));
      const redlock = new Redlock(clients, settings);
      return {
        async acquire(key: string): Promise<Held | null> {
          try {
            const lock = await redlock.acquire([key], BENCH_TTL_MS);
            countSplitVotes(lock.attempts);
            return { release: async () => void (await lock.release()) };
          } catch (error) {
            if (error instanceof ExecutionError) {
              countSplitVotes(error.attempts);
              return null;
            }
            throw error;
          }
        },
        async close() {
          await Promise.all(clients.map((c) => c.quit()));
        },
      };
    },
    splitVotes: () => splitVotes,
    resetSplitVotes: () => {
      splitVotes = 0;
    },
  };
}

export const multiNodeAdapters = (): MultiNodeAdapter[] => [
  oursRedlockAdapter(),
  peerRedlockAdapter('redlock', {}, 'default settings (retryCount 10, retryDelay 200 ms, retryJitter 100 ms)'),
  peerRedlockAdapter('redlock-10ms', { retryDelay: 10 }, 'retryDelay 10 ms, every other setting default'),
];
