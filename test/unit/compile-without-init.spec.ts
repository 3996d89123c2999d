/**
 * A module compiled and never initialised (Nest's generated spec: `compile()`, no `init()`, no `close()`)
 * opens no Redis connection: before, the LockService connected when it was built, kept reconnecting to an
 * unreachable server (or held its connection to a reachable one), and the test process never exited.
 */
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { RedisProcess, type SharedRedis } from '../harness/redis-process';

const root = path.resolve(__dirname, '../..');

/** Runs the fixture against `url`; resolves how it ended (it is killed after `ms`). */
async function compileOnly(url: string, ms: number): Promise<{ stdout: string; killed: boolean }> {
  try {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['-r', './test/harness/ts-register.js', 'test/unit/fixtures/compile-without-init.ts', url],
      { cwd: root, timeout: ms },
    );
    return { stdout, killed: false };
  } catch (error) {
    const e = error as { killed?: boolean; stdout?: string };
    return { stdout: e.stdout ?? '', killed: e.killed === true };
  }
}

describe('a lock module compiled but never initialised', () => {
  let redis: SharedRedis;
  beforeAll(async () => (redis = await RedisProcess.shared()));
  afterAll(() => redis.stop());

  it.each([
    ['an unreachable Redis', () => 'redis://127.0.0.1:1'],
    ['a running Redis', () => redis.url],
  ])('with %s: the process ends on its own (no connection was opened)', async (_what, url) => {
    const ended = await compileOnly(url(), 20_000);
    expect(ended.stdout).toContain('compiled');
    expect(ended.killed).toBe(false);
  });
});
