/** Host-wide monotonic clock in ms (same CLOCK_MONOTONIC as the workers' `now()` strings). */
export const hrMs = (): number => Number(process.hrtime.bigint()) / 1e6;

/** A worker's `now()` stamp (ns as a decimal string) in ms on the same clock as hrMs(). */
export const stampMs = (stamp: string): number => Number(BigInt(stamp)) / 1e6;

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Sleeps until performance.now() has passed `at` (a timer alone may fire up to a millisecond early). */
export async function sleepUntil(at: number): Promise<void> {
  while (performance.now() <= at) await sleep(Math.max(1, Math.ceil(at - performance.now())));
}

/** True while a process with this pid exists (signal 0 only checks). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Polls `check` every `everyMs` until it returns true or `timeoutMs` passed; returns whether it did. */
export async function pollUntil(check: () => boolean | Promise<boolean>, timeoutMs: number, everyMs = 5): Promise<boolean> {
  const deadline = hrMs() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (hrMs() >= deadline) return false;
    await sleep(everyMs);
  }
}

/** How a call settled, and when: `at` on hrMs(), `startedPerf`/`settledPerf` on performance.now() (see TimerLateness). */
export interface Timed<T> {
  ms: number;
  at: number;
  startedPerf: number;
  settledPerf: number;
  value?: T;
  error?: unknown;
}

/**
 * Runs `promise` and reports how it settled, how long it took (`ms`) and when it settled (`at`, on
 * hrMs()). Never rejects, so a fault test can assert on the error and the duration together.
 * Given a function, calls it after the clock started: a call's own timer is armed when it is made,
 * which for a promise argument is before this clock starts, so a stall in between (30 ms measured on a
 * loaded machine) made a bounded call look shorter than its bound. Lower bounds need the function form.
 */
export async function timed<T>(call: Promise<T> | (() => Promise<T>)): Promise<Timed<T>> {
  const started = hrMs();
  const startedPerf = performance.now();
  try {
    const value = await (typeof call === 'function' ? call() : call);
    return { ms: hrMs() - started, at: hrMs(), startedPerf, settledPerf: performance.now(), value };
  } catch (error) {
    return { ms: hrMs() - started, at: hrMs(), startedPerf, settledPerf: performance.now(), error };
  }
}

/**
 * Resolves with when and why `signal` aborted: `at` on hrMs(), `perfAt` on performance.now() (the
 * library's own clock, to compare with a lease deadline). Never reads `lock.signal` again: that
 * getter checks the deadline itself, and the point is that the watchdog notices on its own.
 */
export function abortOf(signal: AbortSignal): Promise<{ at: number; perfAt: number; reason: unknown }> {
  return new Promise((resolve) => {
    const done = () => resolve({ at: hrMs(), perfAt: performance.now(), reason: signal.reason });
    if (signal.aborted) return done();
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * How late this process runs its timers, measured instead of assumed: a reference chain of 1 ms
 * timers, each fire stamped with performance.now() (the library's clock). A library timer due at T
 * runs in the first timers phase of the event loop at or after T, the same phase this chain runs in
 * whenever it is due (every millisecond), so a gap in the chain that spans T bounds how late that
 * timer could be. On an idle machine the gaps are ~1 ms; on a loaded one they show the load.
 */
export class TimerLateness {
  private readonly fires: number[] = [];
  private timer?: NodeJS.Timeout;
  private running = false;
  private stoppedAt?: number;

  start(): this {
    this.running = true;
    const tick = () => {
      this.fires.push(performance.now());
      // unref(): a test that fails before stop() does not keep the process alive with it.
      if (this.running) this.timer = setTimeout(tick, 1).unref();
    };
    this.timer = setTimeout(tick, 1).unref();
    return this;
  }

  stop(): void {
    this.running = false;
    clearTimeout(this.timer);
    this.stoppedAt = performance.now();
  }

  /** The chain's fires, ending with now (or the stop): the last gap is still open until then. */
  private chain(): number[] {
    return [...this.fires, this.stoppedAt ?? performance.now()];
  }

  /**
   * The longest gap between consecutive fires of the chain over [from, to] (performance.now() ms),
   * counting the gaps that straddle either end (an unfinished gap counts up to now).
   */
  maxGap(from: number, to: number): number {
    const fires = this.chain();
    let max = 0;
    for (let i = 1; i < fires.length; i++) {
      if (fires[i] < from || fires[i - 1] > to) continue;
      max = Math.max(max, fires[i] - fires[i - 1]);
    }
    return max;
  }

  /**
   * The latest a timer armed for `due` can have run, by this measurement: `due`, plus the longest gap
   * of the chain between `due` and `firedAt` (the first timers phase at or after `due` comes no later
   * than the chain's next fire), plus 2 ms because Node schedules timers in whole milliseconds (a
   * delay rounded up, a loop clock up to 1 ms coarse). Returns that bound's excess over `due` in ms.
   */
  allowedLateness(due: number, firedAt: number): number {
    return this.maxGap(due, firedAt) + 2;
  }

  /**
   * How long this process did not run its timers over [from, to] (performance.now() ms): the sum, over
   * the gaps of the chain that overlap it, of each gap beyond 2 ms (the chain's 1 ms period and Node's
   * whole-millisecond scheduling), counting only the part of a gap inside [from, to]; after stop(), the
   * last gap ends at the stop. A descheduled process or a blocked event loop shows up here; a call
   * bounded by a timer, and everything it runs on this process's turns, is held up by at most this much.
   */
  stalledMs(from: number, to: number): number {
    const fires = this.chain();
    let stalled = 0;
    for (let i = 1; i < fires.length; i++) {
      if (fires[i] < from || fires[i - 1] > to) continue;
      // Only the part of a gap inside [from, to]: a stall that ended before the call started, or began after
      // it settled, held it up not at all (counted whole, a 300 ms block just before a 101 ms call read 304.5 ms).
      const inside = Math.min(fires[i], to) - Math.max(fires[i - 1], from);
      stalled += Math.max(0, Math.min(inside, fires[i] - fires[i - 1] - 2));
    }
    return stalled;
  }

  /**
   * The longest a call measured by timed() may have taken to honour a bound of `bound` ms: the bound,
   * `slack` for the round trips and callbacks around its timer, and the time this process was stalled
   * while the call ran (a loaded CI machine fired a timer 246 ms late). On an idle machine that last
   * part is ~0 and the check is as tight as `bound + slack`; a call that waited a whole extra bound
   * still fails it unless the process was stalled for that long.
   */
  boundFor(call: Pick<Timed<unknown>, 'startedPerf' | 'settledPerf'>, bound: number, slack: number): number {
    return bound + slack + this.stalledMs(call.startedPerf, call.settledPerf);
  }
}
