import { DistributedLockError } from './distributed-lock.error';

/**
 * A `@Locked(…, { onBusy: 'defer' })` call had an argument that would not survive the trip through the
 * queue as JSON (a function, symbol, BigInt, circular value, Map/Set, Date, class instance…). Thrown before
 * anything is enqueued; `path` says where (`args[1].items[0]`).
 */
export class DeferArgumentError extends DistributedLockError {
  constructor(
    readonly where: string,
    readonly path: string,
    problem: string,
  ) {
    super(
      `${where}: the call cannot be deferred: ${path} is ${problem}. Deferred arguments travel as JSON: pass plain objects, arrays, ` +
        `strings, finite numbers, booleans and null (a DTO class instance as a plain object, e.g. { ...dto }; a Date as an ISO string). Nothing was enqueued.`,
    );
  }
}
