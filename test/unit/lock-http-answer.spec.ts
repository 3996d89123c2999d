/**
 * The HTTP answer of a LockLostError (a handler stopped because its lock ended under it): 503 with Retry-After
 * for trouble a retry can get past, nothing (Nest's logged 500) for a handler that outran its own maxHold.
 */
import { LockLostError } from '../../lib';
import { lockHttpAnswer } from '../../lib/locked/lock-http-answer';

describe('lockHttpAnswer for LockLostError', () => {
  it.each(['expired', 'not-owner'] as const)("reason '%s': 503, Retry-After 1, no key in the body", (reason) => {
    const answer = lockHttpAnswer(new LockLostError('user:alice@example.com', reason, 'detail'))!;
    expect(answer.exception.getStatus()).toBe(503);
    expect(answer.retryAfterSeconds).toBe(1);
    expect(JSON.stringify(answer.exception.getResponse())).not.toContain('alice');
  });

  it("reason 'shutdown': 503, retry on another instance", () => {
    const answer = lockHttpAnswer(new LockLostError('k', 'shutdown', 'the application is shutting down'))!;
    expect(answer.exception.getStatus()).toBe(503);
    expect(answer.exception.getResponse()).toMatchObject({ message: expect.stringContaining('retry on another') });
  });

  it("reason 'max-hold': not mapped (every retry would outrun maxHold again: a logged 500)", () => {
    expect(lockHttpAnswer(new LockLostError('k', 'max-hold', 'held longer than maxHold'))).toBeUndefined();
  });
});
