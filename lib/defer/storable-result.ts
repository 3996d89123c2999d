import type { Logger } from '@nestjs/common';

/**
 * What BullMQ keeps as a finished job's return value: the method's result when JSON can hold it, else null.
 * BullMQ JSON-encodes the return value when it marks the job completed; a value it cannot encode (a
 * circular entity, a BigInt, a throwing toJSON) would fail that step, and BullMQ would then fail the job
 * and run the method again, although it already ran. Checked here, after the method ran, so nothing
 * after the run can fail the job.
 */
export function storableResult(result: unknown, method: string, jobId: string | undefined, logger: Logger): unknown {
  try {
    JSON.stringify(result);
    return result;
  } catch (error) {
    // One line: V8 explains a circular structure over several.
    const why = (error instanceof Error ? error.message : String(error)).split('\n')[0];
    logger.warn(
      `Deferred ${method} (job ${jobId}) returned a value JSON cannot hold (${why}); ` +
        `the job is completed with null as its return value. Return plain data (ids, strings, numbers) from a deferring method.`,
    );
    return null;
  }
}
