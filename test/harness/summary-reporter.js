'use strict';
/**
 * Ends every run with one plain line, `jest: N passed, N failed, N skipped`, that CI systems (and
 * people skimming a log) can read without knowing jest's own summary format.
 */
class SummaryReporter {
  onRunComplete(_contexts, results) {
    const skipped = results.numPendingTests + results.numTodoTests;
    process.stdout.write(`\njest: ${results.numPassedTests} passed, ${results.numFailedTests} failed, ${skipped} skipped\n`);
  }
}
module.exports = SummaryReporter;
