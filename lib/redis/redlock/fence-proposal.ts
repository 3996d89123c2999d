import { wallClockMicros } from '../../time/clock';

/**
 * How far ahead of this client's clock its fencing-token proposal runs (µs). Each node issues
 * max(proposal, its clock in µs, its last token + 1): when the proposal is the largest on every
 * granting node (their clocks within this lead of ours, no newer token there), they all issue the
 * same token, and the acquisition needs no write-back round trip (see RedlockStore.fence).
 */
const PROPOSAL_LEAD_US = 1_000_000;

/**
 * The token an acquisition (or a release handing the lock on) proposes to every node, so that the
 * nodes usually agree on one. Only a proposal: safety never depends on it (a node's token is always
 * above its own last one, and the write-back covers nodes that disagree), only whether a round trip
 * is saved.
 */
export function fenceProposal(): string {
  return String(wallClockMicros() + PROPOSAL_LEAD_US);
}
