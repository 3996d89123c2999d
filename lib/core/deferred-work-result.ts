/**
 * Results whose work runs only when someone consumes them: returned from a locked call, that work
 * would run after the release, unlocked, while the next holder runs (two HTTP downloads of one
 * locked report interleaved their chunks). Found by duck typing, so the engine needs neither rxjs
 * nor Nest: an rxjs Observable (`lift` + `subscribe`, as rxjs' own isObservable), an async iterable
 * (async generator objects, Node `Readable` streams), a generator object, a web `ReadableStream`,
 * and Nest's `StreamableFile` (`getStream`). Arrays, strings, Maps and Sets are iterable but
 * already computed, so they are not among them; nor is a Node stream whose end is already buffered
 * (a `StreamableFile` made from a Buffer: every byte was produced inside the lock).
 *
 * Returns how the result is described in an error, or undefined when it is a plain value.
 */
export function deferredWorkKind(value: unknown): string | undefined {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return undefined;
  const v = value as Record<string | symbol, unknown>;
  if (typeof v.subscribe === 'function' && typeof v.lift === 'function') return 'an Observable';
  if (typeof v.getStream === 'function') return isFullyBuffered((v.getStream as () => unknown).call(value)) ? undefined : 'a StreamableFile';
  if (typeof v.pipe === 'function' && typeof v[Symbol.asyncIterator] === 'function') return isFullyBuffered(v) ? undefined : 'a stream';
  if (typeof v[Symbol.asyncIterator] === 'function') return 'an async iterable';
  if (typeof v.getReader === 'function') return 'a ReadableStream';
  if (Object.prototype.toString.call(value) === '[object Generator]') return 'a generator';
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
 * Frees what a refused result holds, without consuming it: a stream is destroyed (its file
 * descriptor or socket closed), an iterator or generator is returned (its `finally` blocks run), a
 * web stream cancelled. An Observable holds nothing until subscribed. Errors are ignored: the
 * caller is already failing with the reason.
 */
export function discardDeferredWork(value: unknown): void {
  const v = value as {
    getStream?: () => unknown;
    destroy?: () => void;
    return?: () => unknown;
    cancel?: () => unknown;
    [Symbol.asyncIterator]?: () => { return?: () => unknown };
  };
  try {
    if (typeof v.getStream === 'function') return discardDeferredWork(v.getStream());
    if (typeof v.destroy === 'function') return v.destroy();
    if (typeof v.cancel === 'function') return void Promise.resolve(v.cancel()).catch(() => undefined);
    if (typeof v.return === 'function') return void Promise.resolve(v.return()).catch(() => undefined);
    if (typeof v[Symbol.asyncIterator] === 'function') {
      const iterator = v[Symbol.asyncIterator]!();
      if (typeof iterator.return === 'function') void Promise.resolve(iterator.return()).catch(() => undefined);
    }
  } catch {
    // Nothing more to free; the call fails with the reason anyway.
  }
}
