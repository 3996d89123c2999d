'use strict';
/**
 * Jest transform for the ESM-only packages the tests load (`@nestjs/terminus` 12): jest's CommonJS
 * runtime cannot require ESM on this Node (it can natively from Node 24.9), while plain Node, which
 * users run, can. Transpiles the package's ES modules to CommonJS (TypeScript, transpile only) and
 * rewrites the few `import.meta` uses CommonJS has an equivalent for.
 */
const ts = require('typescript');

module.exports = {
  process(source, filename) {
    const rewritten = source
      // health-check.decorator.js makes its own `require`; CommonJS already has one.
      .replace(/^const require = createRequire\(import\.meta\.url\);$/m, '')
      .replace(/import\.meta\.resolve\(/g, 'require.resolve(')
      .replace(/import\.meta\.dirname/g, '__dirname')
      .replace(/import\.meta\.url/g, "require('url').pathToFileURL(__filename).href");
    const { outputText } = ts.transpileModule(rewritten, {
      compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
      fileName: filename,
    });
    return { code: outputText };
  },
};
