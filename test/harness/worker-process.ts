/**
 * Lock contenders as real OS processes (not promises in one event loop), so a test can SIGSTOP or
 * kill -9 one holder while the others keep running, exactly like an instance of a scaled service.
 * Workers report through JSON lines on stdout (see worker-log.ts); the parent collects them.
 */
import { ChildProcess, fork } from 'child_process';
import * as path from 'path';
import { track, untrack } from './reaper';

export { killSurvivors } from './reaper';

export interface WorkerOptions {
  /** Added to (and overriding) the parent's environment. */
  env?: Record<string, string>;
  args?: string[];
}

export interface WorkerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type WorkerLine = any;

export interface WorkerHandle {
  readonly pid: number;
  /** Every stdout line that parsed as JSON, in arrival order. */
  readonly lines: WorkerLine[];
  /** stdout lines that were not JSON (stray console.log output), newline-terminated. */
  readonly stdoutText: string;
  readonly stderrText: string;
  /** Settles (never rejects) once the worker exited and its pipes are closed. */
  readonly exited: Promise<WorkerExit>;
  /**
   * The first line (already received or still to come) matching `pred`. Rejects, quoting stderr,
   * on timeout or when the worker exits without such a line.
   */
  waitFor(pred: (line: WorkerLine, index: number) => boolean, timeoutMs: number): Promise<WorkerLine>;
  pause(): void;
  resume(): void;
  kill9(): Promise<WorkerExit>;
  /** IPC message to the worker (`process.on('message')` there). */
  send(msg: unknown): Promise<void>;
  /** SIGTERM, SIGKILL after 2 s; resolves when it has exited. Idempotent. */
  stop(): Promise<WorkerExit>;
}

const TS_REGISTER = path.join(__dirname, 'ts-register.js');
const STOP_GRACE_MS = 2_000;
// A runaway worker printing errors in a loop must not eat the test runner's memory.
const STDERR_LIMIT = 1024 * 1024;

interface Waiter {
  pred: (line: WorkerLine, index: number) => boolean;
  resolve: (line: WorkerLine) => void;
  reject: (err: Error) => void;
}

class WorkerProcess implements WorkerHandle {
  readonly lines: WorkerLine[] = [];
  stdoutText = '';
  stderrText = '';
  readonly exited: Promise<WorkerExit>;
  private exit?: WorkerExit;
  private partial = '';
  private readonly waiters = new Set<Waiter>();
  private stopping?: Promise<WorkerExit>;

  constructor(
    private readonly file: string,
    private readonly child: ChildProcess,
  ) {
    if (child.pid === undefined) throw new Error(`cannot fork worker ${file}`);
    track(child.pid, `worker ${path.basename(file)}`);
    child.stdout?.setEncoding('utf8');
    child.stderr?.setEncoding('utf8');
    child.stdout?.on('data', (chunk: string) => this.onStdout(chunk));
    child.stderr?.on('data', (chunk: string) => {
      this.stderrText = (this.stderrText + chunk).slice(-STDERR_LIMIT);
    });
    // Without a listener, a failed send() or kill() would be thrown as an uncaught 'error' event.
    child.on('error', (err) => {
      this.stderrText += `\n[harness] child process error: ${err.message}\n`;
    });
    child.once('exit', () => untrack(this.pid));
    this.exited = new Promise((resolve) => {
      child.once('close', (code: number | null, signal: NodeJS.Signals | null) => {
        if (this.partial) this.onLine(this.partial);
        this.partial = '';
        this.exit = { code, signal };
        const why = `worker ${path.basename(this.file)} exited (${signal ? `signal ${signal}` : `code ${code}`})`;
        for (const waiter of this.waiters) waiter.reject(this.failure(why));
        this.waiters.clear();
        resolve(this.exit);
      });
    });
  }

  get pid(): number {
    return this.child.pid as number;
  }

  waitFor(pred: (line: WorkerLine, index: number) => boolean, timeoutMs: number): Promise<WorkerLine> {
    const index = this.lines.findIndex(pred);
    if (index >= 0) return Promise.resolve(this.lines[index]);
    if (this.exit) return Promise.reject(this.failure('worker had already exited'));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(this.failure(`no matching line within ${timeoutMs} ms`));
      }, timeoutMs);
      const waiter: Waiter = {
        pred,
        resolve: (line) => {
          clearTimeout(timer);
          resolve(line);
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      };
      this.waiters.add(waiter);
    });
  }

  pause(): void {
    this.signal('SIGSTOP');
  }

  resume(): void {
    this.signal('SIGCONT');
  }

  async kill9(): Promise<WorkerExit> {
    if (!this.exit) this.child.kill('SIGKILL');
    return this.exited;
  }

  send(msg: unknown): Promise<void> {
    return new Promise((resolve, reject) => {
      this.child.send(msg as object, (err) => (err ? reject(err) : resolve()));
    });
  }

  stop(): Promise<WorkerExit> {
    this.stopping ??= (async () => {
      if (this.exit) return this.exit;
      this.child.kill('SIGTERM');
      // A SIGSTOPped worker would hold SIGTERM until continued.
      this.child.kill('SIGCONT');
      const timer = setTimeout(() => {
        if (!this.exit) this.child.kill('SIGKILL');
      }, STOP_GRACE_MS);
      try {
        return await this.exited;
      } finally {
        clearTimeout(timer);
      }
    })();
    return this.stopping;
  }

  private signal(sig: NodeJS.Signals): void {
    if (this.exit) throw new Error(`worker ${path.basename(this.file)} has already exited`);
    this.child.kill(sig);
  }

  private onStdout(chunk: string): void {
    const parts = (this.partial + chunk).split('\n');
    this.partial = parts.pop() ?? '';
    for (const line of parts) this.onLine(line);
  }

  private onLine(raw: string): void {
    const text = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    let line: WorkerLine;
    try {
      line = JSON.parse(text);
    } catch {
      this.stdoutText += text + '\n';
      return;
    }
    const index = this.lines.push(line) - 1;
    for (const waiter of this.waiters) {
      let matched: boolean;
      try {
        matched = waiter.pred(line, index);
      } catch (err) {
        this.waiters.delete(waiter);
        waiter.reject(err instanceof Error ? err : new Error(String(err)));
        continue;
      }
      if (matched) {
        this.waiters.delete(waiter);
        waiter.resolve(line);
      }
    }
  }

  private failure(why: string): Error {
    const stderr = this.stderrText.trim();
    return new Error(`${why}; worker ${this.file} (pid ${this.pid})\n--- worker stderr ---\n${stderr || '(empty)'}`);
  }
}

/** Forks `file` (.ts or .js) with the TypeScript require hook; stdin ignored, stdout/stderr piped, IPC on. */
export function startWorker(file: string, opts: WorkerOptions = {}): WorkerHandle {
  const child = fork(file, opts.args ?? [], {
    execArgv: ['-r', TS_REGISTER],
    env: { ...process.env, ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  return new WorkerProcess(file, child);
}
