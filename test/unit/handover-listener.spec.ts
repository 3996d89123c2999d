import { HandoverListener } from '../../lib/core/acquire/handover-listener';
import type { Handover, HandoverChannel } from '../../lib/core/handover-channel';

/** A channel that hands the test the wake function the listener registered. */
function fakeChannel(): { channel: HandoverChannel; wake: (handover?: Handover) => void } {
  let registered: ((handover?: Handover) => void) | undefined;
  const channel: HandoverChannel = {
    subscribed: true,
    state: 'subscribed',
    subscribedTo: () => true,
    register: (_token, _lockName, wake) => {
      registered = wake;
      return () => (registered = undefined);
    },
    ensureSubscribed: () => Promise.resolve(true),
    close: () => Promise.resolve(),
  };
  return { channel, wake: (handover) => registered?.(handover) };
}

/**
 * A wake without a handover (a sharded Cluster channel lost its slot's subscription and has it back:
 * "try again now") ends the waiter's pause but never erases a handover it already heard.
 */
describe('HandoverListener', () => {
  it('a wake without a handover ends the pause and keeps a handover heard before it', () => {
    const { channel, wake } = fakeChannel();
    const listener = new HandoverListener(channel, 'svc.1000.x', 'lock:{k}');
    let pausesEnded = 0;
    listener.wake = () => pausesEnded++;

    wake();
    expect(pausesEnded).toBe(1);
    expect(listener.handover).toBeUndefined();

    const handover = { fence: 7, validFor: 900, placeLeft: 900 };
    wake(handover);
    wake();
    expect(pausesEnded).toBe(3);
    expect(listener.handover).toBe(handover);

    listener.stop();
  });
});
