/**
 * `deferredJobsSettled()` awaited in a plain Node script (a seed or smoke script, not jest): the testing
 * module's backoff timers do not keep the process alive, so Node exited while a failed job waited out its
 * backoff, the await never answered and the script printed nothing, with exit code 0. While a wait is
 * pending, the backoff now keeps the process alive; without one, it still does not.
 */
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';

describe('deferredJobsSettled() in a plain Node script', () => {
  it('answers after a retry backoff instead of letting the process exit with the await unanswered', async () => {
    const root = path.resolve(__dirname, '../..');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['-r', './test/harness/ts-register.js', 'test/unit/fixtures/deferred-settled-in-script.ts'],
      { cwd: root, timeout: 60_000 },
    );
    // The first run failed and the job waited out its 300 ms backoff (the fault), then ran again.
    expect(JSON.parse(stdout.trim() || 'null')).toEqual({ runs: 2, jobs: ['completed: sent 1'] });
  });
});
