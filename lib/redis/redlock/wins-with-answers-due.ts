import { acquisitionId } from '../../core/owner-token';

/**
 * The locks this store won before every node had answered the winning attempt, until they are released or abandoned:
 * a late answer that comes for one of them is the holder's (see late-answers.ts), and any other late answer is an
 * acquisition's that is over or still waiting.
 *
 * Only those wins are kept. A node answers one client's calls in the order they were sent, so an acquire call to a
 * node that is still unanswered (any attempt's: a late reply, a replay after a reconnect) holds back that node's
 * answer to every later attempt: a win whose nodes all answered has no answer of the acquisition left to come.
 * An entry lives as long as the lock: the engine releases or abandons every lock it took, a lost one included (its
 * watchdog ends a lock at its deadline), and a lock taken while a node is down adds one entry until then.
 */
export class WinsWithAnswersDue {
  private readonly wins = new Set<string>();

  add(token: string, lock: string): void {
    this.wins.add(acquisitionId(token, lock));
  }

  /** Released or abandoned: a late answer now is an ended acquisition's. */
  delete(token: string, lock: string): void {
    if (this.wins.size > 0) this.wins.delete(acquisitionId(token, lock));
  }

  has(token: string, lock: string): boolean {
    return this.wins.size > 0 && this.wins.has(acquisitionId(token, lock));
  }

  /** @internal Tests: how many are kept. */
  get size(): number {
    return this.wins.size;
  }
}
