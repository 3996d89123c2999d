/**
 * Records every library promise a fault test starts, so the test can assert that each of them
 * settled (nothing left hanging on a frozen or dead Redis) and how long each took.
 */
export interface Tracked {
  label: string;
  startedAt: number;
  settledAt?: number;
  outcome?: 'fulfilled' | 'rejected';
  error?: unknown;
}

export class SettleTracker {
  private readonly all: Tracked[] = [];

  /** Starts tracking `promise`; returns it unchanged (rejections still reach the caller). */
  track<T>(label: string, promise: Promise<T>): Promise<T> {
    const entry: Tracked = { label, startedAt: performance.now() };
    this.all.push(entry);
    promise.then(
      () => {
        entry.settledAt = performance.now();
        entry.outcome = 'fulfilled';
      },
      (error: unknown) => {
        entry.settledAt = performance.now();
        entry.outcome = 'rejected';
        entry.error = error;
      },
    );
    return promise;
  }

  /** Labels of promises that have not settled yet. */
  pending(): string[] {
    return this.all.filter((t) => t.outcome === undefined).map((t) => t.label);
  }

  get count(): number {
    return this.all.length;
  }
}
