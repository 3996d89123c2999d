/**
 * The faults of a T15 run, each with proof that it happened: a pause that never took effect, or a
 * restart that came back empty, would make the run pass for the wrong reason.
 */
import * as fs from 'fs';
import type Redis from 'ioredis';
import type { PauseWindow } from '../../harness/event-history/check-calls';
import { closeClient } from '../../harness/redis-clients';
import type { RedisProcess } from '../../harness/redis-process';
import type { WorkerHandle } from '../../harness/worker-process';
import { sleep } from '../workers/support/timing';
import type { FaultKind } from './workload';

export interface FaultRecord {
  kind: FaultKind;
  /** Worker name for worker faults. */
  target?: string;
  /** hrtime ns (the workers' clock) when the fault started and ended. */
  from: string;
  to: string;
  happened: boolean;
  evidence: string;
}

const hr = (): bigint => process.hrtime.bigint();

/** State letter of a process from /proc (R, S, T = stopped, Z, …), undefined once it is gone. */
export function processState(pid: number): string | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
  } catch {
    return undefined;
  }
}

/** How long after SIGSTOP the state is read: the kernel stops the process asynchronously. */
const SETTLE_MS = 20;

/** SIGSTOP a worker for `ms` (past its lease), then SIGCONT. The window is taken out of its calls' bounds. */
export async function stopWorker(worker: WorkerHandle, name: string, ms: number): Promise<{ record: FaultRecord; pause: PauseWindow }> {
  const from = hr();
  worker.pause();
  await sleep(SETTLE_MS);
  const state = processState(worker.pid);
  await sleep(Math.max(0, ms - SETTLE_MS));
  worker.resume();
  const to = hr();
  const record: FaultRecord = {
    kind: 'stop-worker',
    target: name,
    from: String(from),
    to: String(to),
    happened: state === 'T',
    evidence: `/proc state ${state} ${SETTLE_MS} ms after SIGSTOP; SIGCONT after ${ms} ms`,
  };
  return { record, pause: { w: name, from, to } };
}

export async function killWorker(worker: WorkerHandle, name: string): Promise<FaultRecord> {
  const from = hr();
  const exit = await worker.kill9();
  return {
    kind: 'kill-worker',
    target: name,
    from: String(from),
    to: String(hr()),
    happened: exit.signal === 'SIGKILL',
    evidence: `exit ${JSON.stringify(exit)}`,
  };
}

/**
 * SIGSTOP Redis for `ms`; proof: /proc says stopped, and a PING on a connection that answered just
 * before gets no answer in 200 ms.
 */
export async function stopRedis(redis: RedisProcess, ms: number): Promise<FaultRecord> {
  const probe = redis.client({ commandTimeout: 1_000 });
  try {
    await probe.ping();
    const from = hr();
    redis.pause();
    await sleep(SETTLE_MS);
    const state = processState(redis.pid);
    const ping = await Promise.race([
      probe.ping().then(
        () => 'answered',
        () => 'failed',
      ),
      sleep(200).then(() => 'no answer in 200 ms'),
    ]);
    await sleep(Math.max(0, ms - SETTLE_MS - 200));
    redis.resume();
    const to = hr();
    return {
      kind: 'stop-redis',
      from: String(from),
      to: String(to),
      happened: state === 'T' && ping !== 'answered',
      evidence: `/proc state ${state}; PING: ${ping}; SIGCONT after ${ms} ms`,
    };
  } finally {
    await closeClient(probe);
  }
}

/**
 * Restart Redis (clean SIGTERM, or kill -9 when `crash`) on its persistent data dir; proof: a new
 * pid, and a marker written before is there after (AOF, fsync always). Each side uses a client of
 * its own: a client that lived through the restart may still be waiting out its reconnect backoff.
 */
export async function restartRedis(redis: RedisProcess, crash: boolean, marker: string): Promise<FaultRecord> {
  const value = String(Math.random());
  await withClient(redis, (c) => c.set(marker, value));
  const oldPid = redis.pid;
  const from = hr();
  if (crash) await redis.kill9();
  await redis.restart();
  const to = hr();
  const [after, aof] = await withClient(redis, (c) => Promise.all([c.get(marker), c.config('GET', 'appendonly') as Promise<string[]>]));
  return {
    kind: 'restart-redis',
    from: String(from),
    to: String(to),
    happened: redis.pid !== oldPid && after === value && aof[1] === 'yes',
    evidence: `${crash ? 'kill -9' : 'SIGTERM'}; pid ${oldPid} -> ${redis.pid}; marker ${after === value ? 'kept' : `lost (${after})`}; appendonly ${aof[1]}`,
  };
}

/** Runs `use` on a fresh client of the current server, closed afterwards. */
export async function withClient<T>(redis: RedisProcess, use: (client: Redis) => Promise<T>): Promise<T> {
  const client = redis.client();
  try {
    return await use(client);
  } finally {
    await closeClient(client);
  }
}
