/**
 * One master, its replicas and three Sentinels, each a private redis-server on a free loopback
 * port (RedisProcess: tracked by the reaper, stopped with the group). Failover tests kill -9 the
 * master and wait until the Sentinels promote a replica.
 */
import type Redis from 'ioredis';
import type { RedisOptions } from 'ioredis';
import { RedisProcess } from './redis-process';

export interface SentinelGroupOptions {
  /** Replicas of the master. @default 1 */
  replicas?: number;
  /** A master silent this long is subjectively down for a Sentinel. @default 500 */
  downAfterMs?: number;
  /**
   * `replica-priority` of each replica (lower wins the promotion; Redis' default is 100), so a test
   * can decide which replica a failover promotes.
   */
  replicaPriorities?: number[];
  /** Sentinel's failover-timeout (also: how long before a failed election is retried, doubled). @default 2000 */
  failoverTimeoutMs?: number;
}

export interface Address {
  host: string;
  port: number;
}

const HOST = '127.0.0.1';
const SENTINELS = 3;
const QUORUM = 2;
/**
 * A master sends a full sync only after repl-diskless-sync-delay (default 5 s); without a delay a
 * replica (re)syncs in milliseconds. Replicas get it too: one of them becomes the master.
 */
const FAST_SYNC = ['--repl-diskless-sync', 'yes', '--repl-diskless-sync-delay', '0'];
/** Sentinels find each other and the replicas through hello messages every 2 s. */
const DISCOVERY_TIMEOUT_MS = 15_000;

export class SentinelGroup {
  readonly name = 'mymaster';

  private constructor(
    /** The master the group started with (after a failover, one of the replicas is the master). */
    readonly master: RedisProcess,
    readonly replicas: readonly RedisProcess[],
    readonly sentinels: readonly RedisProcess[],
  ) {}

  /** Starts everything and resolves once every Sentinel sees the master, every replica and the other Sentinels. */
  static async start(opts: SentinelGroupOptions = {}): Promise<SentinelGroup> {
    const replicaCount = opts.replicas ?? 1;
    const started: RedisProcess[] = [];
    try {
      const master = await RedisProcess.start({ args: FAST_SYNC });
      started.push(master);
      const replicas: RedisProcess[] = [];
      for (let i = 0; i < replicaCount; i++) {
        const priority = String(opts.replicaPriorities?.[i] ?? 100);
        const replica = await RedisProcess.start({ args: [...FAST_SYNC, '--replica-priority', priority, '--replicaof', HOST, String(master.port)] });
        started.push(replica);
        replicas.push(replica);
      }
      const config = [
        `sentinel monitor mymaster ${HOST} ${master.port} ${QUORUM}`,
        `sentinel down-after-milliseconds mymaster ${opts.downAfterMs ?? 500}`,
        `sentinel failover-timeout mymaster ${opts.failoverTimeoutMs ?? 2_000}`,
        'sentinel parallel-syncs mymaster 2',
        '',
      ].join('\n');
      const sentinels: RedisProcess[] = [];
      for (let i = 0; i < SENTINELS; i++) {
        const sentinel = await RedisProcess.start({ config, args: ['--sentinel'] });
        started.push(sentinel);
        sentinels.push(sentinel);
      }
      const group = new SentinelGroup(master, replicas, sentinels);
      await group.waitUntilDiscovered(replicaCount);
      return group;
    } catch (error) {
      await Promise.all(started.map((p) => p.stop()));
      throw error;
    }
  }

  get sentinelAddresses(): Address[] {
    return this.sentinels.map((s) => ({ host: s.host, port: s.port }));
  }

  /** ioredis options of a client that finds the current master through the Sentinels. */
  clientOptions(): RedisOptions {
    return { sentinels: this.sentinelAddresses, name: this.name };
  }

