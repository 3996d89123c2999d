/**
 * How a Redlock attempt counts the nodes that granted it, with nodes whose answers differ (scripted
 * nodes: each answers the scripts the way this test says). A mutation review found two rules no test
 * checked, because every test's granting nodes answered alike:
 * - the lock's lease is the shortest granted one: a node can answer "already ours" with what its key
 *   has left (a handed-over lease), and a majority outlives its shortest key by no more than that;
 * - a node counts only if it holds the lock's token after the write-back: one whose raise answered
 *   "not ours" (its grant expired, or another client took it since) does not.
 */
import { LockConnectionError } from '../../lib';
import type { RedlockNode } from '../../lib/redis/redlock/redlock-node';
import { REDLOCK_SCRIPTS } from '../../lib/redis/redlock/redlock-scripts';
import { RedlockStore } from '../../lib/redis/redlock/redlock-store';

type Answer = (args: readonly string[]) => unknown;

/** Nodes that answer each script with `answers[node][script name]` (default 0), recording what they were sent. */
function scriptedNodes(answers: Array<Partial<Record<keyof typeof REDLOCK_SCRIPTS, Answer>>>) {
  const sent: string[][] = answers.map(() => []);
  const nameOf = (script: unknown) => (Object.entries(REDLOCK_SCRIPTS).find(([, s]) => s === script)?.[0] ?? 'other') as keyof typeof REDLOCK_SCRIPTS;
  const nodes = answers.map(
    (answer, i) =>
      ({
        run: (script: unknown, _operation: string, _keys: unknown, args: readonly string[], parse?: (raw: unknown) => unknown) => {
          const name = nameOf(script);
          sent[i].push(name);
          const raw = answer[name]?.(args) ?? 0;
          return Promise.resolve(parse ? parse(raw) : raw);
        },
      }) as unknown as RedlockNode,
  );
  return { nodes, sent };
}

const store = (nodes: RedlockNode[]) => new RedlockStore(nodes, { keyPrefix: 'x:', waiterLease: 3_000, nodeRecoveryDelay: 0, nodeTimeout: 2_000 });
const TOKEN = 'svca.1000.a';
const busy = () => [0, 900, -1, '10', 'svcb.1000.b'];

describe('Redlock: counting the granting nodes', () => {
  it('the lease is the shortest any counted node granted', async () => {
    const { nodes } = scriptedNodes([{ acquire: () => [1, '10', 50] }, { acquire: () => [1, '10', 1_000] }, { acquire: busy }]);
    const s = store(nodes);
    const reply = await s.acquire(s.keysFor('k'), TOKEN, 1_000, false, false);
    expect(reply).toMatchObject({ acquired: true, fence: 10, validFor: 50 });
  });

  it('a node whose write-back answered "not ours" is not counted: with it the majority is gone, and everything is given back', async () => {
    const { nodes, sent } = scriptedNodes([
      { acquire: () => [1, '100', 1_000] },
      { acquire: () => [1, '50', 1_000], raiseFence: () => 0 },
      { acquire: busy },
    ]);
    const s = store(nodes);
    const attempt = s.acquire(s.keysFor('k'), TOKEN, 1_000, false, false);
    await expect(attempt).rejects.toThrow(LockConnectionError);
    await expect(attempt).rejects.toThrow(/fewer than 2 kept it through the fencing-token write-back/);
    expect(sent[1]).toEqual(['acquire', 'raiseFence', 'abandon']);
    expect(sent[0]).toEqual(['acquire', 'abandon']);
  });

  it('the control: when the write-back is acknowledged, the lock is ours with the highest token', async () => {
    const { nodes } = scriptedNodes([
      { acquire: () => [1, '100', 1_000] },
      { acquire: () => [1, '50', 1_000], raiseFence: () => 1 },
      { acquire: busy },
    ]);
    const s = store(nodes);
    expect(await s.acquire(s.keysFor('k'), TOKEN, 1_000, false, false)).toMatchObject({ acquired: true, fence: 100 });
  });
});
