import { DistributedLockError } from './distributed-lock.error';

/**
 * Which limit of a job the arguments exceed (see docs/defer.md): nesting deeper than a job can be written and
 * read back, or more JSON than one job may store. Unlike a value JSON cannot carry (a class instance, a
 * function: the code's doing), any input can exceed them, a client's request body included.
 */
export type DeferArgumentLimit = 'depth' | 'size';

const JSON_ADVICE =
  'Deferred arguments travel as JSON: pass plain objects, arrays, strings, finite numbers, booleans and null ' +
  '(a DTO class instance as a plain object, e.g. { ...dto }; a Date as an ISO string).';

const LIMIT_ADVICE: Record<DeferArgumentLimit, string> = {
  depth: 'Pass the data flatter, or store it elsewhere (a database, object storage) and pass its id.',
  size: 'Store large data elsewhere (a database, object storage) and pass its id.',
};

/**
 * A `@Locked(…, { onBusy: 'defer' })` call had an argument that would not survive the trip through the
 * queue as JSON (a function, symbol, BigInt, circular value, Map/Set, Date, class instance…), or arguments
 * over a limit of a job (`limit`: nested too deep, too large). Thrown before anything is enqueued; `path`
 * says where (`args[1].items[0]`).
 */
export class DeferArgumentError extends DistributedLockError {
  constructor(
    readonly where: string,
    readonly path: string,
    problem: string,
    /** Set when the arguments exceed a limit of a job rather than hold a value JSON cannot carry. */
    readonly limit?: DeferArgumentLimit,
  ) {
    super(`${where}: the call cannot be deferred: ${path} is ${problem}. ${limit ? LIMIT_ADVICE[limit] : JSON_ADVICE} Nothing was enqueued.`);
  }
}
