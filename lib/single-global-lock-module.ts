import { Injectable } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import type { Module as NestModule } from '@nestjs/core/injector/module';
import { DISTRIBUTED_LOCK_OPTIONS } from './distributed-lock.module-definition';
import { LockOptionsError } from './errors/lock-options.error';
import { LockService } from './lock.service';
import type { DistributedLockModuleOptions } from './options/distributed-lock-module-options.interface';
import { LOCK_DEFAULTS } from './options/lock-defaults';

/**
 * Fails the startup of an application with two global lock modules (DistributedLockModule or the testing module,
 * global by default): Nest gives each provider the LockService of one of them and `app.get(LockService)` maybe the
 * other's, so code that means one lock takes two (another keyPrefix, or another Redis) and nothing excludes it.
 * Checked when Nest builds this provider, before any module starts, so nothing has connected yet; per application,
 * since the ModulesContainer is the application's (two applications in one process each have their own module).
 * Lock modules with `isGlobal: false` are not counted: each serves the modules that import it.
 */
@Injectable()
export class SingleGlobalLockModule {
  constructor(modules: ModulesContainer) {
    const globals = [...modules.values()].filter((module) => module.isGlobal && module.providers.has(LockService));
    if (globals.length > 1) {
      throw new LockOptionsError(
        'isGlobal',
        `this application has ${globals.length} global lock modules: ${globals.map(describeLockModule).join('; ')}. ` +
          `Each provider gets the LockService of one of them, so the same key may be locked twice, without exclusion. ` +
          `Keep one global forRoot (in the root module, or a shared module imported once); give any other ` +
          `isGlobal: false and import it where it is used. In tests, replace the module instead of adding one ` +
          `(see docs/testing.md).`,
      );
    }
  }
}

/** `DistributedLockModule (keyPrefix "app:", redis redis://host:6379)`, as far as its options are known before it is built. */
function describeLockModule(module: NestModule): string {
  const name = module.metatype?.name ?? 'a lock module';
  const options = module.providers.get(DISTRIBUTED_LOCK_OPTIONS)?.instance as DistributedLockModuleOptions | undefined;
  if (options === undefined || options === null) return `${name} (options from forRootAsync)`;
  const keyPrefix = typeof options.keyPrefix === 'string' ? options.keyPrefix : LOCK_DEFAULTS.keyPrefix;
  return `${name} (keyPrefix "${keyPrefix}", ${describeStore(name, options)})`;
}

function describeStore(name: string, options: DistributedLockModuleOptions): string {
  if (name === 'DistributedLockTestingModule') return 'in memory';
  if (Array.isArray(options.nodes)) return `Redlock on ${options.nodes.length} nodes`;
  const redis: unknown = options.redis;
  if (typeof redis === 'string') return `redis ${withoutPassword(redis)}`;
  if (redis !== null && typeof redis === 'object') {
    const { host, port } = redis as { host?: unknown; port?: unknown };
    const shown = (value: unknown, otherwise: string) => (typeof value === 'string' || typeof value === 'number' ? String(value) : otherwise);
    if (host !== undefined || port !== undefined) return `redis ${shown(host, 'localhost')}:${shown(port, '6379')}`;
    return 'redis: a client or options object';
  }
  return 'redis not given';
}

/** The message may end up in logs: a URL's password stays out. */
function withoutPassword(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(a URL that does not parse)';
  }
}
