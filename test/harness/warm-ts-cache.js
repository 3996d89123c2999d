'use strict';
/**
 * `node warm-ts-cache.js`: fills ts-register's on-disk cache with every TypeScript file a forked
 * worker can load (lib/, test/harness/, test/e2e/ except specs), once, before any suite runs (jest
 * globalSetup). The cache is keyed by each file's absolute path, so a fresh clone (as CI runs) starts
 * cold: the first workers each loaded the `typescript` module (about 3 s of CPU) at the same time, and
 * three of them starting together on a loaded 2-core machine missed a suite's 10 s "ready" bound.
 */
const fs = require('fs');
const path = require('path');
require('./ts-register');

const root = path.resolve(__dirname, '..', '..');
const compileTs = require.extensions['.ts'];
/** A module whose code is not run: compileTs transpiles (and caches) the file, then hands the result here. */
const notRun = { _compile() {} };

function* tsFiles(dir) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* tsFiles(file);
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts') && !entry.name.endsWith('.d.ts')) yield file;
  }
}

let files = 0;
for (const dir of ['lib', path.join('test', 'harness'), path.join('test', 'e2e')]) {
  const abs = path.join(root, dir);
  if (!fs.existsSync(abs)) continue;
  // The path a worker's require() resolves (symlinks followed), which is the cache key.
  for (const file of tsFiles(fs.realpathSync(abs))) {
    compileTs(notRun, file);
    files++;
  }
}
process.stdout.write(`ts-register cache warm: ${files} files\n`);
