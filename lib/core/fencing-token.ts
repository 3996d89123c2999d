/** A fencing token as the client receives it: a positive integer that is exact in JavaScript. */
export function isFencingToken(value: number): boolean {
  return Number.isSafeInteger(value) && value > 0;
}
