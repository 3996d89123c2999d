/**
 * The worker side of the event history (test/harness/event-history/events.ts): stamps and writes
 * each event the moment it happens, one synchronous stdout line, so even a worker killed with
 * kill -9 leaves everything up to its death (the grant and checks of a lock it held when it died).
 */
import { Lock, LockLostError } from '../../../../lib';
import type { HistoryEvent, InvokeEvent } from '../../../harness/event-history/events';
import { emit, now } from '../../../harness/worker-log';

type InvokeFields = Omit<InvokeEvent, 'ev' | 'w' | 'c' | 't' | 'op'>;

export class HistoryRecorder {
  private nextCall = 1;
  /** Completions by kind: `error:<type>`, `busy`, `grant`, … (for the worker's summary line). */
  readonly outcomes: Record<string, number> = {};

  constructor(readonly worker: string) {}

  get calls(): number {
    return this.nextCall - 1;
  }

  /** Calls that ended with a LockConnectionError or another unexpected error (not busy/timeout). */
  failures = 0;

  invoke(op: InvokeEvent['op'], fields: InvokeFields = {}): number {
    const c = this.nextCall++;
    this.write({ ev: 'invoke', w: this.worker, c, op, ...fields, t: now() });
    return c;
  }

  /** Call `c` resolved with `lock`; from now on `c` names the lock. Watches it for a loss. */
  grant(c: number, lock: Lock): void {
    const t = now();
    this.count('grant');
    this.write({ ev: 'grant', w: this.worker, c, fences: Object.fromEntries(lock.fencingTokens), t });
    const signal = lock.signal;
    signal.addEventListener(
      'abort',
      () => {
        const t = now();
        if (signal.reason instanceof LockLostError) this.write({ ev: 'loss', w: this.worker, lock: c, reason: signal.reason.reason, t });
      },
      { once: true },
    );
  }

  enter(lock: number): void {
    this.write({ ev: 'enter', w: this.worker, lock, t: now() });
  }

  exit(lock: number): void {
    this.write({ ev: 'exit', w: this.worker, lock, t: now() });
  }

  /** Asks `isHeld()`, stamped just before asking (so a true answer covers the stamp). */
  held(id: number, lock: Lock): boolean {
    const t = now();
    const ok = lock.isHeld();
    this.write({ ev: 'held', w: this.worker, lock: id, ok, t });
    return ok;
  }

  release(c: number, ok: boolean | null): void {
    const t = now();
    this.count(`release:${ok}`);
    this.write({ ev: 'release', w: this.worker, c, ok, t });
  }

  error(c: number, error: unknown): void {
    const t = now();
    const type = (error as object | null)?.constructor?.name ?? typeof error;
    this.count(`error:${type}`);
    if (type !== 'LockBusyError' && type !== 'LockTimeoutError') this.failures++;
    this.write({ ev: 'error', w: this.worker, c, type, message: String((error as Error)?.message ?? error), t });
  }

  settle(c: number, result: string): void {
    const t = now();
    this.count(result);
    this.write({ ev: 'settle', w: this.worker, c, result, t });
  }

  private count(outcome: string): void {
    this.outcomes[outcome] = (this.outcomes[outcome] ?? 0) + 1;
  }

  private write(event: HistoryEvent): void {
    emit(event);
  }
}
