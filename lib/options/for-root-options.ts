import { describeValue } from '../errors/describe-value';
import { LockOptionsError } from '../errors/lock-options.error';
import { assertOptionsObject } from './validate-options';

/**
 * What `forRoot` of a lock module (`DistributedLockModule`, or the testing module standing in for it)
 * is given, checked before Nest reads it: Nest itself throws a TypeError for no options, and spreads
 * a string into an object of characters.
 */
export function assertForRootOptions(moduleName: string, options: unknown): void {
  const where = `${moduleName}.forRoot(options)`;
  if (typeof options === 'string') {
    throw new LockOptionsError(
      where,
      `expected an options object, got ${describeValue(options)}. A URL goes in the redis option: forRoot({ redis: ${JSON.stringify(options)} }).`,
    );
  }
  assertOptionsObject(where, options);
  const { isGlobal } = options as { isGlobal?: unknown };
  if (isGlobal !== undefined && typeof isGlobal !== 'boolean') {
    throw new LockOptionsError('isGlobal', `expected a boolean, got ${describeValue(isGlobal)}.`);
  }
}
