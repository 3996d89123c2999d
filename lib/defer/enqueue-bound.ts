/**
 * The slowest rate (bytes of argument JSON per second) at which an enqueue is still expected to complete. An
 * enqueue is not one small command: BullMQ serialises the arguments again and writes them as one Redis string,
 * so its time grows with their size. A 15 MiB argument took over 2 s (the default commandTimeout) on a loaded
 * 2-core machine; over a 100 Mbit/s link, 16 MiB takes 1.3 s on the wire alone. A bound that ignored the size
 * told such a caller "Redis did not answer, the job may or may not be stored" on a healthy Redis.
 */
export const ENQUEUE_BYTES_PER_SECOND = 4 * 1024 * 1024;

/**
 * How long (ms) an enqueue of `jsonBytes` of arguments may take before its caller is told it failed:
 * `commandTimeout`, as for every command, plus the time the arguments take at ENQUEUE_BYTES_PER_SECOND
 * (1 ms per 4 KiB, none below that; 4 s for the largest job, 16 MiB).
 */
export function enqueueBound(commandTimeout: number, jsonBytes: number): number {
  return commandTimeout + Math.floor((jsonBytes * 1000) / ENQUEUE_BYTES_PER_SECOND);
}
