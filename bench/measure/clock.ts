/** Milliseconds on the process's monotonic clock (hrtime), with sub-µs resolution. */
export const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6;
