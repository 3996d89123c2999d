/**
 * One contended handover, replayed on one server with the library's own scripts and arguments: the
 * holder's release hands the lock to the head of a queue of `waiters`, and the releaser asks again at
 * once, finds the lock busy and queues behind the others (what each worker of the bench's contended
 * run does). The cycle is the same every time, so callgrind counts the same instructions per cycle
 * whatever the machine does; `npm run bench`'s Redis CPU per contended acquisition is this plus the
 * kernel's share (sockets, the message to the waiter's subscriber), which is not counted here.
 */
import { randomBytes } from 'node:crypto';
import type Redis from 'ioredis';
import { fenceProposal } from '../../lib/redis/redlock/fence-proposal';
import { REDLOCK_SCRIPTS } from '../../lib/redis/redlock/redlock-scripts';
import { LOCK_SCRIPTS } from '../../lib/redis/scripts';
import { queueKeysExpiry } from '../../lib/redis/scripts/lua-functions';

/** Long enough that no place or handed lease lapses while the server runs under callgrind. */
const WAITER_LEASE = '600000';
const QUEUE_EXPIRY = queueKeysExpiry(Number(WAITER_LEASE));
const TTL = '30000';

/** How one mode's release and queued attempt are called (argument layouts of redis-lock-store.ts and redlock-store.ts). */
interface ModeCalls {
  name: string;
  what: string;
  acquire(client: Redis, token: string): Promise<unknown>;
  release(client: Redis, token: string): Promise<unknown>;
}

const SINGLE_KEYS = ['lock:{contended}', 'lock:{contended}:f', 'lock:{contended}:q', 'lock:{contended}:w'];
const REDLOCK_KEYS = ['lock:{contended-rl}', 'lock:{contended-rl}:f', 'lock:{contended-rl}:q', 'lock:{contended-rl}:w', 'lock:redlock:node-since'];

let ticket = Date.now() * 1_000;

export const CONTENDED_MODES: ModeCalls[] = [
  {
    name: 'single Redis',
    what: 'release: GET, LLEN, then the handover (last token, TIME, LPOP, its place, SET lock and token, PUBLISH); the releaser queues: last token, EXISTS, PTTL, TIME, ZADD, RPUSH, 2 PEXPIRE, lapsed places',
    acquire: (client, token) => client.evalsha(LOCK_SCRIPTS.acquire.sha, SINGLE_KEYS.length, ...SINGLE_KEYS, token, TTL, WAITER_LEASE, QUEUE_EXPIRY),
    release: (client, token) => client.evalsha(LOCK_SCRIPTS.release.sha, SINGLE_KEYS.length, ...SINGLE_KEYS, token, 'lock:waiters:'),
  },
  {
    name: 'one Redlock node',
    what: 'the same on one node of the Redlock mode (ticket queue, nodeRecoveryDelay 0): release hands over by ticket order; the releaser queues with a new ticket',
    acquire: (client, token) =>
      client.evalsha(
        REDLOCK_SCRIPTS.acquire.sha,
        REDLOCK_KEYS.length,
        ...REDLOCK_KEYS,
        token,
        TTL,
        String(ticket++),
        '0',
        fenceProposal(),
        WAITER_LEASE,
        QUEUE_EXPIRY,
      ),
    release: (client, token) =>
      client.evalsha(REDLOCK_SCRIPTS.release.sha, REDLOCK_KEYS.length, ...REDLOCK_KEYS, token, 'lock:waiters:', fenceProposal(), '0'),
  },
];

/** A waiter token as the library makes them: `<service>.<ttl>.<random>` (the handover reads both). */
const tokenOf = (service: string): string => `${service}.${TTL}.${randomBytes(16).toString('hex')}`;

/**
 * Loads the scripts, takes the lock and queues `waiters` behind it; returns one cycle (release to the
 * head, the releaser queues again), which throws if the server answered anything but that.
 */
export async function contendedCycle(client: Redis, mode: ModeCalls, waiters: number): Promise<() => Promise<void>> {
  await client.script('LOAD', LOCK_SCRIPTS.acquire.lua);
  await client.script('LOAD', LOCK_SCRIPTS.release.lua);
  await client.script('LOAD', REDLOCK_SCRIPTS.acquire.lua);
  await client.script('LOAD', REDLOCK_SCRIPTS.release.lua);
  let holder = tokenOf('holder');
  const first = (await mode.acquire(client, holder)) as unknown[];
  if (first[0] !== 1) throw new Error(`${mode.name}: the first acquire found the lock busy`);
  const queue: string[] = [];
  for (let i = 0; i < waiters; i++) {
    const token = tokenOf(`waiter${i}`);
    if (((await mode.acquire(client, token)) as unknown[])[0] !== 0) throw new Error(`${mode.name}: waiter ${i} was not queued`);
    queue.push(token);
  }
  return async () => {
    const outcome = await mode.release(client, holder);
    if (outcome !== 2) throw new Error(`${mode.name}: the release answered ${String(outcome)}, not "handed over"`);
    const again = tokenOf(holder.split('.')[0]);
    if (((await mode.acquire(client, again)) as unknown[])[0] !== 0) throw new Error(`${mode.name}: the releaser was not queued`);
    queue.push(again);
    holder = queue.shift()!;
  };
}
