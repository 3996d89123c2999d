import type { Cluster, Redis } from 'ioredis';
import { LockConnectionError } from '../errors/lock-connection.error';
import type { CommandDeadlines } from './command-deadlines';
import { CLUSTER_SLOTS } from './key-slot';
import { masterProbeKey, slotOwners } from './cluster-slot-owners';
import { probeWrite } from './probe-write';

/**
 * A Cluster's health probe: down while the client is not ready (every lock call fails then), when slots
 * have no master in its table, and for every slot owner that has no connection or fails its probe write
 * (on a key in a slot it owns, so on its own connection), each named `host:port`. The writes go at
 * once, side by side; every failure is reported, so the dead master is named beside whatever else fails
 * (the others answer CLUSTERDOWN once they mark it failed).
 */
export async function probeCluster(cluster: Cluster, deadlines: CommandDeadlines, keyPrefix: string): Promise<void> {
  if (cluster.status !== 'ready') {
    throw new LockConnectionError(
      `the Redis Cluster client is ${cluster.status}, not ready: every lock call fails until it has reconnected to the cluster`,
      'health probe',
    );
  }
  const { owners, uncovered } = slotOwners(cluster);
  const failures: Error[] = [];
  if (uncovered > 0) {
    failures.push(
      new LockConnectionError(
        `${uncovered} of ${CLUSTER_SLOTS} slots have no master in the Cluster client's slot table: lock calls on their keys fail`,
        'health probe',
      ),
    );
  }
  const connections = new Map<string, Redis>(cluster.nodes('master').map((node) => [`${node.options.host}:${node.options.port}`, node]));
  const probes = [...owners].map(([name, owner]) => {
    const connection = connections.get(name);
    if (!connection) {
      return Promise.reject(
        new LockConnectionError(
          `Cluster master ${name} (${owner.count} slots) has no connection: the client dropped it (the server is down or unreachable), ` +
            'so lock calls on its slots fail',
          'health probe',
        ),
      );
    }
    return probeWrite(connection, deadlines, `health probe of Cluster master ${name}`, masterProbeKey(keyPrefix, owner.slot));
  });
  for (const result of await Promise.allSettled(probes)) if (result.status === 'rejected') failures.push(result.reason as Error);
  if (failures.length === 1) throw failures[0];
  if (failures.length > 1) throw new LockConnectionError(failures.map((f) => f.message).join('; '), 'health probe', { cause: failures[0] });
}
