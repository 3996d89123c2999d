import { describeValue } from '../errors/describe-value';
import { LockOptionsError } from '../errors/lock-options.error';
import { assertKnownKeys } from './known-keys';
import { assertOptionsObject } from './validate-options';

/** What Nest's ConfigurableModuleBuilder reads from `forRootAsync(...)`, plus our `isGlobal` extra. */
const FOR_ROOT_ASYNC_KEYS = ['imports', 'inject', 'useFactory', 'useClass', 'useExisting', 'provideInjectionTokensFrom', 'isGlobal'] as const;
const EXAMPLE = 'forRootAsync({ imports: [ConfigModule], inject: [ConfigService], useFactory: (config) => ({ redis: config.get("REDIS_URL") }) })';

/**
 * `forRootAsync` of a lock module, checked as `forRoot` is: without this a missing provider failed
 * as Nest's UndefinedDependencyException ("can't resolve dependencies of DISTRIBUTED_LOCK_MODULE_OPTIONS"),
 * which says nothing of what to pass, and `isGlobal: 'yes'` was taken without a word. The options the
 * factory returns are checked when the module starts, like forRoot's.
 */
export function assertForRootAsyncOptions(moduleName: string, options: unknown): void {
  const where = `${moduleName}.forRootAsync(options)`;
  assertOptionsObject(where, options);
  assertKnownKeys(where, options, FOR_ROOT_ASYNC_KEYS);
  const o = options as Record<(typeof FOR_ROOT_ASYNC_KEYS)[number], unknown>;
  // Given means set to something, as Nest reads them (`useFactory: null` beside a useClass is not a second provider).
  const providers = (['useFactory', 'useClass', 'useExisting'] as const).filter((key) => o[key] !== undefined && o[key] !== null);
  if (providers.length !== 1) {
    throw new LockOptionsError(
      where,
      `expected exactly one of useFactory, useClass or useExisting, got ${providers.length === 0 ? 'none' : providers.join(' and ')}: e.g. ${EXAMPLE}.`,
    );
  }
  for (const key of ['useFactory', 'useClass'] as const) {
    if (o[key] !== undefined && o[key] !== null && typeof o[key] !== 'function') {
      throw new LockOptionsError(`${where}.${key}`, `expected a ${key === 'useFactory' ? 'function' : 'class'}, got ${describeValue(o[key])}.`);
    }
  }
  for (const key of ['imports', 'inject'] as const) {
    if (o[key] !== undefined && !Array.isArray(o[key])) {
      throw new LockOptionsError(`${where}.${key}`, `expected an array, got ${describeValue(o[key])}.`);
    }
  }
  if (o.isGlobal !== undefined && typeof o.isGlobal !== 'boolean') {
    throw new LockOptionsError('isGlobal', `expected a boolean, got ${describeValue(o.isGlobal)}.`);
  }
}
