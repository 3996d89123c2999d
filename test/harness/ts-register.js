'use strict';
/**
 * `node -r ./ts-register.js worker.ts`: lets forked worker processes run TypeScript without
 * ts-node. Transpile only (no type check: `npm run typecheck` does that once for the whole repo).
 *
 * Transpiled files are cached on disk, keyed by source, file name, options and TypeScript version:
 * loading the `typescript` module alone costs a process about 3 s of CPU (measured with a CPU profile
 * of a history worker: 2.5 s in typescript.js plus 0.9 s compiling it), which a suite forking dozens
 * of workers on a 2-core machine pays again and again. With a warm cache a worker never loads it.
 */
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');

const compilerOptions = {
  // Numeric values of ts.ModuleKind.CommonJS and ts.ScriptTarget.ES2022 (stable parts of the API),
  // so the options are known without loading TypeScript.
  module: 1,
  target: 9,
  // The library's decorators (@Locked, Nest's DI) need the legacy decorator emit and its metadata.
  experimentalDecorators: true,
  emitDecoratorMetadata: true,
  esModuleInterop: true,
  // Same class-field semantics as tsconfig.json, so workers behave like the tests that import the code.
  useDefineForClassFields: false,
};

const CACHE_DIR = path.join(os.tmpdir(), 'ndl-ts-register-cache');
const TS_VERSION = require(require.resolve('typescript/package.json')).version;
let ts;

function transpile(source, filename) {
  const key = crypto
    .createHash('sha256')
    .update(`${TS_VERSION}\0${JSON.stringify(compilerOptions)}\0${filename}\0${source}`)
    .digest('hex');
  const cached = path.join(CACHE_DIR, `${key}.js`);
  try {
    return fs.readFileSync(cached, 'utf8');
  } catch {
    // Not cached yet.
  }
  ts ??= require('typescript');
  const { outputText } = ts.transpileModule(source, { compilerOptions, fileName: filename });
  try {
    fs.mkdirSync(CACHE_DIR, { recursive: true });
    // Write then rename: workers starting together never read a half-written file.
    const tmp = `${cached}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, outputText);
    fs.renameSync(tmp, cached);
  } catch {
    // A read-only tmp dir only costs speed.
  }
  return outputText;
}

require.extensions['.ts'] = function compileTs(module, filename) {
  module._compile(transpile(fs.readFileSync(filename, 'utf8'), filename), filename);
};
