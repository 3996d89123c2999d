/**
 * The sample's instances open one SQLite file at once: switching it to WAL needs an exclusive lock,
 * and SQLite answers SQLITE_BUSY at once, without its busy timeout, when another process does the
 * same at that moment (an instance of the coupon e2e test once exited with "database is locked").
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { whileBusy } from '../../sample/src/database/sqlite-database';

const busy = (): Error => Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });

describe('sample database: opening one file from several processes', () => {
  it('whileBusy runs the step again on SQLITE_BUSY only, within its bound', () => {
    let calls = 0;
    expect(
      whileBusy(() => {
        if (++calls < 3) throw busy();
        return 'done';
      }),
    ).toBe('done');
    expect(calls).toBe(3);

    calls = 0;
    const other = new Error('no such table');
    expect(() =>
      whileBusy(() => {
        calls++;
        throw other;
      }),
    ).toThrow(other);
    expect(calls).toBe(1);

    const started = Date.now();
    expect(() =>
      whileBusy(() => {
        throw busy();
      }, 50),
    ).toThrow('database is locked');
    expect(Date.now() - started).toBeGreaterThanOrEqual(50);
  });

  it('6 processes opening a fresh file at the same moment, 8 times: every one opens it (before whileBusy, about 2 in 90 failed)', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sample-db-'));
    const fixture = path.join(__dirname, 'fixtures', 'open-sample-database.ts');
    const register = path.join(__dirname, '..', 'harness', 'ts-register.js');
    const results: string[] = [];
    try {
      for (let trial = 0; trial < 8; trial++) {
        const file = path.join(dir, `coupons-${trial}.sqlite`);
        const start = Date.now() + 1_500;
        const outputs = await Promise.all(
          Array.from(
            { length: 6 },
            () =>
              new Promise<string>((resolve, reject) => {
                const child = spawn(process.execPath, ['-r', register, fixture, file, String(start)], { stdio: ['ignore', 'pipe', 'pipe'] });
                let out = '';
                let err = '';
                child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
                child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
                child.on('error', reject);
                // 'close', not 'exit': 'exit' can come before the last of stdout is read (a CI run
                // once got '' from a child here), and 'close' also says how the process ended.
                child.on('close', (code, signal) =>
                  resolve(out.trim() === 'ok' && code === 0 ? 'ok' : `${out.trim() || 'no output'} (${signal ?? `exit code ${code}`}) ${err.trim()}`),
                );
              }),
          ),
        );
        results.push(...outputs);
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    expect(results.filter((r) => r !== 'ok')).toEqual([]);
    expect(results).toHaveLength(48);
  }, 60_000);
});
