import { Observable } from 'rxjs';
import { DistributedLockError } from '../errors/distributed-lock.error';

/**
 * Refuses, at class definition, a method whose declared return type (emitDecoratorMetadata's
 * `design:returntype`) is a synchronous value: the wrapper would turn it into a Promise behind its callers' backs.
 * The types already refuse it; this catches `@Locked` applied through `any` or a cast. An `async` function passes;
 * without the metadata (plain JavaScript) or with an unannotated or `void` return type nothing can be told
 * before the first call, so the method is accepted.
 */
export function rejectSynchronousMethod(original: object, declaredReturnType: unknown, where: string): void {
  if ((original as Record<symbol, unknown>)[Symbol.toStringTag] === 'AsyncFunction') return;
  if (typeof declaredReturnType !== 'function' || isAsyncResultType(declaredReturnType)) return;
  throw new DistributedLockError(
    `${where}: the method is declared to return ${declaredReturnType.name || 'a synchronous value'}, but @Locked makes every call ` +
      `asynchronous (the lock is taken first). Make it async (": Promise<${declaredReturnType.name || 'T'}>"), or return an Observable.`,
  );
}

/** Promise, Observable, anything thenable, and `Object` (what unions, interfaces such as PromiseLike, and `any` are emitted as). */
function isAsyncResultType(type: { prototype?: unknown }): boolean {
  if (type === Object || type === Promise || type === Observable) return true;
  const proto = type.prototype;
  return proto instanceof Promise || proto instanceof Observable || typeof (proto as { then?: unknown } | undefined)?.then === 'function';
}
