/**
 * A wall clock the test moves while a worker runs: the worker is started under libfaketime
 * (LD_PRELOAD) reading its offset from a file this helper rewrites. Only the wall clock is faked
 * (Date.now, new Date): the monotonic clocks stay real, because that is the fault we model (NTP
 * step, an operator fixing the date) and because Node itself aborts when CLOCK_MONOTONIC goes
 * backwards (libuv asserts `now >= timer_base`).
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

// Plain CommonJS shared with jest's globalSetup, so the lookup rules live in one place.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { findLibfaketime, NOT_INSTALLED } = require('../../scripts/ensure-faketime.js') as {
  findLibfaketime: () => string | null;
  NOT_INSTALLED: string;
};

export class FakeWallClock {
  private readonly dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ndl-faketime-'));
  private readonly file = path.join(this.dir, 'offset');
  private readonly lib: string;

  /** Throws the install command when libfaketime is missing (globalSetup installs it when root). */
  constructor(initialOffset = '+0') {
    const lib = findLibfaketime();
    if (!lib) {
      fs.rmSync(this.dir, { recursive: true, force: true });
      throw new Error(NOT_INSTALLED);
    }
    this.lib = lib;
    this.set(initialOffset);
  }

  /** Environment for startWorker(): the worker's wall clock follows set() from its next read on. */
  env(): Record<string, string> {
    return {
      LD_PRELOAD: [this.lib, process.env.LD_PRELOAD].filter(Boolean).join(':'),
      FAKETIME_TIMESTAMP_FILE: this.file,
      // Re-read the file on every clock call (the default caches it for 10 s).
      FAKETIME_NO_CACHE: '1',
      // The documented name, and the older spelling libfaketime still accepts.
      FAKETIME_DONT_FAKE_MONOTONIC: '1',
      DONT_FAKE_MONOTONIC: '1',
    };
  }

  /**
   * Offset from the real time in libfaketime's syntax ('+0', '+1h', '-1h'). Written to a temporary
   * file and renamed over the old one, so the worker never reads a half-written (empty) file.
   */
  set(offset: string): void {
    const tmp = `${this.file}.tmp`;
    fs.writeFileSync(tmp, `${offset}\n`);
    fs.renameSync(tmp, this.file);
  }

  dispose(): void {
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
