import type { Socket } from 'node:net';

/** What reached one socket: writes are counted where Node hands them over (`_write`: one chunk, `_writev`: a batch). */
export interface WriteCount {
  /** Writes handed to the socket (system calls). */
  flushes: number;
  /** Chunks they carried: ioredis writes each command as one chunk. */
  chunks: number;
  /** Chunks that are script calls (EVALSHA or EVAL): the lock calls, without a startup check's INFO sent meanwhile. */
  scripts: number;
  /** Most chunks one write carried. */
  largest: number;
}

/** Counts what reaches `socket` from now on; `stop` puts the socket back as it was. */
export function countSocketWrites(socket: Socket): { counted: WriteCount; stop: () => void } {
  const target = socket as Socket & {
    _write: (...args: unknown[]) => unknown;
    _writev: (chunks: unknown[], cb: unknown) => unknown;
  };
  const counted: WriteCount = { flushes: 0, chunks: 0, scripts: 0, largest: 0 };
  const write = target._write;
  const writev = target._writev;
  target._write = function (this: Socket, ...args: unknown[]) {
    counted.flushes++;
    counted.chunks++;
    if (isScriptCall(args[0])) counted.scripts++;
    counted.largest = Math.max(counted.largest, 1);
    return write.apply(this, args);
  };
  target._writev = function (this: Socket, chunks: unknown[], cb: unknown) {
    counted.flushes++;
    counted.chunks += chunks.length;
    for (const entry of chunks) if (isScriptCall((entry as { chunk?: unknown }).chunk)) counted.scripts++;
    counted.largest = Math.max(counted.largest, chunks.length);
    return writev.call(this, chunks, cb);
  };
  return {
    counted,
    stop: () => {
      target._write = write;
      target._writev = writev;
    },
  };
}

/** Whether a chunk written to the socket is a script call (ioredis writes each command as one RESP string). */
function isScriptCall(chunk: unknown): boolean {
  const text = typeof chunk === 'string' ? chunk : Buffer.isBuffer(chunk) ? chunk.toString('latin1', 0, 64) : '';
  return /^\*\d+\r\n\$(7\r\nevalsha|4\r\neval)\r\n/i.test(text);
}
