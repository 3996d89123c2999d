import 'reflect-metadata';
import * as ts from 'typescript';
import { LOCKED_METADATA, Locked, LockKeyError, LockOptionsError } from '../../lib';

/**
 * `@Locked` under standard (TC39) decorators, i.e. TypeScript with `experimentalDecorators: false`. The class
 * below is compiled by the TypeScript compiler itself and run, so the call shape is the one TS really emits
 * (`__esDecorate`, `(method, context)`), not a hand-made imitation.
 */
const SOURCE = `
  export class Payments {
    @Locked('pay:<0>')
    async pay(id: string) {
      return id;
    }
  }
`;

function defineWith(experimentalDecorators: boolean, source = SOURCE): { Payments: new () => { pay(id: string): Promise<string> } } {
  const { outputText } = ts.transpileModule(`declare const Locked: any;\n${source}`, {
    compilerOptions: {
      experimentalDecorators,
      emitDecoratorMetadata: experimentalDecorators,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.CommonJS,
      useDefineForClassFields: true,
    },
  });
  const exports: Record<string, unknown> = {};
  // eslint-disable-next-line @typescript-eslint/no-implied-eval -- running what the compiler emitted is the point
  new Function('exports', 'Locked', outputText)(exports, Locked);
  return exports as ReturnType<typeof defineWith>;
}

describe('@Locked and standard (TC39) decorators', () => {
  it('the compiled code really uses the standard call shape (guards the test itself)', () => {
    const { outputText } = ts.transpileModule(SOURCE, {
      compilerOptions: { experimentalDecorators: false, target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.CommonJS },
    });
    expect(outputText).toContain('__esDecorate');
  });

  it('with experimentalDecorators off, defining the class fails with a LockOptionsError that names the setting', () => {
    expect(() => defineWith(false)).toThrow(LockOptionsError);
    expect(() => defineWith(false)).toThrow(
      /Invalid option "experimentalDecorators": @Locked on method pay was applied as a standard \(TC39\) decorator\. Set "experimentalDecorators": true and "emitDecoratorMetadata": true/,
    );
  });

  // `@Locked` without arguments is called as the decorator itself. With legacy decorators the method stayed as it
  // was and ran unlocked; with standard ones it was replaced by the decorator, failing only when called.
  it('@Locked without arguments fails when the class is defined, under either kind of decorator', () => {
    const bare = SOURCE.replace("@Locked('pay:<0>')", '@Locked');
    expect(bare).not.toBe(SOURCE);
    expect(() => defineWith(true, bare)).toThrow(LockKeyError);
    expect(() => defineWith(true, bare)).toThrow(
      "@Locked on Payments.pay: @Locked was applied without arguments, which would leave the method unlocked. Give it the key, e.g. @Locked('order:<0>')",
    );
    expect(() => defineWith(false, bare)).toThrow(
      /Invalid option "experimentalDecorators": @Locked on method pay was applied as a standard \(TC39\) decorator/,
    );
  });

  it('control: the same source with experimentalDecorators on defines a locked method', () => {
    const { Payments } = defineWith(true);
    expect(Reflect.getMetadata(LOCKED_METADATA, Payments.prototype.pay)).toEqual({ keys: 'pay:<0>', options: {} });
  });
});
