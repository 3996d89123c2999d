/**
 * A Redis Cluster on loopback, built from RedisProcess servers: masters only, or each with one replica
 * (for failover tests), plus the admin steps a resharding test needs: who owns a slot, moving a slot
 * by hand the way `redis-cli --cluster reshard` does, and the servers' error counters.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type Redis from 'ioredis';
import { Cluster, ClusterOptions } from 'ioredis';
import { RedisProcess } from './redis-process';

const run = promisify(execFile);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const HOST = '127.0.0.1';
/**
 * A master sends a replica its first full sync only after repl-diskless-sync-delay (default 5 s, waiting for more
 * replicas to share one transfer); without the delay a replica syncs in milliseconds (a cluster with replicas
 * took 8 s to start, 2 s without). Every node gets it: a replica may be promoted.
 */
const FAST_SYNC = ['--repl-diskless-sync', 'yes', '--repl-diskless-sync-delay', '0'];

export class RedisCluster {
  private readonly clients = new Set<Cluster>();
  private readonly admins = new Map<RedisProcess, Redis>();

  private constructor(readonly nodes: readonly RedisProcess[]) {}

  /**
   * Starts `masters` servers, joins them with `redis-cli --cluster create` and waits until every node
   * reports the cluster ok. `args` go to every server (e.g. `--rename-command SPUBLISH ''`).
   */
  static async start(
    masters = 3,
    args: string[] = [],
    topology: { replicas?: 0 | 1; nodeTimeoutMs?: number; nodeArgs?: (index: number) => string[] } = {},
  ): Promise<RedisCluster> {
    const { replicas = 0, nodeTimeoutMs = 2_000, nodeArgs = () => [] } = topology;
    const nodes: RedisProcess[] = [];
    try {
      for (let i = 0; i < masters * (1 + replicas); i++) {
        nodes.push(
          await RedisProcess.start({
            args: [
              '--cluster-enabled',
              'yes',
              '--cluster-config-file',
              `nodes-${i}.conf`,
              '--cluster-node-timeout',
              String(nodeTimeoutMs),
              ...FAST_SYNC,
              ...args,
              ...nodeArgs(i),
            ],
          }),
        );
      }
      // redis-cli makes the first `masters` nodes the masters and the rest their replicas.
      await run('redis-cli', [
        '--cluster',
        'create',
        ...nodes.map((n) => `${HOST}:${n.port}`),
        '--cluster-replicas',
        String(replicas),
        '--cluster-yes',
      ]);
      const cluster = new RedisCluster(nodes);
      for (const node of nodes) await cluster.waitUntilOk(node);
      for (const node of nodes) await cluster.waitUntilInSync(node);
      return cluster;
    } catch (error) {
      await Promise.all(nodes.map((n) => n.stop()));
      throw error;
    }
  }

