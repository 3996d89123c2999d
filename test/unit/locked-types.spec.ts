import { readFileSync } from 'fs';
import { join } from 'path';
import * as ts from 'typescript';

/**
 * Runs the type test test/types/locked-types.check.ts under `npm test` too (not only `npm run typecheck`): the
 * compiler must report nothing for it, and an `@ts-expect-error` that finds no error is itself a diagnostic
 * (TS2578), so every refusal the file lists is proven.
 */
const root = join(__dirname, '..', '..');
const checkFile = join(root, 'test', 'types', 'locked-types.check.ts');

describe('@Locked type test', () => {
  it('type-checks with every @ts-expect-error needed', () => {
    const configPath = join(root, 'tsconfig.json');
    const { config } = ts.readConfigFile(configPath, (path) => ts.sys.readFile(path)) as { config: unknown };
    const { options } = ts.parseJsonConfigFileContent(config, ts.sys, root);
    const program = ts.createProgram([checkFile], { ...options, noEmit: true });
    const messages = ts
      .getPreEmitDiagnostics(program)
      .map(
        (d) =>
          `${d.file ? `${d.file.fileName}:${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}: ` : ''}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`,
      );
    expect(messages).toEqual([]);
    expect(readFileSync(checkFile, 'utf8').match(/@ts-expect-error/g)?.length).toBeGreaterThanOrEqual(13);
  }, 120_000);
});
