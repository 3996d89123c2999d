import type { Cluster } from 'ioredis';
import { CLUSTER_SLOTS, slotTag } from './key-slot';

/** A master as the client's slot table names it (`host:port`), and what it owns. */
export interface SlotOwner {
  /** One slot it owns: a key asked of this master lands there (masterProbeKey). */
  slot: number;
  count: number;
}

/**
 * The masters lock calls go to: the first node of every slot in the client's slot table. Not
 * `cluster.nodes('master')`: that is the connection pool, from which ioredis drops a node whose
 * connection ended, so a dead master (or every master) is simply missing from it and a probe of the
 * pool passed at once while the acquires of its slots failed.
 */
export function slotOwners(cluster: Cluster): { owners: Map<string, SlotOwner>; uncovered: number } {
  const owners = new Map<string, SlotOwner>();
  let uncovered = 0;
  const table = cluster.slots ?? [];
  for (let slot = 0; slot < CLUSTER_SLOTS; slot++) {
    const name = table[slot]?.[0];
    if (!name) {
      uncovered++;
      continue;
    }
    const owner = owners.get(name);
    if (owner) owner.count++;
    else owners.set(name, { slot, count: 1 });
  }
  return { owners, uncovered };
}

/**
 * The key the health probe writes and startup's permission check reads on the master that owns `slot`:
 * in the lock namespace (`<prefix>{`, as every lock key), so the key patterns of the user's ACL are
 * checked against it as against a lock key.
 */
export const masterProbeKey = (keyPrefix: string, slot: number): string => `${keyPrefix}{${slotTag(slot)}}:probe`;
