import type { Redis } from 'ioredis';
import type { CommandDeadlines } from './command-deadlines';
import { isNoScript, ScriptRunner } from './lua-script';
import type { ReplicaAcks } from './replica-acks';
import { HEALTH_PROBE } from './scripts';

/** How long a probe write stays: long enough to be a write, short enough to leave nothing behind. */
export const HEALTH_PROBE_TTL_MS = '1000';

/** One runner per connection probed (a Cluster's masters each have their own script cache). */
const runners = new WeakMap<Redis, ScriptRunner>();

function runnerFor(connection: Redis): ScriptRunner {
  let runner = runners.get(connection);
  if (!runner) runners.set(connection, (runner = new ScriptRunner(connection)));
  return runner;
}

/**
 * One probe write on one connection (a single Redis, Sentinel's primary, or one Cluster master), by the
 * path every lock call takes: a script (EVAL, then EVALSHA), bounded by `deadlines` and named `operation`
 * in its errors. With `replicaAcks`, confirmed by WAIT in the same pipeline, as every lock write is.
 */
export async function probeWrite(connection: Redis, deadlines: CommandDeadlines, operation: string, key: string, acks?: ReplicaAcks): Promise<void> {
  const scripts = runnerFor(connection);
  const args = [key, HEALTH_PROBE_TTL_MS];
  if (!acks) {
    await deadlines.bound(operation, (attempt) => scripts.run(HEALTH_PROBE, args, attempt), undefined, isNoScript);
    return;
  }
  const [, confirmed] = await deadlines.bound(
    operation,
    (attempt) => scripts.runThenWait(HEALTH_PROBE, args, acks.waitArgs, attempt),
    undefined,
    isNoScript,
  );
  if (confirmed < acks.required) throw acks.unconfirmedProbe(confirmed);
}
