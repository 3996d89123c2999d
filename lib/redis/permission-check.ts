import { LockConnectionError } from '../errors/lock-connection.error';
import { isAclRefusal } from './acl-refusal';
import type { CommandDeadlines } from './command-deadlines';
import { healthProbeKey } from './health-probe';
import { isNoScript, ScriptRunner } from './lua-script';
import { isClusterClient, type RedisClient } from './redis-connection';
import { masterProbeKey, slotOwners } from './cluster-slot-owners';
import { PERMISSION_CHECK } from './scripts';

/**
 * Whether Redis refuses the module's user what every lock call does (a script, on the lock keys, calling
 * TIME): the refusal, or undefined. Asked once at startup, bounded like every call: a user without
 * +@scripting started, reported healthy, and failed every acquire. Any other failure (a slow or
 * unreachable server) is not a permission problem and is left to the lock calls and the health check.
 *
 * On a Cluster every master of the slot table is asked, on a key in a slot it owns: ACLs are each node's
 * own (neither ACL SETUSER nor an ACL file is shared over the cluster bus), so one master that lacks a grant
 * fails the lock calls of its share of the slots while the others serve theirs. The refusal names it.
 */
export async function aclRefusalOf(client: RedisClient, deadlines: CommandDeadlines, keyPrefix: string): Promise<LockConnectionError | undefined> {
  const scripts = new ScriptRunner(client);
  if (!isClusterClient(client)) return refusalOn(scripts, deadlines, healthProbeKey(keyPrefix));
  const refusals = await Promise.all(
    [...slotOwners(client).owners].map(async ([name, owner]) => {
      const refusal = await refusalOn(scripts, deadlines, masterProbeKey(keyPrefix, owner.slot));
      return refusal && new LockConnectionError(`Cluster master ${name}: ${refusal.message}`, refusal.operation, { cause: refusal });
    }),
  );
  return refusals.find((refusal) => refusal !== undefined);
}

/** The permission check on the server that holds `key`. */
async function refusalOn(scripts: ScriptRunner, deadlines: CommandDeadlines, key: string): Promise<LockConnectionError | undefined> {
  try {
    await deadlines.bound('permission check', (attempt) => scripts.run(PERMISSION_CHECK, [key], attempt), undefined, isNoScript);
    return undefined;
  } catch (error) {
    return isAclRefusal(error) ? (error as LockConnectionError) : undefined;
  }
}

/**
 * Startup's refusal of a server (a single Redis, or one Redlock node: `target`) whose user may not do what every
 * lock call does: like a Sentinel's address, a misconfiguration no retry outlives, so the application does not start.
 */
export function refusedAtStartup(target: string, refusal: LockConnectionError, operation: string): LockConnectionError {
  return new LockConnectionError(
    `${target} refuses the module's Redis user what every lock call needs, so the application did not start ` +
      `(requireRedisAtStartup): ${refusal.message}`,
    operation,
    { cause: refusal },
  );
}
