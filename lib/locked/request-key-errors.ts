import type { DeferArgumentError } from '../errors/defer-argument.error';
import type { LockKeyError } from '../errors/lock-key.error';

/**
 * The metadata key `@Get`, `@Post`… put on a route handler (`PATH_METADATA` in @nestjs/common/constants,
 * 'path' in Nest 10 to 12). Written out: Nest 12 is ESM-only and its package exports no such subpath.
 */
const ROUTE_PATH_METADATA = 'path';

/** The `@Locked` method (its wrapper, the function Nest routes to) each compiled key source belongs to. */
const methodOfKeySource = new WeakMap<object, object>();
/** The key source whose resolution threw a LockKeyError, or of the method whose arguments a DeferArgumentError refused. */
const keySourceOfError = new WeakMap<object, object>();

/** At decoration: `source` (the keys or deferKey of a `@Locked` method) resolves for `method`. */
export function recordKeySourceMethod(source: object, method: object): void {
  methodOfKeySource.set(source, method);
}

/**
 * At call time: `error` was thrown resolving `source` from the call's arguments (a LockKeyError), or refused the
 * arguments of the `@Locked` method whose keys `source` makes (a DeferArgumentError).
 */
export function markErrorSource(error: LockKeyError | DeferArgumentError, source: object): void {
  if (!keySourceOfError.has(error)) keySourceOfError.set(error, source);
}

/**
 * Whether a LockKeyError is the request's fault: thrown making the key of a route handler's own
 * `@Locked` (a method with `@Get`, `@Post`…), whose arguments are the request's input. Any other
 * (a service's lock reading a field that is undefined, `withLock('')` in a handler) is a server bug
 * that must stay a 500 and be logged, not be blamed on the client.
 */
export function isRequestKeyError(error: LockKeyError): boolean {
  return isOfRouteHandler(error);
}

/**
 * Whether a DeferArgumentError is the request's fault: it refused the arguments of a route handler's own
 * deferring `@Locked` (the request's input), for a limit any input can exceed (`limit`: nested too deep, too
 * large). A value JSON cannot carry (a DTO class instance a pipe made, the request object, a Date) never comes
 * from a client's JSON: it is the code's doing, a server bug, as is any DeferArgumentError of a service's method.
 */
export function isRequestArgumentError(error: DeferArgumentError): boolean {
  return error.limit !== undefined && isOfRouteHandler(error);
}

function isOfRouteHandler(error: object): boolean {
  const source = keySourceOfError.get(error);
  const method = source && methodOfKeySource.get(source);
  return method !== undefined && Reflect.getMetadata(ROUTE_PATH_METADATA, method) !== undefined;
}
