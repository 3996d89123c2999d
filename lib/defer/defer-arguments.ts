import { describeThrown } from '../errors/thrown-value';
import { DeferArgumentError } from '../errors/defer-argument.error';
import { assertStorableSize, MAX_DEFERRED_ARGUMENT_DEPTH } from './defer-argument-limits';

/** Arguments as stored in a job: JSON-safe values, and which top-level arguments were `undefined` (JSON would make them null). */
export interface EncodedArguments {
  readonly args: unknown[];
  readonly undefinedArgs: number[];
}

/** Encoded arguments, and the size of their JSON in bytes (what the enqueue writes). */
export interface DeferredArgumentsEncoding {
  readonly data: EncodedArguments;
  readonly jsonBytes: number;
}

/**
 * Checks that every argument survives JSON unchanged and fits in a job, and encodes them; throws
 * DeferArgumentError naming the first that does not. Accepted: null, booleans, strings, finite numbers,
 * arrays without holes or extra properties, plain objects (prototype Object.prototype or null) without
 * non-enumerable properties, nested at most MAX_DEFERRED_ARGUMENT_DEPTH levels, MAX_DEFERRED_ARGUMENTS_BYTES
 * of JSON in all. An `undefined` property of an object is dropped (as JSON does); an `undefined` top-level
 * argument is restored; `undefined` inside an array is refused (it would arrive as null).
 */
export function encodeDeferredArguments(args: readonly unknown[], where: string): DeferredArgumentsEncoding {
  const undefinedArgs: number[] = [];
  args.forEach((arg, i) => {
    const root = `args[${i}]`;
    if (arg === undefined) undefinedArgs.push(i);
    else assertReadable(() => assertJsonSafe(arg, root, 1, { where, root, ancestors: new Set() }), root, where);
  });
  const encoded = args.map((a) => (a === undefined ? null : a));
  let jsonBytes = 0;
  assertReadable(() => (jsonBytes = assertStorableSize(encoded, where)), 'args', where);
  return { data: { args: encoded, undefinedArgs }, jsonBytes };
}

/**
 * A getter, or a Proxy trap, that throws while the argument is read: a DeferArgumentError (nothing enqueued, the
 * method not run) rather than that error escaping as if the method had thrown it.
 */
function assertReadable(check: () => void, path: string, where: string): void {
  try {
    check();
  } catch (error) {
    if (error instanceof DeferArgumentError) throw error;
    throw new DeferArgumentError(where, path, `a value that threw when read (${describeThrown(error)}), so it cannot be written as JSON`);
  }
}

/** The method's arguments back from a job. */
export function decodeDeferredArguments(encoded: EncodedArguments): unknown[] {
  const args = [...encoded.args];
  for (const i of encoded.undefinedArgs) args[i] = undefined;
  return args;
}

/** One argument's walk: the call, the argument's own path (`args[1]`), the objects above the current value. */
interface ArgumentWalk {
  readonly where: string;
  readonly root: string;
  readonly ancestors: Set<object>;
}

/** `depth`: how many objects and arrays hold `value`, itself included if it is one (a top-level object is 1). */
function assertJsonSafe(value: unknown, path: string, depth: number, walk: ArgumentWalk): void {
  const { where, ancestors } = walk;
  const failAt = (at: string, problem: string): never => {
    throw new DeferArgumentError(where, at, problem);
  };
  const fail = (problem: string): never => failAt(path, problem);
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) fail(`${value} (JSON has no NaN or Infinity)`);
      // -0 is accepted and arrives as 0: JSON writes it so. Only Object.is tells them apart, and a request body
      // carries it (JSON.parse('-0') is -0): refused, a client's `"amount": -0` made the call fail.
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
  // Before going deeper: a value nested deeper than a job can be written and read back is refused by its
  // argument (the path down to it would be as long as the nesting), and this walk's recursion stays bounded.
  if (depth > MAX_DEFERRED_ARGUMENT_DEPTH) {
    throw new DeferArgumentError(
      where,
      walk.root,
      `nested more than ${MAX_DEFERRED_ARGUMENT_DEPTH} levels deep (objects and arrays inside one another), deeper than a job can hold`,
      'depth',
    );
  }
  const prototype: unknown = Object.getPrototypeOf(object);
  if (Array.isArray(object)) {
    if (prototype !== Array.prototype) fail('an array subclass');
  } else if (prototype !== Object.prototype && prototype !== null) {
    const name = (prototype as { constructor?: { name?: string } }).constructor?.name ?? 'an unknown class';
    fail(`an instance of ${name} (its prototype would be lost: it would arrive as a plain object, or as a string for a Date)`);
  }
  if (Object.getOwnPropertySymbols(object).length > 0) fail('an object with symbol keys (they would be lost)');
  assertNothingDropped(object, path, failAt);
  ancestors.add(object);
  if (Array.isArray(object)) {
    // A for loop, not forEach: forEach skips holes.
    for (let i = 0; i < object.length; i++) assertJsonSafe(object[i], `${path}[${i}]`, depth + 1, walk);
  } else {
    for (const [key, item] of Object.entries(object)) {
      if (item !== undefined) assertJsonSafe(item, `${path}.${key}`, depth + 1, walk);
    }
  }
  ancestors.delete(object);
}

/**
 * Own properties JSON would drop or apply: holes of a sparse array (they arrive as null), non-index
 * properties of an array (only the elements travel), and non-enumerable properties (dropped; a
 * non-enumerable `toJSON` would even replace the whole value).
 */
function assertNothingDropped(object: object, path: string, failAt: (at: string, problem: string) => never): void {
  const isArray = Array.isArray(object);
  if (isArray) {
    for (let i = 0; i < object.length; i++) {
      if (!Object.prototype.hasOwnProperty.call(object, i)) {
        failAt(`${path}[${i}]`, 'a hole in a sparse array (it would arrive as null; fill the array, e.g. with null)');
      }
    }
  }
  for (const key of Object.getOwnPropertyNames(object)) {
    if (isArray && (key === 'length' || isIndexOf(object, key))) continue;
    if (isArray) failAt(`${path}.${key}`, 'a property of an array that is not an index (JSON keeps only the elements; pass an object)');
    if (!Object.getOwnPropertyDescriptor(object, key)!.enumerable) {
      const toJson = key === 'toJSON' ? ' (a toJSON would replace the whole value)' : '';
      failAt(`${path}.${key}`, `a non-enumerable property: JSON would drop it${toJson}; pass a plain copy ({ ...value }) or make it enumerable`);
    }
  }
}

const isIndexOf = (array: readonly unknown[], key: string): boolean => /^(0|[1-9]\d*)$/.test(key) && Number(key) < array.length;
