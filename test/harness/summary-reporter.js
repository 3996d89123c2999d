'use strict';
/**
 * Ends every run with one plain line, `jest: N passed, N failed, N skipped`, that CI systems (and
 * people skimming a log) can read without knowing jest's own summary format.
 *
 * Also bounds the time jest may take to exit after that line. Something a suite left behind (a
 * socket, a child process, a ref'd timer) keeps jest alive for ever, which `--detectOpenHandles`
 * reports but does not end: a CI job then hangs until its own time limit. The guard is an unref'd
 * timer, so a clean run exits as before and never waits for it; a run held open is ended after
 * EXIT_GRACE_MS, naming what held it, with a failing exit code (a leak breaks the suites' contract).
 */
const EXIT_GRACE_MS = 60_000;
/** How many of the slowest tests the summary names (where CI time goes; jest prints only per-suite times). */
const SLOWEST_SHOWN = 10;

/** The slowest tests of the run, one line each: `  12.3 s  file › name`. */
function slowestTests(results) {
  const tests = [];
  for (const suite of results.testResults) {
    const file = suite.testFilePath.replace(/^.*\/test\//, 'test/');
    for (const test of suite.testResults) if (test.duration != null) tests.push({ ms: test.duration, name: `${file} › ${test.title}` });
  }
  tests.sort((a, b) => b.ms - a.ms);
  return tests.slice(0, SLOWEST_SHOWN).map((t) => `  ${(t.ms / 1000).toFixed(1).padStart(5)} s  ${t.name.slice(0, 160)}`);
}

class SummaryReporter {
  onRunComplete(_contexts, results) {
    const slowest = slowestTests(results);
    if (slowest.length > 1) process.stdout.write(`\nslowest tests:\n${slowest.join('\n')}\n`);
    const skipped = results.numPendingTests + results.numTodoTests;
    process.stdout.write(`\njest: ${results.numPassedTests} passed, ${results.numFailedTests} failed, ${skipped} skipped\n`);
    setTimeout(() => {
      // Node 17+: the kinds of what keeps the event loop alive (Timeout, TCPWRAP, ProcessWrap, ...).
      const held = process.getActiveResourcesInfo().join(', ');
      process.stderr.write(
        `\njest had not exited ${EXIT_GRACE_MS / 1000} s after the run: something a suite left behind holds the process open ` +
          `(${held}; --detectOpenHandles above names where it was made). Exiting with code 1.\n`,
      );
      process.exit(1);
    }, EXIT_GRACE_MS).unref();
  }
}
module.exports = SummaryReporter;
