import { DistributedLockError } from '../errors/distributed-lock.error';
import { deferredMetricName } from './deferred-methods';
import type { DeferTarget } from './defer-target';

/**
 * The deferring methods this instance's worker runs, by job name (defer-target.ts), built at startup from
 * the singleton providers and controllers. Also answers the names of jobs enqueued by versions that named
 * a job by the class declaring the method (`Importer.run` for every subclass), still in the queue during a
 * rolling deploy: such a job runs on the one provider that inherits the method, and fails when several do.
 */
export class DeferTargets {
  private readonly byName = new Map<string, DeferTarget>();
  /** Targets whose job name is not their declared name, by declared name: the names of earlier versions' jobs. */
  private readonly byDeclaredName = new Map<string, DeferTarget[]>();

  /** Refuses a second instance answering to one job name: the worker could not tell which one deferred the job. */
  add(target: DeferTarget): void {
    const { name, instance, method } = target;
    const other = this.byName.get(name);
    if (other?.instance === instance) return; // one provider listed twice (an alias of it)
    if (other) {
      const className = name.slice(0, name.indexOf('.'));
      throw new DistributedLockError(
        `${method.where}: two provider instances would defer jobs named ${name}: either two classes are named ${className}, or ` +
          `one class is provided twice (two tokens, two instances). A job names the class of the instance that deferred it, and ` +
          `the worker must know which instance to run it on: give the classes distinct names, or provide the class once ` +
          `(useExisting for a second token).`,
      );
    }
    this.byName.set(name, target);
    if (method.name === name) return;
    const inheriting = this.byDeclaredName.get(method.name) ?? [];
    inheriting.push(target);
    this.byDeclaredName.set(method.name, inheriting);
  }

  get size(): number {
    return this.byName.size;
  }

  names(): string[] {
    return [...this.byName.keys()];
  }

  /** The target of a job name; undefined when none, or when an earlier version's name stands for several. */
  find(jobName: string): DeferTarget | undefined {
    const target = this.byName.get(jobName);
    if (target) return target;
    const inheriting = this.byDeclaredName.get(jobName);
    return inheriting?.length === 1 ? inheriting[0] : undefined;
  }

  /** The target a job runs on; throws, so that the job fails (and is retried, within `attempts`), when there is none or no single one. */
  resolve(jobName: string): DeferTarget {
    const target = this.find(jobName);
    if (target) return target;
    const inheriting = this.byDeclaredName.get(jobName);
    if (inheriting) {
      throw new DistributedLockError(
        `Deferred job ${jobName} names the class that declares the method, as jobs enqueued by an earlier version of the ` +
          `library did, and ${inheriting.length} providers inherit it here (${inheriting.map((t) => t.name).join(', ')}): which ` +
          `one deferred the call is unknown, so it is not run. Run the call again on the right provider (the job keeps its ` +
          `arguments); jobs enqueued from now on name the provider's class.`,
      );
    }
    // The usual causes, named so the failed job says what to change: the default queue name shared by two applications
    // on one Redis (each worker takes every job of the queue), or a rolling deploy that added the method.
    const here = this.byName.size === 0 ? 'it defers no method' : `it defers ${this.names().join(', ')}`;
    throw new DistributedLockError(
      `No singleton provider with the deferring method ${jobName} on this instance (${here}). Either another application ` +
        `shares this defer queue on the same Redis (every worker takes every job of its queue): give each application its own ` +
        `defer.queueName; or this instance runs a version without that method (a rolling deploy): an updated instance runs ` +
        `the job on a later attempt.`,
    );
  }

  /** The bounded metric name of a job's method; the job name when this instance has no target for it. */
  metricName(jobName: string): string {
    const target = this.find(jobName);
    return target ? deferredMetricName(target.method) : jobName;
  }
}
