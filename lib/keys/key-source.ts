import { describeThrown, isHttpException } from '../errors/thrown-value';
import { LockKeyError } from '../errors/lock-key.error';
import { describeValue } from '../errors/describe-value';
import { KeyTemplate, parseKeyTemplate } from './key-template';
import { resolveKeyTemplate } from './resolve-key-template';
import { asKeyList } from './normalize-keys';
import { assertKeyText } from './key-text';
import { assertKeyCount } from './key-count';

/** What `@Locked` accepts as its first argument. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a key function's parameters are the method's, typed by the user: unknown[] would refuse them
export type LockKeySpec = string | readonly string[] | ((...args: any[]) => string | readonly string[]);

/** @internal A key spec compiled at decoration time; `resolve` runs once per call, before any Redis command. */
export interface CompiledKeySource {
  /** What the keys are called where resolved keys must not be shown: the template(s), or `Class.method` for a key function. */
  readonly name: string;
  /** Keys of one call (one for a single template). `self` is the method's `this`, given to key functions. */
  resolve(self: unknown, args: readonly unknown[]): string[];
}

/**
 * @internal Compiles a key spec for a method declaring `declaredArgs` parameters. Templates are parsed now, and
 * a placeholder naming an argument the method does not declare fails now (at class definition,
 * i.e. before the application starts), naming `where` (class and method) and the template.
 */
export function compileKeySource(spec: LockKeySpec, declaredArgs: number, where: string): CompiledKeySource {
  if (typeof spec === 'function') return functionSource(spec, where);
  const list = typeof spec === 'string' ? [spec] : spec;
  if (!Array.isArray(list)) {
    throw new LockKeyError(`${where}: expected a key template, an array of templates or a function, got ${describeValue(spec)}.`);
  }
  if (list.length === 0) throw new LockKeyError(`${where}: the array of key templates is empty.`);
  // Each template makes one key: an array over the limit would fail every call, so it fails when the class is defined.
  assertKeyCount(list.length, `${where}: the array of key templates`);
  const templates = list.map((t) => parseKeyTemplate(t, where));
  for (const template of templates) assertDeclared(template, declaredArgs, where);
  return { name: list.join(', '), resolve: (_self, args) => templates.map((t) => resolveKeyTemplate(t, args, where)) };
}

function assertDeclared(template: KeyTemplate, declaredArgs: number, where: string): void {
  for (const placeholder of template.placeholders) {
    if (placeholder.arg >= declaredArgs) {
      throw new LockKeyError(
        `${where}: key template "${template.source}" uses ${placeholder.source}, but the method declares ` +
          `${declaredArgs} parameter(s) (indexes start at 0; a rest parameter counts as one: lock with a key function, (...args) => key, instead).`,
      );
    }
  }
}

/** A key function is called with the method's `this` and arguments; its result is checked like a template's. */
function functionSource(fn: (...args: never[]) => unknown, where: string): CompiledKeySource {
  return {
    name: where.replace(/^@Locked on /, ''),
    resolve(self, args) {
      let result: unknown;
      try {
        result = Reflect.apply(fn, self, args);
      } catch (error) {
        // As for a template's getter that throws (resolve-key-template.ts): a key function reading dto.order.id of a dto
        // without an order is a key that cannot be built, a LockKeyError (400 over HTTP), not a TypeError escaping as a 500.
        // Its own LockKeyError (lockKey() inside) and an HTTP exception (its own answer, e.g. 403) pass as they are.
        if (error instanceof LockKeyError || isHttpException(error)) throw error;
        throw new LockKeyError(
          `${where}: the key function threw ${describeThrown(error)}; ` +
            `it must return the key for every call it is given, or throw an HTTP exception (e.g. BadRequestException) saying what is missing. ` +
            `The method was not run.`,
          { cause: error },
        );
      }
      const list = asKeyList(result, `${where}: the key function's result`, ' The method was not run.');
      if (list.length === 0) throw new LockKeyError(`${where}: the key function returned an empty array. The method was not run.`);
      for (const key of list) {
        if (typeof key !== 'string' || key.length === 0) {
          throw new LockKeyError(
            `${where}: the key function returned ${describeValue(key)}; expected a non-empty string (or an array of them). The method was not run.`,
          );
        }
        // Checked here, not only by the engine's normalizeKeys: a refusal while the call's keys are resolved is
        // the call's own key error (a route handler's: the request's input, a 400), as a template's is.
        assertKeyText(key, `${where}: the key function returned the key`, ' The method was not run.');
      }
      return list as string[];
    },
  };
}
