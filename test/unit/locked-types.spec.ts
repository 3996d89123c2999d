import { readFileSync } from 'fs';
import { join } from 'path';
import { typeCheckDiagnostics } from '../harness/type-check';

/**
 * Runs the type test test/types/locked-types.check.ts under `npm test` too (not only `npm run typecheck`): the
 * compiler must report nothing for it, and an `@ts-expect-error` that finds no error is itself a diagnostic
 * (TS2578), so every refusal the file lists is proven.
 */
const checkFile = join(__dirname, '..', 'types', 'locked-types.check.ts');

describe('@Locked type test', () => {
  it('type-checks with every @ts-expect-error needed', () => {
    expect(typeCheckDiagnostics(checkFile)).toEqual([]);
    expect(readFileSync(checkFile, 'utf8').match(/@ts-expect-error/g)?.length).toBeGreaterThanOrEqual(13);
  }, 120_000);
});
