import { DeferArgumentError } from '../errors/defer-argument.error';
import { describeThrown } from '../errors/thrown-value';

/**
 * How deep a deferred argument may nest objects and arrays. JSON.stringify (at the enqueue) and JSON.parse (in
 * the worker) recurse, and V8's overflow the stack a few thousand levels down, sooner the deeper the stack they
 * are called from; a request body parsed by the platform can be nested deeper than that. 1000 leaves them a wide
 * margin and is more than real data needs.
 */
export const MAX_DEFERRED_ARGUMENT_DEPTH = 1000;

/**
 * The most JSON (UTF-8 bytes) the arguments of one call may take. A job is one Redis string, written by one
 * command and kept in Redis' memory until removed (a failed job stays): Redis refuses a bulk string over
 * `proto-max-bulk-len` (512 MB by default), V8 a string over about 512 M characters, and every copy made on the
 * way (the command, the script's copy, the worker's parse) counts. And the enqueue must be written within
 * its bound (enqueue-bound.ts): 63 MiB took over 2 s on a loaded 2-core machine. 16 MiB stays well below all of
 * them, and is more than a call's arguments need.
 */
export const MAX_DEFERRED_ARGUMENTS_BYTES = 16 * 1024 * 1024;
/** MAX_DEFERRED_ARGUMENTS_BYTES as people write it. */
export const MAX_DEFERRED_ARGUMENTS_SIZE = '16 MiB';

const tooLarge = (where: string, what: string): DeferArgumentError =>
  new DeferArgumentError(
    where,
    'args',
    `${what}, more than one job may store (at most ${MAX_DEFERRED_ARGUMENTS_BYTES} bytes, ${MAX_DEFERRED_ARGUMENTS_SIZE})`,
    'size',
  );

/**
 * Refuses arguments whose JSON is over MAX_DEFERRED_ARGUMENTS_BYTES, or too long for a JavaScript string at
 * all (JSON.stringify's RangeError). Checked at the call: left to the enqueue, the RangeError came out of
 * BullMQ and read as Redis trouble, "retry later", which no retry can get past. Returns the JSON's size in
 * bytes (the enqueue's bound grows with it: enqueue-bound.ts).
 */
export function assertStorableSize(args: readonly unknown[], where: string): number {
  let json: string;
  try {
    json = JSON.stringify(args);
  } catch (error) {
    // The nesting is bounded before this runs, so a RangeError here is the string's length (V8: "Invalid string length").
    if (error instanceof RangeError) throw tooLarge(where, `longer as JSON than a JavaScript string can hold (${describeThrown(error)})`);
    throw error;
  }
  // As Redis stores it: UTF-8, where a character may take up to 3 bytes.
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > MAX_DEFERRED_ARGUMENTS_BYTES) throw tooLarge(where, `${bytes} bytes as JSON`);
  return bytes;
}
