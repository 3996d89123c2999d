import { join } from 'path';
import * as ts from 'typescript';

const root = join(__dirname, '..', '..');

/**
 * What the compiler reports for one file (and what it imports) under the repository's tsconfig.json, one
 * "file:line: message" per diagnostic: none when it type-checks. Lets `npm test` run a type test of test/types too,
 * not only `npm run typecheck`.
 */
export function typeCheckDiagnostics(file: string): string[] {
  const { config } = ts.readConfigFile(join(root, 'tsconfig.json'), (path) => ts.sys.readFile(path)) as { config: unknown };
  const { options } = ts.parseJsonConfigFileContent(config, ts.sys, root);
  const program = ts.createProgram([file], { ...options, noEmit: true });
  return ts
    .getPreEmitDiagnostics(program)
    .map(
      (d) =>
        `${d.file ? `${d.file.fileName}:${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}: ` : ''}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`,
    );
}