  /** Master and replicas: whichever of them has `port`. */
  dataNode(port: number): RedisProcess {
    const node = [this.master, ...this.replicas].find((p) => p.port === port);
    if (!node) throw new Error(`no data node of the group listens on ${port}`);
    return node;
  }

  /** The master address according to one Sentinel (index `i`). */
  async masterAddress(i = 0): Promise<Address | undefined> {
    const reply = (await this.sentinelClient(i).call('SENTINEL', 'get-master-addr-by-name', this.name)) as [string, string] | null;
    return reply ? { host: reply[0], port: Number(reply[1]) } : undefined;
  }

  /**
   * Polls until every Sentinel names a master other than `oldPort` and that server says it is a
   * master; resolves with the new master's port, or throws after `timeoutMs`.
   */
  async waitForFailover(oldPort: number, timeoutMs: number): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const ports = await Promise.all(this.sentinels.map(async (_, i) => (await this.masterAddress(i))?.port));
      const port = ports[0];
      if (port !== undefined && port !== oldPort && ports.every((p) => p === port)) {
        const role = (await this.nodeClient(this.dataNode(port))
          .call('ROLE')
          .catch(() => undefined)) as [string] | undefined;
        if (role?.[0] === 'master') return port;
      }
      if (Date.now() > deadline) throw new Error(`no failover away from :${oldPort} within ${timeoutMs} ms (sentinels name ${ports.join(', ')})`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Replicas connected to the master on `port`, as it reports them. */
  async connectedReplicas(port: number): Promise<number> {
    const info = await this.nodeClient(this.dataNode(port)).info('replication');
    return Number(/^connected_slaves:(\d+)/m.exec(info)?.[1] ?? 0);
  }

  /** Replicas of the master on `port` that finished their sync and stream its writes. */
  async onlineReplicas(port: number): Promise<number> {
    const info = await this.nodeClient(this.dataNode(port)).info('replication');
    return (info.match(/^slave\d+:.*state=online/gm) ?? []).length;
  }

  /** Whether the replica on `port` has noticed that its master is gone (it applied everything it received). */
  async replicaLinkDown(port: number): Promise<boolean> {
    const info = await this.nodeClient(this.dataNode(port)).info('replication');
    return /^master_link_status:down/m.test(info);
  }

  /** A harness client to a data node (reused; closed by stop()). */
  clientOf(port: number): Redis {
    return this.nodeClient(this.dataNode(port));
  }

  /** Stops every process of the group (and the clients the harness made to them). */
  async stop(): Promise<void> {
    await Promise.all([...this.sentinels, this.master, ...this.replicas].map((p) => p.stop()));
  }

  private readonly clients = new Map<RedisProcess, Redis>();

  /** One harness client per process, reused (closed by that process's stop()). */
  private nodeClient(node: RedisProcess): Redis {
    let client = this.clients.get(node);
    if (!client) {
      client = node.client();
      this.clients.set(node, client);
    }
    return client;
  }

  private sentinelClient(i: number): Redis {
    return this.nodeClient(this.sentinels[i]);
  }

  private async waitUntilDiscovered(replicas: number): Promise<void> {
    const deadline = Date.now() + DISCOVERY_TIMEOUT_MS;
    let last = '';
    for (;;) {
      const views = await Promise.all(
        this.sentinels.map(async (_, i) => {
          const flat = (await this.sentinelClient(i).call('SENTINEL', 'MASTER', this.name)) as string[];
          const field = (name: string) => Number(flat[flat.indexOf(name) + 1]);
          return { replicas: field('num-slaves'), sentinels: field('num-other-sentinels') };
        }),
      );
      const synced = await this.onlineReplicas(this.master.port);
      if (synced === replicas && views.every((v) => v.replicas === replicas && v.sentinels === SENTINELS - 1)) return;
      last = `${JSON.stringify(views)}, ${synced} replicas online`;
      if (Date.now() > deadline) throw new Error(`sentinels did not discover the group within ${DISCOVERY_TIMEOUT_MS} ms: ${last}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
