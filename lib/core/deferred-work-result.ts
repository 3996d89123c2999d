import { Readable } from 'node:stream';
import { StreamableFile } from '@nestjs/common';

/**
 * Results whose work runs only when someone consumes them: returned from a locked call, that work
 * would run after the release, unlocked, while the next holder runs (two HTTP downloads of one
 * locked report interleaved their chunks). Recognised by what they are, never by method names, and
 * never by calling anything on an unknown value (an entity's own `getStream()` may open a file): a
 * Node `Readable`, Nest's `StreamableFile`, a web `ReadableStream`, an async generator or generator
 * object, any other async iterable, and a cold rxjs Observable (`lift` + `subscribe`, as rxjs' own
 * isObservable; a Subject, which has `next`, is state that others feed, not deferred work).
 * A stream whose end is already buffered (a `StreamableFile` made from a Buffer) holds data produced
 * inside the lock and passes, as do arrays, strings, Maps and Sets.
 *
 * Returns how the result is described in an error, or undefined when it is a plain value.
 */
export function deferredWorkKind(value: unknown): string | undefined {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return undefined;
  if (value instanceof StreamableFile) return isFullyBuffered(value.getStream()) ? undefined : 'a StreamableFile';
  if (value instanceof Readable) return isFullyBuffered(value) ? undefined : 'a stream';
  if (typeof ReadableStream === 'function' && value instanceof ReadableStream) return 'a ReadableStream';
  const tag = Object.prototype.toString.call(value);
  if (tag === '[object AsyncGenerator]') return 'an async generator';
  if (tag === '[object Generator]') return 'a generator';
  const v = value as Record<string | symbol, unknown>;
  if (typeof v[Symbol.asyncIterator] === 'function') return 'an async iterable';
  if (typeof v.subscribe === 'function' && typeof v.lift === 'function' && typeof v.next !== 'function') return 'an Observable';
  return undefined;
}

/**
 * A Node Readable whose end was already pushed: what it will emit is in its buffer. `_readableState`
 * is Node's own stream state (no public flag says "end pushed, not yet read"; `readableEnded` turns
 * true only once read).
 */
function isFullyBuffered(stream: unknown): boolean {
  return (stream as { _readableState?: { ended?: unknown } } | null)?._readableState?.ended === true;
}

/**
 * Frees what a refused result holds, for the kinds that say how: a stream is destroyed (its file
 * descriptor or socket closed), a generator returned (its `finally` blocks run), a web stream
 * cancelled. Another async iterable is left as it is: how it is closed is its own business. Errors
 * are ignored: the caller is already failing with the reason.
 */
export function discardDeferredWork(value: unknown): void {
  try {
    if (value instanceof StreamableFile) value.getStream().destroy();
    else if (value instanceof Readable) value.destroy();
    else if (typeof ReadableStream === 'function' && value instanceof ReadableStream) void value.cancel().catch(() => undefined);
    else {
      const tag = Object.prototype.toString.call(value);
      if (tag === '[object AsyncGenerator]' || tag === '[object Generator]') {
        void Promise.resolve((value as Generator | AsyncGenerator).return(undefined)).catch(() => undefined);
      }
    }
  } catch {
    // Nothing more to free; the call fails with the reason anyway.
  }
}
