import Redis from 'ioredis';

/**
 * Counts client → Redis round trips in this process by wrapping ioredis' `sendCommand`, the one
 * path every command of every client takes (ours, the peers', EVALSHA → EVAL fallbacks,
 * SUBSCRIBE). A pipeline is written to the socket as one batch and awaited once, so it counts as
 * ONE round trip however many commands it carries; commands outside a pipeline count one each.
 * Connections of the measurement itself (INFO) are excluded.
 */
export interface RoundTripCounts {
  /** Single commands plus pipeline batches. */
  roundTrips: number;
  /** Pipeline batches only. */
  pipelines: number;
  /** Commands sent inside pipelines. */
  pipelinedCommands: number;
  /** Single (non-pipelined) commands by name, for diagnosis. */
  byCommand: Record<string, number>;
  /** Pub/sub messages received by any subscriber connection in this process (wake-ups delivered). */
  messagesReceived: number;
}

const ignored = new WeakSet<object>();
const seenPipelines = new WeakSet<object>();
let counts: RoundTripCounts = emptyCounts();
let installed = false;

function emptyCounts(): RoundTripCounts {
  return { roundTrips: 0, pipelines: 0, pipelinedCommands: 0, byCommand: {}, messagesReceived: 0 };
}

export function installRoundTripCounter(): void {
  if (installed) return;
  installed = true;
  const proto = Redis.prototype as unknown as { sendCommand: (command: { name: string }, stream?: object) => unknown };
  const original = proto.sendCommand;
  proto.sendCommand = function countedSendCommand(this: object, command: { name: string }, stream?: object) {
    if (!ignored.has(this)) {
      if (stream && (stream as { isPipeline?: boolean }).isPipeline) {
        counts.pipelinedCommands++;
        if (!seenPipelines.has(stream)) {
          seenPipelines.add(stream);
          counts.pipelines++;
          counts.roundTrips++;
        }
      } else {
        counts.roundTrips++;
        counts.byCommand[command.name] = (counts.byCommand[command.name] ?? 0) + 1;
      }
    }
    // eslint-disable-next-line prefer-rest-params
    return original.apply(this, arguments as unknown as [{ name: string }, object?]);
  };
  // Every pub/sub delivery surfaces as a 'message' event on the receiving connection.
  const emitter = Redis.prototype as unknown as { emit: (event: string | symbol, ...args: unknown[]) => boolean };
  const originalEmit = emitter.emit;
  emitter.emit = function countedEmit(this: object, event: string | symbol, ...args: unknown[]) {
    if (event === 'message' && !ignored.has(this)) counts.messagesReceived++;
    return originalEmit.call(this, event, ...args);
  };
}

/** Commands of this client are not counted (the benchmark's own INFO / admin connection). */
export function ignoreClient(client: Redis): void {
  ignored.add(client);
}

/** Starts a fresh count; returns a function that reads what was counted since. */
export function startRoundTripCount(): () => RoundTripCounts {
  counts = emptyCounts();
  const mine = counts;
  return () => ({ ...mine, byCommand: { ...mine.byCommand } });
}
