/**
 * Kill -9 every child process the harness started that is still alive when the host process exits,
 * so a crashing or forgetful test never leaves a redis-server or a worker behind.
 *
 * Why this is not simply `process.on('exit', ...)`:
 * - Inside jest, the global `process` is a deep copy with its own EventEmitter state; its 'exit'
 *   event never fires. `vm.runInThisContext('process')` evaluates in Node's main context and
 *   returns the real process object (outside jest it is the same object).
 * - jest evaluates this module once per test file; one listener on the real process (found via a
 *   global symbol) avoids stacking a listener per file.
 * - The listener runs after jest tore the test environment down, so it must not `require` anything:
 *   it only uses the real process's `kill`, captured here.
 * - A child a test forgot to stop keeps the event loop (and so jest) alive, so 'exit' never comes
 *   for that case: `--detectOpenHandles` shows it as a CHILD_PROCESS/PIPEWRAP handle. A suite can
 *   add `afterAll(() => expect(killSurvivors()).toEqual([]))` as its LAST root-level hook (jest runs
 *   afterAll hooks in definition order, so a hook registered here at import time would run before
 *   the suite's own cleanup and kill processes that were about to be stopped properly).
 */
import * as vm from 'vm';

interface RealProcess {
  pid: number;
  kill(pid: number, signal: string): boolean;
  on(event: 'exit', listener: () => void): unknown;
}

interface Reaper {
  pids: Map<number, string>;
}

const REAPER_KEY = Symbol.for('nestjs-distributed-lock.test-harness.reaper');

const realProcess = vm.runInThisContext('process') as RealProcess & { [REAPER_KEY]?: Reaper };

function installReaper(): Reaper {
  const existing = realProcess[REAPER_KEY];
  if (existing) return existing;
  const reaper: Reaper = { pids: new Map() };
  realProcess[REAPER_KEY] = reaper;
  const kill = realProcess.kill.bind(realProcess);
  realProcess.on('exit', () => {
    for (const pid of reaper.pids.keys()) {
      try {
        kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    reaper.pids.clear();
  });
  return reaper;
}

const reaper = installReaper();

/** The pids tracked by this module instance (one jest test file), for killSurvivors(). */
const trackedHere = new Set<number>();

/** Remember a child to kill on exit. `what` names it in killSurvivors()' report. */
export function track(pid: number, what: string): void {
  reaper.pids.set(pid, what);
  trackedHere.add(pid);
}

/** Forget a child once it has exited (its pid may be reused by an unrelated process later). */
export function untrack(pid: number): void {
  reaper.pids.delete(pid);
  trackedHere.delete(pid);
}

/** Kill -9 every child still tracked by this module instance (this test file); returns what was killed. */
export function killSurvivors(): string[] {
  const killed: string[] = [];
  for (const pid of [...trackedHere]) {
    const what = reaper.pids.get(pid) ?? `pid ${pid}`;
    try {
      realProcess.kill(pid, 'SIGKILL');
      killed.push(`${what} (pid ${pid})`);
    } catch {
      // already gone
    }
    untrack(pid);
  }
  return killed;
}
