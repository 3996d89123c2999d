import type { RedlockNode } from '../../lib/redis/redlock/redlock-node';
import { REDLOCK_SCRIPTS } from '../../lib/redis/redlock/redlock-scripts';

/** One simulated node's lock state: its holder, the key's last fencing token, and its ticket queue. */
export interface SimulatedNodeState {
  holder: string | null;
  fence: number;
  /** token → ticket: the lowest ticket heads the queue. */
  queue: Map<string, number>;
}

/** The Redlock scripts' arguments this model reads (see redlock-scripts.ts). */
const ACQUIRE_TOKEN = 5;
const ACQUIRE_TTL = 6;
const ACQUIRE_TICKET = 7;
/** An acquire with a waiter lease (its 11th argument) takes a place when busy. */
const ACQUIRE_ARGS_WHEN_QUEUING = 11;
const HANDOVER_TOKEN = 4;
const GIVE_BACK_TICKET = 5;

const headOf = (s: SimulatedNodeState): [string, number] | undefined => [...s.queue].sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : 1))[0];

/**
 * The per-node scripts reduced to ownership, queue order and fencing tokens (no leases, no stale
 * places): enough to replay an interleaving exactly. Replies have the scripts' shapes.
 */
function execute(s: SimulatedNodeState, script: unknown, args: readonly unknown[]): unknown {
  const a = args.map(String);
  const handToHead = (): boolean => {
    const head = headOf(s);
    if (!head) return false;
    s.queue.delete(head[0]);
    s.holder = head[0];
    s.fence++;
    return true;
  };
  switch (script) {
    case REDLOCK_SCRIPTS.acquire: {
      const [token, ttl, ticket] = [a[ACQUIRE_TOKEN], Number(a[ACQUIRE_TTL]), Number(a[ACQUIRE_TICKET])];
      if (s.holder === token) {
        s.queue.delete(token);
        return [1, String(s.fence), ttl];
      }
      const head = headOf(s);
      if (s.holder === null && (!head || head[0] === token || ticket < head[1])) {
        s.holder = token;
        s.queue.delete(token);
        s.fence++;
        return [1, String(s.fence), ttl];
      }
      if (a.length >= ACQUIRE_ARGS_WHEN_QUEUING) s.queue.set(token, ticket);
      const position = !s.queue.has(token) ? -1 : headOf(s)?.[0] === token ? 0 : 1;
      return [0, s.holder ? 1_000 : -1, position, String(s.fence), s.holder ?? ''];
    }
    case REDLOCK_SCRIPTS.giveBack: {
      const token = a[HANDOVER_TOKEN];
      if (s.holder === token) s.holder = null;
      s.queue.set(token, Number(a[GIVE_BACK_TICKET]));
      return String(s.fence);
    }
    case REDLOCK_SCRIPTS.release:
    case REDLOCK_SCRIPTS.abandon: {
      const token = a[HANDOVER_TOKEN];
      s.queue.delete(token);
      if (s.holder !== token) return 0;
      if (handToHead()) return script === REDLOCK_SCRIPTS.release ? 2 : 1;
      s.holder = null;
      return 1;
    }
    case REDLOCK_SCRIPTS.raiseFence:
      if (s.holder !== a[2]) return 0;
      s.fence = Math.max(s.fence, Number(a[3]));
      return 1;
    case REDLOCK_SCRIPTS.renew:
      return s.holder === a[1] ? 1 : 0;
    default:
      throw new Error('unexpected script');
  }
}

const nameOf = (script: unknown): string => Object.entries(REDLOCK_SCRIPTS).find(([, v]) => v === script)?.[0] ?? 'other';

/**
 * Three simulated Redlock nodes seen by one client (a RedlockStore under test). Each node runs that
 * client's calls in the order they were sent, one per `step(i)`, so a test decides exactly when each
 * call runs and is answered: a slow node is one the test does not step. `direct` runs another
 * client's call at once (its own connection).
 */
export function simulatedRedlockNodes(initial: () => SimulatedNodeState) {
  const states = [initial(), initial(), initial()];
  const sent: Array<Array<{ name: string; run: () => void }>> = [[], [], []];
  const nodes = states.map(
    (state, i) =>
      ({
        run: (script: unknown, _operation: string, _keys: unknown, args: readonly unknown[], parse?: (raw: unknown) => unknown) =>
          new Promise((resolve, reject) => {
            sent[i].push({
              name: nameOf(script),
              run: () => {
                try {
                  const raw = execute(state, script, args);
                  resolve(parse ? parse(raw) : raw);
                } catch (error) {
                  reject(error);
                }
              },
            });
          }),
      }) as unknown as RedlockNode,
  );
  return {
    nodes,
    states,
    /** Node `i` runs and answers the oldest call the client sent it. */
    step(i: number): void {
      const next = sent[i].shift();
      if (!next) throw new Error(`nothing sent to node ${i}`);
      next.run();
    },
    /** The scripts sent to node `i` and not run yet, oldest first. */
    pending: (i: number): string[] => sent[i].map((c) => c.name),
    direct: (i: number, script: unknown, args: readonly unknown[]): unknown => execute(states[i], script, args),
    /** How many nodes `token` holds. */
    heldBy: (token: string): number => states.filter((s) => s.holder === token).length,
  };
}
