import type { DynamicModule, FactoryProvider, Provider } from '@nestjs/common';
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

/** The method Nest's ConfigurableModuleBuilder calls on a `useClass` / `useExisting` options factory. */
const FACTORY_METHOD = 'create';

/**
 * The options provider `forRootAsync` made, wrapped to check what it produces, where Nest calls it (at startup):
 * - `useClass` / `useExisting`: Nest calls `create()` on that instance for the options. Without one (a plain JS
 *   class, or `createLockOptions()` by analogy with other modules' factories) startup failed with Nest's
 *   "TypeError: optionsFactory[self.factoryClassMethodKey] is not a function". Checked on the instance (a `create`
 *   class field is a method too).
 * - every kind: the options must not carry `isGlobal` (see assertNoIsGlobal).
 */
export function checkOptionsFactory(module: DynamicModule, options: object, moduleName: string, token: unknown): DynamicModule {
  const o = options as { useFactory?: unknown; useClass?: unknown; useExisting?: unknown; isGlobal?: boolean };
  const key = isSet(o.useClass) ? 'useClass' : isSet(o.useExisting) ? 'useExisting' : 'useFactory';
  const where = `${moduleName}.forRootAsync(options).${key}`;
  const providers = module.providers?.map((provider) => {
    if (!isFactoryProvider(provider) || provider.provide !== token) return provider;
    const produce = key === 'useFactory' ? (provider.useFactory as (...deps: unknown[]) => unknown) : (factory: unknown) => create(factory, where);
    return {
      ...provider,
      useFactory: async (...deps: unknown[]) => {
        const produced = await produce(...deps);
        assertNoIsGlobal(produced, moduleName, key, o.isGlobal);
        return produced;
      },
    };
  });
  return { ...module, providers };
}

function create(factory: unknown, where: string): unknown {
  const method = (factory as Record<string, unknown> | null | undefined)?.[FACTORY_METHOD];
  if (typeof method !== 'function') {
    throw new LockOptionsError(
      where,
      `expected a provider with a ${FACTORY_METHOD}() method returning the module's options (Nest calls it), got ${describeValue(factory)} without one. ` +
        `Name the method ${FACTORY_METHOD}(), or use ${EXAMPLE}.`,
    );
  }
  return Reflect.apply(method, factory, []) as unknown;
}

/**
 * Whether a module is global is decided when `forRootAsync(...)` defines it, before the factory runs: Nest reads
 * `isGlobal` from forRootAsync's own argument only. One in the options the factory returns (a config object shared
 * with forRoot, say) was ignored, and the module stayed as forRootAsync made it without a word.
 */
function assertNoIsGlobal(produced: unknown, moduleName: string, key: string, moduleIsGlobal: boolean | undefined): void {
  const isGlobal = typeof produced === 'object' && produced !== null ? (produced as { isGlobal?: unknown }).isGlobal : undefined;
  if (isGlobal === undefined) return;
  const source = key === 'useFactory' ? 'The useFactory' : `The ${FACTORY_METHOD}() of the ${key}`;
  const returned = typeof isGlobal === 'boolean' ? `isGlobal: ${isGlobal}` : `isGlobal (${describeValue(isGlobal)})`;
  const global =
    moduleIsGlobal === undefined
      ? 'is global (the default: forRootAsync was given no isGlobal)'
      : `is ${moduleIsGlobal ? '' : 'not '}global (forRootAsync's isGlobal: ${moduleIsGlobal})`;
  throw new LockOptionsError(
    'isGlobal',
    `${source} of ${moduleName}.forRootAsync(options) returned ${returned} among the module's options, where nothing reads it: ` +
      `whether the module is global is decided by forRootAsync itself, before the factory runs, so this module ${global}. ` +
      `Put isGlobal next to ${key}: ${moduleName}.forRootAsync({ isGlobal, ${key}, ... }), and leave it out of the options.`,
  );
}

/** Given as Nest reads it: `useFactory: null` beside a useClass is not a second provider. */
const isSet = (value: unknown): boolean => value !== undefined && value !== null;

function isFactoryProvider(provider: Provider): provider is FactoryProvider {
  return typeof provider === 'object' && provider !== null && 'useFactory' in provider;
}
