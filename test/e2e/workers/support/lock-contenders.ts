/**
 * Several LockServices in this process taking one key in a loop (T6 failover load). Each grant is
 * logged as a critical section on the host's monotonic clock with its fencing token, so the
 * history checker can prove no two holders were inside at once and fences rose in enter order.
 * A section ends when the holder leaves it, when the library says the lease was lost, or at the
 * lease's deadline, whichever is first: from then on the holder is not relying on the lock.
 */
import { Lock, LockService } from '../../../../lib';
import type { Section } from '../../../harness/history';
import { SettleTracker } from './settle-tracker';
import { hrMs, sleep } from './timing';

export interface Grant extends Section {
  /** When acquire() resolved (hrMs). */
  at: number;
}

export interface Failure {
  /** When the call settled (hrMs). */
  at: number;
  /** When the call was made (hrMs): with `at`, the stretch a timed-out wait covered. */
  startedAt: number;
  operation: 'acquire' | 'release';
  error: unknown;
}

export interface ContenderOptions {
  key: string;
  /** Time spent inside the section. */
  holdMs: number;
  /** Pause after a failed call, so a dead Redis does not turn the loop into a busy spin. */
  backoffMs: number;
}

const stamp = (): string => process.hrtime.bigint().toString();

/**
 * Now, or the lease's deadline if that passed already: a holder may rely on the lock until then
 * (isHeld()), not longer. A stalled event loop can run the end of the section before the timer that
 * would have reported the loss.
 */
function exitStamp(lock: Lock): string {
  const now = process.hrtime.bigint();
  const overdueMs = performance.now() - lock.deadline;
  return (overdueMs > 0 ? now - BigInt(Math.round(overdueMs * 1e6)) : now).toString();
}

export class LockContenders {
  readonly grants: Grant[] = [];
  readonly failures: Failure[] = [];
  private running = false;
  private loops: Promise<void>[] = [];

  constructor(
    private readonly services: readonly LockService[],
    private readonly calls: SettleTracker,
    private readonly options: ContenderOptions,
  ) {}

  start(): void {
    this.running = true;
    this.loops = this.services.map((service, i) => this.loop(service, i));
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  grantsBetween(from: number, to = Infinity): Grant[] {
    return this.grants.filter((g) => g.at >= from && g.at < to);
  }

  private async loop(service: LockService, worker: number): Promise<void> {
    const { key, holdMs, backoffMs } = this.options;
    while (this.running) {
      let lock: Lock;
      const acquireAt = hrMs();
      try {
        lock = await this.calls.track(`w${worker} acquire`, service.acquire(key));
      } catch (error) {
        this.failures.push({ at: hrMs(), startedAt: acquireAt, operation: 'acquire', error });
        await sleep(backoffMs);
        continue;
      }
      const grant: Grant = { worker, key, token: lock.token, fence: lock.fencingToken, at: hrMs(), enterAt: stamp(), exitAt: '' };
      const signal = lock.signal;
      const onLost = () => (grant.lostAt = stamp());
      signal.addEventListener('abort', onLost, { once: true });
      await sleep(holdMs);
      signal.removeEventListener('abort', onLost);
      grant.exitAt = grant.lostAt ?? exitStamp(lock);
      this.grants.push(grant);
      const releaseAt = hrMs();
      try {
        await this.calls.track(`w${worker} release`, lock.release());
      } catch (error) {
        this.failures.push({ at: hrMs(), startedAt: releaseAt, operation: 'release', error });
        await sleep(backoffMs);
      }
    }
  }
}
