#!/usr/bin/env node
'use strict';
/**
 * `npm test`: every suite, as two jest processes side by side, each in band.
 *
 * `--detectOpenHandles` keeps jest in band, so one process runs the suites one after another. They run as two
 * lanes side by side instead; each suite starts its own redis-server processes on free ports, so the lanes share
 * nothing but the machine:
 * - the fault suites (test/e2e core-, history-, redlock-, sentinel-, ...: processes killed, paused, partitioned,
 *   with timing bounds on what the library does meanwhile). They stay in one lane: split over two, they ran in
 *   490 s, but CPU starvation failed timing-bound fault tests on a loaded machine;
 * - the unit suites (test/unit, about 0.7 of one core) and the integration suites that drive the Nest layer
 *   (test/e2e locked-, terminus-, sample-: @Locked, defer, health, the demo), whose bounds carry 0.5–2 s of margin.
 *   With the unit suites alone, this lane ended after 209 s of a 722 s fault lane (a clean-clone run of
 *   2026-12-04); the integration suites took about 155 s of that fault lane.
 * The second lane's output is printed once both lanes are done, so the two are never interleaved.
 *
 * With arguments (`npm test -- test/e2e/core-watchdog.spec.ts`, `-t name`, ...), or with
 * TEST_LANES=1, it is one plain `jest --runInBand --detectOpenHandles` with those arguments.
 */
const { spawn } = require('node:child_process');

const JEST = require.resolve('jest/bin/jest');
const BASE_ARGS = ['--runInBand', '--detectOpenHandles'];
/** The second lane's suites (a path regex): test/unit, and the integration suites of the Nest layer. */
const SECOND_LANE = '/test/unit/|/test/e2e/(locked|terminus|sample)-';

const LANES = [
  { name: 'fault suites (test/e2e but locked-, terminus-, sample-)', args: ['--testPathIgnorePatterns', SECOND_LANE], live: true },
  { name: 'unit and integration suites (test/unit; test/e2e locked-, terminus-, sample-)', args: [SECOND_LANE], live: false },
];

/** The `jest: N passed, N failed, N skipped` line of test/harness/summary-reporter.js. */
const SUMMARY = /^jest: (\d+) passed, (\d+) failed, (\d+) skipped$/m;

const children = new Set();
/** Set by SIGINT or SIGTERM: an interrupted run fails, whatever exit code its jest processes chose. */
let interrupted = false;

/**
 * One jest process. A live lane's output goes straight through (its stdout also kept, for the summary
 * line); the other's is kept whole and printed later.
 */
function runJest(args, live) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [JEST, ...BASE_ARGS, ...args], { stdio: ['ignore', 'pipe', live ? 'inherit' : 'pipe'] });
    children.add(child);
    const chunks = [];
    child.stdout.on('data', (chunk) => {
      if (live) process.stdout.write(chunk);
      chunks.push(chunk);
    });
    child.stderr?.on('data', (chunk) => chunks.push(chunk));
    child.on('close', (code, signal) => {
      children.delete(child);
      resolve({ code: code ?? 1, signal, output: Buffer.concat(chunks).toString() });
    });
  });
}

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    interrupted = true;
    for (const child of children) child.kill(signal);
  });
}

async function main() {
  const extra = process.argv.slice(2);
  if (extra.length > 0 || process.env.TEST_LANES === '1') {
    const { code } = await runJest(extra, true);
    process.exit(interrupted ? 1 : code);
  }
  const startedAt = Date.now();
  const results = await Promise.all(LANES.map((lane) => runJest(lane.args, lane.live)));
  const totals = { passed: 0, failed: 0, skipped: 0 };
  const lines = [];
  results.forEach((result, i) => {
    const lane = LANES[i];
    if (!lane.live) process.stdout.write(`\n===== ${lane.name}: its jest output =====\n${result.output}\n`);
    const summary = SUMMARY.exec(result.output);
    if (summary) {
      totals.passed += Number(summary[1]);
      totals.failed += Number(summary[2]);
      totals.skipped += Number(summary[3]);
    }
    const ended = result.signal ? `killed by ${result.signal}` : `exit code ${result.code}`;
    lines.push(`  ${lane.name}: ${ended}`);
  });
  const failedLanes = results.filter((r) => r.code !== 0).length;
  process.stdout.write(`\n===== two lanes, ${Math.round((Date.now() - startedAt) / 1000)} s =====\n${lines.join('\n')}\n`);
  process.stdout.write(`jest (both lanes): ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped\n`);
  process.exit(failedLanes > 0 || interrupted ? 1 : 0);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
