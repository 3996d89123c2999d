/** LockBusyError says how long the holder's lease can still run in a unit a reader takes in at once. */
import { LockBusyError } from '../../lib';

describe('LockBusyError message', () => {
  it.each([
    [1_500, 'its lease ends in 1500 ms at the latest'],
    [30_000, 'its lease ends in 30 s at the latest'],
    [10_800_000, 'its lease ends in 3.0 h at the latest'],
    // A key held "until release" in the testing module (LockTestingController.hold without a ttl).
    [2_147_483_642, 'its lease ends in 24.9 days at the latest'],
    [-1, 'it is being handed to a queued waiter'],
  ])('holderTtl %d: %s', (holderTtl, detail) => {
    expect(new LockBusyError('k', holderTtl).message).toBe(
      `Lock "k" is held by another owner (${detail}). Retry later, or use onBusy: 'retry' with a waitTimeout to wait for it.`,
    );
  });
});
