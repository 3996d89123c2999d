import { describeValue } from './describe-value';

/** What user code threw, as an error message quotes it: `TypeError: …` for an Error, else the value described. */
export function describeThrown(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : describeValue(error);
}

/**
 * An HTTP exception (Nest's: it has getStatus) thrown by user code that builds a key is that code's own answer, a 403
 * for a caller without a tenant say: passed on as it is, not turned into a LockKeyError.
 */
export function isHttpException(error: unknown): boolean {
  return typeof (error as { getStatus?: unknown } | null)?.getStatus === 'function';
}
