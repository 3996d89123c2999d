'use strict';
/**
 * `node -r ./ts-register.js worker.ts`: lets forked worker processes run TypeScript without
 * ts-node. Transpile only (no type check: `npm run typecheck` does that once for the whole repo),
 * which keeps a worker's start-up in the tens of milliseconds.
 */
const fs = require('fs');
const ts = require('typescript');

const compilerOptions = {
  module: ts.ModuleKind.CommonJS,
  target: ts.ScriptTarget.ES2022,
  // The library's decorators (@Locked, Nest's DI) need the legacy decorator emit and its metadata.
  experimentalDecorators: true,
  emitDecoratorMetadata: true,
  esModuleInterop: true,
  // Same class-field semantics as tsconfig.json, so workers behave like the tests that import the code.
  useDefineForClassFields: false,
};

require.extensions['.ts'] = function compileTs(module, filename) {
  const source = fs.readFileSync(filename, 'utf8');
  const { outputText } = ts.transpileModule(source, { compilerOptions, fileName: filename });
  module._compile(outputText, filename);
};
