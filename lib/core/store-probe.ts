/** Redlock: the nodes, and how many of them could vote on an acquire when probed. */
export interface NodeVotes {
  total: number;
  /** Answered the probe and are past nodeRecoveryDelay: the votes an acquire can count on. */
  voting: number;
}

/**
 * @internal What one health round trip to the store found (`LockStore.probe`): how long it took, or
 * why lock calls would fail now; Redlock adds how many nodes can vote, either way.
 */
export type StoreProbe = ({ ms: number } | { error: Error }) & { nodes?: NodeVotes };
