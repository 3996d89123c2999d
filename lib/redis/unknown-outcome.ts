/**
 * What a call whose answer never came may have left, said to the user. Only an acquire comes before
 * the work: a release, renewal or extension comes while or after it ran, so "nothing ran under it"
 * would tell a caller that completed work can be retried.
 */
export function unknownOutcome(operation: string): string {
  switch (operation) {
    case 'acquire':
      return 'The lock state is unknown; nothing ran under it.';
    case 'release':
    case 'shorten':
      return 'The lock state is unknown: the work under the lock ran, and if the release did not reach Redis it is sent again once the connection is back, or the key stays taken until its lease lapses.';
    case 'renew':
    case 'extend':
      return 'The lock state is unknown: the work under the lock has run (or runs on), and the lease may not have been prolonged, so it may lapse at its deadline.';
    case 'abandon':
      return 'The lock state is unknown; nothing ran under it, and a queue place or a lock this attempt took lapses by itself.';
    default:
      return 'The lock state is unknown.';
  }
}
