import { DeferArgumentError } from '../errors/defer-argument.error';

/** Arguments as stored in a job: JSON-safe values, and which top-level arguments were `undefined` (JSON would make them null). */
export interface EncodedArguments {
  readonly args: unknown[];
  readonly undefinedArgs: number[];
}

/**
 * Checks that every argument survives JSON unchanged and encodes them; throws DeferArgumentError naming the
 * first that does not. Accepted: null, booleans, strings, finite numbers, arrays, plain objects (prototype
 * Object.prototype or null). An `undefined` property of an object is dropped (as JSON does); an `undefined`
 * top-level argument is restored; `undefined` inside an array is refused (it would arrive as null).
 */
export function encodeDeferredArguments(args: readonly unknown[], where: string): EncodedArguments {
  const undefinedArgs: number[] = [];
  args.forEach((arg, i) => {
    if (arg === undefined) undefinedArgs.push(i);
    else assertJsonSafe(arg, `args[${i}]`, new Set(), where);
  });
  return { args: args.map((a) => (a === undefined ? null : a)), undefinedArgs };
}

/** The method's arguments back from a job. */
export function decodeDeferredArguments(encoded: EncodedArguments): unknown[] {
  const args = [...encoded.args];
  for (const i of encoded.undefinedArgs) args[i] = undefined;
  return args;
}

function assertJsonSafe(value: unknown, path: string, ancestors: Set<object>, where: string): void {
  const fail = (problem: string): never => {
    throw new DeferArgumentError(where, path, problem);
  };
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) fail(`${value} (JSON has no NaN or Infinity)`);
      return;
    case 'undefined':
      fail('undefined inside an array (it would arrive as null)');
      return;
    case 'bigint':
      fail('a BigInt (JSON cannot hold it; pass it as a string)');
      return;
    case 'symbol':
      fail('a symbol');
      return;
    case 'function':
      fail('a function');
      return;
  }
  if (value === null) return;
  const object = value as object;
  if (ancestors.has(object)) fail('a circular reference');
  const prototype: unknown = Object.getPrototypeOf(object);
  if (Array.isArray(object)) {
    if (prototype !== Array.prototype) fail('an array subclass');
  } else if (prototype !== Object.prototype && prototype !== null) {
    const name = (prototype as { constructor?: { name?: string } }).constructor?.name ?? 'an unknown class';
    fail(`an instance of ${name} (its prototype would be lost: it would arrive as a plain object, or as a string for a Date)`);
  }
  if (Object.getOwnPropertySymbols(object).length > 0) fail('an object with symbol keys (they would be lost)');
  ancestors.add(object);
  if (Array.isArray(object)) object.forEach((item, i) => assertJsonSafe(item, `${path}[${i}]`, ancestors, where));
  else {
    for (const [key, item] of Object.entries(object)) {
      if (item !== undefined) assertJsonSafe(item, `${path}.${key}`, ancestors, where);
    }
  }
  ancestors.delete(object);
}
