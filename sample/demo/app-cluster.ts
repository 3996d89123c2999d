import * as path from 'path';
import { startWorker, WorkerHandle } from '../../test/harness/worker-process';

const MAIN = path.join(__dirname, '..', 'src', 'main.ts');
const START_TIMEOUT_MS = 30_000;

export interface AppInstance {
  readonly name: string;
  readonly port: number;
  readonly worker: WorkerHandle;
}

export interface ClusterOptions {
  count: number;
  /** Environment of every instance (REDIS_URL, DB_PATH, LOCK_MODE, ...); PORT and INSTANCE are set here. */
  env: Record<string, string>;
}

/**
 * N instances of the sample app as separate OS processes (so one can be frozen with SIGSTOP), each
 * on a port it picked itself and announced on stdout — no race for "free" ports.
 */
export class AppCluster {
  private constructor(readonly instances: readonly AppInstance[]) {}

  static async start(opts: ClusterOptions): Promise<AppCluster> {
    const workers = Array.from({ length: opts.count }, (_, i) => startWorker(MAIN, { env: { ...opts.env, PORT: '0', INSTANCE: `app-${i + 1}` } }));
    try {
      const ready = await Promise.all(workers.map((w) => w.waitFor((l) => l.event === 'listening', START_TIMEOUT_MS)));
      return new AppCluster(ready.map((line, i) => ({ name: line.instance as string, port: line.port as number, worker: workers[i] })));
    } catch (error) {
      await Promise.all(workers.map((w) => w.stop()));
      throw error;
    }
  }

  get ports(): number[] {
    return this.instances.map((i) => i.port);
  }

  /** SIGTERM (graceful: locks released, database closed), SIGKILL after 2 s. */
  async stop(): Promise<void> {
    await Promise.all(this.instances.map((i) => i.worker.stop()));
  }
}
