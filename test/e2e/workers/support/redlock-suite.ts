import type Redis from 'ioredis';
import type { LockService } from '../../../../lib';
import { RedlockNodes } from '../../../harness/redlock-nodes';
import { UnhandledRejections } from './fault-helpers';
import { pollUntil } from './timing';

/** What a Redlock fault case works with. */
export interface RedlockCase {
  /** Three nodes, each also reachable through its own proxy, started once for the suite. */
  nodes: RedlockNodes;
  /** Direct clients, one per node, for reading the keys. */
  probes: Redis[];
  /** The case's own lock key: no case sees another's state on a node. */
  key: string;
  /** Services the case started: closed after it. */
  readonly services: LockService[];
}

/**
 * The lifecycle of a Redlock fault suite, registered on the calling `describe`: three nodes for the whole suite, a
 * fresh key per case; after each case its services close, `afterCase` runs (e.g. close the case's own clients), every
 * node is healed (running, thawed, its proxy passing) and read through again, and no rejection went unhandled.
 */
export function redlockSuite(afterCase?: () => Promise<unknown>): RedlockCase {
  const unhandled = new UnhandledRejections();
  const current = { services: [] as LockService[] } as RedlockCase;
  let cases = 0;
  beforeAll(async () => {
    unhandled.start();
    current.nodes = await RedlockNodes.start(3);
    current.probes = current.nodes.clients();
  });
  beforeEach(() => {
    current.key = `order:${++cases}`;
  });
  afterEach(async () => {
    await Promise.all(current.services.splice(0).map((s) => s.close()));
    await afterCase?.();
    await current.nodes.heal();
    // The next case reads through them at once.
    expect(await pollUntil(() => current.probes.every((p) => p.status === 'ready'), 5_000)).toBe(true);
    expect(unhandled.seen).toEqual([]);
  });
  afterAll(async () => {
    await current.nodes.stop();
    unhandled.stop();
  });
  return current;
}