  /** The nodes learn about each other over the cluster bus: a node says ok once it sees every slot served. */
  private async waitUntilOk(node: RedisProcess, timeoutMs = 10_000): Promise<void> {
    const admin = this.admin(node);
    for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await sleep(100)) {
      if (/cluster_state:ok/.test((await admin.call('CLUSTER', 'INFO')) as string)) return;
    }
    throw new Error(`cluster node :${node.port} did not report cluster_state:ok within ${timeoutMs} ms`);
  }

  /** A replica answers cluster_state:ok before its first sync: wait until its link to the master is up. */
  private async waitUntilInSync(node: RedisProcess, timeoutMs = 20_000): Promise<void> {
    const admin = this.admin(node);
    for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await sleep(100)) {
      const info = (await admin.call('INFO', 'replication')) as string;
      if (/role:master/.test(info) || /master_link_status:up/.test(info)) return;
    }
    throw new Error(`cluster replica :${node.port} did not sync with its master within ${timeoutMs} ms`);
  }

  /** The node replicating `master` (CLUSTER NODES asked of `asker`), if any. */
  async replicaOf(master: RedisProcess, asker: RedisProcess): Promise<RedisProcess | undefined> {
    const masterId = await this.nodeId(master);
    const lines = ((await this.admin(asker).call('CLUSTER', 'NODES')) as string).trim().split('\n');
    for (const line of lines) {
      const fields = line.split(' ');
      if (fields[3] !== masterId || fields[2].includes('fail')) continue;
      const port = Number(fields[1].split('@')[0].split(':')[1]);
      return this.nodes.find((n) => n.port === port);
    }
    return undefined;
  }

  /**
   * A Cluster client on every node, closed by stop(). `disableClientInfo`: ioredis ≥ 5.4 sends
   * CLIENT SETINFO on every connection, which Redis < 7.2 answers with an ERR that would count in
   * errorstats next to the errors a test is looking for (and the Cluster client opens a connection
   * per slot refresh).
   */
  client(options: ClusterOptions = {}): Cluster {
    const client = new Cluster(
      this.nodes.map((n) => ({ host: HOST, port: n.port })),
      {
        ...options,
        redisOptions: { maxRetriesPerRequest: 1, disableClientInfo: true, ...options.redisOptions },
      },
    );
    client.on('error', () => undefined);
    this.clients.add(client);
    return client;
  }

  /** One plain connection per node for admin commands (closed by the node's stop()). */
  admin(node: RedisProcess): Redis {
    let client = this.admins.get(node);
    if (!client) this.admins.set(node, (client = node.client()));
    return client;
  }

  async nodeId(node: RedisProcess): Promise<string> {
    return (await this.admin(node).call('CLUSTER', 'MYID')) as string;
  }

  /** The node that `asker` believes owns `slot` (CLUSTER NODES: `<id> <ip:port@bus> <flags> … <slot ranges>`). */
  async ownerOf(slot: number, asker: RedisProcess = this.nodes[0]): Promise<RedisProcess> {
    const lines = ((await this.admin(asker).call('CLUSTER', 'NODES')) as string).trim().split('\n');
    for (const line of lines) {
      const fields = line.split(' ');
      const owns = fields.slice(8).some((range) => {
        if (range.startsWith('[')) return false; // "[slot->-id]": an open migration, not ownership
        const [lo, hi = lo] = range.split('-').map(Number);
        return slot >= lo && slot <= hi;
      });
      if (owns) {
        const port = Number(fields[1].split('@')[0].split(':')[1]);
        const node = this.nodes.find((n) => n.port === port);
        if (node) return node;
      }
    }
    throw new Error(`no node owns slot ${slot} according to :${asker.port}`);
  }

  /**
   * Moves `slot` from `from` to `to` by hand: IMPORTING on the target, MIGRATING on the source,
   * MIGRATE the keys over in batches of `batch`, then SETSLOT NODE on every node, target first as
   * the Redis manual asks. `pauseMs` is waited before each batch and once more after the last one,
   * so clients meet the slot in every state: all keys still on the source, half moved (TRYAGAIN
   * for a multi-key command), all moved but not yet handed over (ASK). Returns the keys moved.
   */
  async migrateSlot(slot: number, from: RedisProcess, to: RedisProcess, opts: { batch?: number; pauseMs?: number } = {}): Promise<string[]> {
    const { batch = 10, pauseMs = 0 } = opts;
    const [fromId, toId] = await Promise.all([this.nodeId(from), this.nodeId(to)]);
    const source = this.admin(from);
    await this.admin(to).call('CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', fromId);
    await source.call('CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', toId);
    const moved: string[] = [];
    for (;;) {
      if (pauseMs > 0) await sleep(pauseMs);
      const keys = (await source.call('CLUSTER', 'GETKEYSINSLOT', String(slot), String(batch))) as string[];
      if (keys.length === 0) break;
      // A key that expired since GETKEYSINSLOT is simply not sent (MIGRATE answers NOKEY when none is left).
      await source.call('MIGRATE', HOST, String(to.port), '', '0', '5000', 'KEYS', ...keys);
      moved.push(...keys);
    }
    const others = this.nodes.filter((n) => n !== from && n !== to);
    for (const node of [to, from, ...others]) await this.admin(node).call('CLUSTER', 'SETSLOT', String(slot), 'NODE', toId);
    return moved;
  }

  /** `INFO errorstats` of one node as `{ ASK: n, MOVED: n, TRYAGAIN: n, … }` (Redis ≥ 6.2). */
  async errorStats(node: RedisProcess): Promise<Record<string, number>> {
    const info = (await this.admin(node).call('INFO', 'errorstats')) as string;
    const stats: Record<string, number> = {};
    for (const [, name, count] of info.matchAll(/^errorstat_(\w+):count=(\d+)/gm)) stats[name] = Number(count);
    return stats;
  }

  /** Sum of errorStats over all nodes. */
  async totalErrorStats(): Promise<Record<string, number>> {
    const total: Record<string, number> = {};
    for (const node of this.nodes) {
      for (const [name, count] of Object.entries(await this.errorStats(node))) total[name] = (total[name] ?? 0) + count;
    }
    return total;
  }

  async stop(): Promise<void> {
    await Promise.all([...this.clients].map((c) => c.quit().catch(() => c.disconnect())));
    this.clients.clear();
    await Promise.all(this.nodes.map((n) => n.stop()));
  }
}
