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
 * `forRootAsync({ useClass })` or `({ useExisting })`: Nest calls `create()` on that instance for the options.
 * Without one (a plain JS class, or `createLockOptions()` by analogy with other modules' factories) startup
 * failed with Nest's "TypeError: optionsFactory[self.factoryClassMethodKey] is not a function". The check runs
 * where Nest would call it, on the instance (a `create` class field is a method too).
 */
export function checkOptionsFactory(module: DynamicModule, options: object, moduleName: string, token: unknown): DynamicModule {
  const o = options as { useClass?: unknown; useExisting?: unknown };
  const key =
    o.useClass !== undefined && o.useClass !== null ? 'useClass' : o.useExisting !== undefined && o.useExisting !== null ? 'useExisting' : undefined;
  if (!key) return module;
  const where = `${moduleName}.forRootAsync(options).${key}`;
  const providers = module.providers?.map((provider) => {
    if (!isFactoryProvider(provider) || provider.provide !== token) return provider;
    return {
      ...provider,
      useFactory: async (factory: unknown) => {
        const create = (factory as Record<string, unknown> | null | undefined)?.[FACTORY_METHOD];
        if (typeof create !== 'function') {
          throw new LockOptionsError(
            where,
            `expected a provider with a ${FACTORY_METHOD}() method returning the module's options (Nest calls it), got ${describeValue(factory)} without one. ` +
              `Name the method ${FACTORY_METHOD}(), or use ${EXAMPLE}.`,
          );
        }
        return (await Reflect.apply(create, factory, [])) as unknown;
      },
    };
  });
  return { ...module, providers };
}

function isFactoryProvider(provider: Provider): provider is FactoryProvider {
  return typeof provider === 'object' && provider !== null && 'useFactory' in provider;
}
