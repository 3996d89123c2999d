/**
 * The testing entry point runs without Redis and without ioredis, and the main entry point does not
 * carry it: checked on the import graph (value imports; `import type` is erased) and at run time, in
 * a child process where ioredis cannot be resolved (test/harness/without-ioredis.js).
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';

const LIB = path.resolve(__dirname, '../../lib');

/**
 * Files reachable from `entry` through value imports (import … from, export … from), relative ones
 * only; with `lazy`, also through require() calls, which may run later or never.
 */
function runtimeGraph(entry: string, lazy: boolean): Set<string> {
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const source = fs.readFileSync(file, 'utf8');
    const specifiers = [
      ...[...source.matchAll(/^(?:import|export)\s+(?!type\s)(?:[^'";]*?\sfrom\s+)?'(\.[^']+)'/gm)].map((m) => m[1]),
      ...(lazy ? [...source.matchAll(/(?<![\w.])require\('(\.[^']+)'\)/g)].map((m) => m[1]) : []),
    ];
    for (const specifier of specifiers) {
      const base = path.resolve(path.dirname(file), specifier);
      const resolved = [`${base}.ts`, path.join(base, 'index.ts')].find((f) => fs.existsSync(f));
      if (!resolved) throw new Error(`${path.relative(LIB, file)}: cannot resolve '${specifier}'`);
      visit(resolved);
    }
  };
  visit(entry);
  return seen;
}

const relative = (files: Set<string>) => [...files].map((f) => path.relative(LIB, f));

describe('entry points', () => {
  const graphOf = (entry: string, lazy: boolean) => relative(runtimeGraph(path.join(LIB, entry), lazy));
  const inRedis = (files: string[]) => files.filter((f) => f.startsWith(`redis${path.sep}`));

  it('LockService loads lib/redis only through its lazy require of the Redis backend', () => {
    expect(inRedis(graphOf('lock.service.ts', true))).toContain(path.join('redis', 'redis-connection.ts'));
    expect(inRedis(graphOf('lock.service.ts', false))).toEqual([]);
  });

  it('the main entry point does not import lib/testing', () => {
    const graph = graphOf('index.ts', true);
    expect(graph.length).toBeGreaterThan(20);
    expect(graph.filter((f) => f.startsWith(`testing${path.sep}`))).toEqual([]);
  });

  it('the testing entry point imports nothing from lib/redis', () => {
    const graph = graphOf(path.join('testing', 'index.ts'), false);
    expect(graph).toContain(path.join('testing', 'memory-lock-store.ts'));
    expect(graph).toContain('lock.service.ts');
    expect(inRedis(graph)).toEqual([]);
    // The defer coordinator is shared; its BullMQ queue is only required lazily, by DistributedLockModule's default.
    expect(graph).toContain(path.join('testing', 'memory-defer-queue.ts'));
    expect(graph).not.toContain(path.join('defer', 'bullmq-defer-queue.ts'));
  });

  it('runs locks and deferred calls through the testing module in a process where ioredis and bullmq cannot be loaded; a Redis LockService fails there', async () => {
    const root = path.resolve(__dirname, '../..');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['-r', './test/harness/ts-register.js', '-r', './test/harness/without-ioredis.js', 'test/unit/fixtures/testing-entry-without-ioredis.ts'],
      { cwd: root, timeout: 60_000 },
    );
    const seen = JSON.parse(stdout.trim().split('\n').pop()!) as Record<string, unknown>;
    expect(seen.ioredisLoadable).toBe(false); // the fault is in place
    expect(seen.bullmqLoadable).toBe(false);
    expect(seen.busyError).toBe('LockBusyError');
    expect(seen.fencedRun).toBe(true);
    // onBusy 'defer' runs in process, without BullMQ.
    expect(seen.deferred).toBe('{"status":"deferred","jobId":"1","method":"Mailer.send","queue":"distributed-lock-deferred"}');
    expect(seen.deferredJobs).toEqual(['completed: sent 1']);
    // A LockService made without a backend loads the Redis one lazily, and so fails here.
    expect(seen.redisServiceError).toContain("Cannot find module 'ioredis'");
  });
});
