import type { NodeAcquire } from './node-acquire';
import type { Vote } from './quorum';

/**
 * Where an acquisition stands when a late answer comes: still `waiting` (queued, its ticket kept), `holding` the lock
 * (it won, or was handed it, and was not released or abandoned since), or `over` without holding anything (it failed,
 * was busy without waiting, or was released or abandoned).
 */
export type AcquisitionStand = 'waiting' | 'holding' | 'over';

/**
 * `give-back`: the give-back script, keeping the waiter's place (ticket). `abandon`: the abandon script, leaving the
 * node's queue too. Both owner-checked.
 */
export type LateAnswerAction = 'nothing' | 'give-back' | 'abandon';

/**
 * What one node's answer to an acquire attempt asks for when it comes after the attempt was decided. Two kinds come:
 * - a vote askAll did not wait for (a majority had decided) or that failed (the call may still have run);
 * - a reply after the node's own deadline had already failed the call (`nodeTimeout`). A client you pass keeps
 *   ioredis' defaults: it sends the commands in flight again after a reconnect (`autoResendUnfulfilledCommands`;
 *   with `maxRetriesPerRequest: null` at any later reconnect), so an acquire the node never answered runs on it once
 *   it is back, possibly long after the acquisition ended. Whatever the acquisition sent that node meanwhile (its
 *   release, abandon or give-back) was refused while the connection was down, so without an answer here the key
 *   stayed held there for the whole ttl by a token nobody uses: a stray vote. Exclusion holds (a minority), but with
 *   3 nodes, a stray vote plus one node down failed every acquire of the key.
 * A call sent in answer runs after the late one on that node: the reply came on the connection the call runs on.
 *
 * `cleanedUpAfter`: the acquisition's end sent this node a clean-up after the call, on the connection the call went
 * out on, so it runs after the call there. Every acquisition that won or waited sends every node one when it ends
 * (its release or abandon, the loss's clean-up, or the engine's abandon of a failed acquisition); a one-shot attempt
 * that was busy sends none. A reconnect since the call voids it: what was sent while the connection was down was
 * refused, and an answer that comes on a connection opened after the call is a replay.
 *
 * The rule, by what the answer did and where the acquisition stands now:
 * - It took nothing (busy without a queue place, or a node still in its recovery delay): nothing to undo.
 * - `holding`: nothing. The grant is to the holder's own token: one more node holding the lock for it, freed by the
 *   release (or abandon, or the loss's clean-up), which goes to every node and, sent later on that connection, runs
 *   after the grant. Giving it back would not be harmless: a renewal sent since the node came back runs before the
 *   give-back and may count that node toward the holder's majority (a renewal counts a node holding our token), so
 *   deleting it afterwards could leave the holder sure of a majority it no longer has while another client takes the
 *   rest (a double grant). A queue place it took (the node was busy) is left by the release as well.
 * - `waiting`: a queue place is the waiter's own (its ticket), and is kept. A grant, or a failure (which may have
 *   granted), is given back keeping that place, and only while this call is still the last the acquisition sent that
 *   node: a later attempt runs after it there, finds the grant ours and its own answer decides; a give-back sent now
 *   would run after that attempt and delete a lock it may have counted (a double grant:
 *   test/unit/redlock-late-votes.spec.ts). Otherwise the grant is the live waiter's until its next attempt counts it
 *   or gives it back, or its abandon frees it.
 * - `over`: the token is used by nobody any more (an acquisition never retries with the token it ended with).
 *   Whatever the call left on the node, a lock or a queue place, or may have left (a failure), is abandoned there,
 *   unless the clean-up the acquisition's end sent runs after it (`cleanedUpAfter`): a second one would find nothing,
 *   and a lock released before a slow node's answer came (short locks, one distant node) would cost every lock a
 *   script more there. Owner-checked, it touches only this token's lock and place, never a lease the token
 *   legitimately holds: it holds none.
 */
export function lateAnswerAction(vote: Vote<NodeAcquire>, stand: AcquisitionStand, lastCall: boolean, cleanedUpAfter: boolean): LateAnswerAction {
  if (vote.ok && !tookSomething(vote.value)) return 'nothing';
  if (stand === 'over') return cleanedUpAfter ? 'nothing' : 'abandon';
  if (stand === 'holding' || (vote.ok && vote.value.kind === 'busy')) return 'nothing';
  return lastCall ? 'give-back' : 'nothing';
}

/** A grant, or a place in the node's queue. */
const tookSomething = (answer: NodeAcquire): boolean => answer.kind === 'ours' || (answer.kind === 'busy' && answer.position >= 0);
