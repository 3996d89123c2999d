/**
 * `npm run bench:instructions`: user-space instructions redis-server executes per uncontended acquire +
 * release, counted by valgrind's callgrind — the same number on every run whatever else the machine is
 * doing (Redis CPU time in `npm run bench` moves with the shared machine's speed). It shows where the
 * server's work goes: what any scripted acquire costs over a plain SET, what the server-clock fencing
 * token costs, and what the FIFO check and owner-checked release add. A second table counts one
 * contended handover (contended-cycle.ts) in single-Redis and Redlock mode. Kernel time (network
 * syscalls, the same for every variant) is not counted; it is why Redis CPU ratios are smaller than these.
 *
 * Needs valgrind (Debian: `apt-get install valgrind`). One redis-server under callgrind runs every
 * variant, each measured twice between a counter reset and a dump.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import Redis from 'ioredis';
import { LOCK_SCRIPTS } from '../../lib/redis/scripts';
import { freePort } from '../../test/harness/free-port';
import { ephemeralServerArgs } from '../../test/harness/redis-process';
import { renderTable } from '../report/format';
import { CONTENDED_MODES, contendedCycle } from './contended-cycle';

const CYCLES = Number(process.env.INSTRUCTION_CYCLES ?? 2_000);
/** Waiters queued behind the holder in the contended cycle: the bench's 16 workers, less the holder. */
const CONTENDED_WAITERS = 15;
const KEYS = ['lock:{bench:a}', 'lock:{bench:a}:f', 'lock:{bench:a}:q', 'lock:{bench:a}:w'];
const COMPARE_AND_DELETE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;

/** One way to take and give back an uncontended lock; `acquire` undefined means a plain SET NX PX. */
interface Variant {
  name: string;
  what: string;
  acquire?: string;
  release: string;
}

/** An acquire script that runs `steps` between taking the lock and replying with a server-clock token. */
const scriptedAcquire = (before: string, steps: string, token: string): string =>
  `${before} if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then ${steps} return {1, ${token}, ARGV[2]} end return {0}`;
/** The token as the library builds it: the TIME reply's seconds and zero-padded microseconds, as text. */
const CLOCK_TOKEN = `local c = redis.call('TIME') local t = c[1] .. string.sub('00000' .. c[2], -6)`;

/** Each variant adds one step of the library's uncontended cycle to the one before it. */
const VARIANTS: Variant[] = [
  { name: 'raw floor', what: 'SET NX PX, then compare-and-delete script (GET, DEL)', release: COMPARE_AND_DELETE },
  {
    name: 'any scripted acquire',
    what: 'script (SET NX PX), then compare-and-delete script: the least a script acquire costs',
    acquire: scriptedAcquire('', '', '0'),
    release: COMPARE_AND_DELETE,
  },
  {
    name: '+ server-clock token',
    what: 'the same, replying TIME as a token (not kept)',
    acquire: scriptedAcquire('', CLOCK_TOKEN, 't'),
    release: COMPARE_AND_DELETE,
  },
  {
    name: '+ last token kept',
    what: 'GET fence before, SET fence PX 1 h after: the token stays above the last across clock steps',
    acquire: scriptedAcquire(`local last = redis.call('GET', KEYS[2])`, `${CLOCK_TOKEN} redis.call('SET', KEYS[2], t, 'PX', '3600000')`, 't'),
    release: COMPARE_AND_DELETE,
  },
  {
    name: 'ours',
    what: 'the library: acquire script (GET fence and its check, EXISTS queue, SET NX PX, TIME, SET fence), release script (GET, LLEN, DEL)',
    acquire: LOCK_SCRIPTS.acquire.lua,
    release: LOCK_SCRIPTS.release.lua,
  },
];

/** A callgrind dump label: the name without spaces or punctuation. */
const labelOf = (name: string): string => name.replace(/\W+/g, '_');

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function requireValgrind(): void {
  try {
    execFileSync('valgrind', ['--version'], { stdio: 'ignore' });
  } catch {
    throw new Error('valgrind is not installed: apt-get install -y valgrind');
  }
}

async function connect(port: number): Promise<Redis> {
  for (let i = 0; i < 120; i++) {
    const client = new Redis(port, '127.0.0.1', { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.ping();
      return client;
    } catch {
      client.disconnect();
      await sleep(250); // valgrind starts redis-server slowly
    }
  }
  throw new Error(`redis-server under callgrind did not answer on port ${port}`);
}

async function main(): Promise<void> {
  requireValgrind();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ndl-callgrind-'));
  const port = await freePort();
  const server = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      `--callgrind-out-file=${path.join(dir, 'out')}`,
      'redis-server',
      ...ephemeralServerArgs(port, '127.0.0.1', dir),
      '--hz',
      '1',
    ],
    {
      stdio: 'ignore',
    },
  );
  const exited = new Promise<void>((resolve) => server.on('exit', () => resolve()));
  const counters = (command: string[]) => execFileSync('callgrind_control', [...command, String(server.pid)], { stdio: 'ignore' });
  try {
    const client = await connect(port);
    const cycle = new Map<string, (token: string) => Promise<unknown>>();
    for (const v of VARIANTS) {
      const release = (await client.script('LOAD', v.release)) as string;
      const acquire = v.acquire === undefined ? undefined : ((await client.script('LOAD', v.acquire)) as string);
      cycle.set(v.name, async (token) => {
        if (acquire === undefined) await client.set(KEYS[0], token, 'PX', 30_000, 'NX');
        else await client.evalsha(acquire, KEYS.length, ...KEYS, token, '30000');
        if ((await client.evalsha(release, KEYS.length, ...KEYS, token, 'lock:waiters:')) === 0)
          throw new Error(`${v.name}: release found the lock not ours`);
      });
    }
    const token = () => `a1b2c3d4.30000.${randomBytes(16).toString('hex')}`;
    const run = async (name: string, n: number) => {
      for (let i = 0; i < n; i++) await cycle.get(name)!(token());
    };
    const contended = new Map<string, () => Promise<void>>();
    for (const mode of CONTENDED_MODES) contended.set(mode.name, await contendedCycle(client, mode, CONTENDED_WAITERS));
    const runContended = async (name: string, n: number) => {
      for (let i = 0; i < n; i++) await contended.get(name)!();
    };
    for (const v of VARIANTS) await run(v.name, 200); // warm-up: scripts compiled, allocator warm
    for (const mode of CONTENDED_MODES) await runContended(mode.name, 200);
    const measure = async (name: string, round: number, runIt: (name: string, n: number) => Promise<void>) => {
      counters(['-z']);
      await runIt(name, CYCLES);
      counters(['-d', `${labelOf(name)}.${round}`]);
    };
    for (let round = 0; round < 2; round++) {
      for (const v of VARIANTS) await measure(v.name, round, run);
      for (const mode of CONTENDED_MODES) await measure(mode.name, round, runContended);
    }
    await client.shutdown('NOSAVE').catch(() => undefined);
    client.disconnect();
    await exited;
    const perCycle = new Map<string, number[]>();
    const names = [...VARIANTS.map((v) => v.name), ...CONTENDED_MODES.map((m) => m.name)];
    for (const file of fs.readdirSync(dir).filter((f) => f.startsWith('out.'))) {
      const text = fs.readFileSync(path.join(dir, file), 'utf8');
      const label = /^desc: Trigger: (?:Client Request: |dump )(\S+)$/m.exec(text)?.[1];
      const total = /^(?:summary|totals): (\d+)$/m.exec(text)?.[1];
      const name = names.find((n) => label?.startsWith(`${labelOf(n)}.`));
      if (name && total) perCycle.set(name, [...(perCycle.get(name) ?? []), Number(total) / CYCLES]);
    }
    const floor = Math.min(...(perCycle.get(VARIANTS[0].name) ?? [NaN]));
    const rowOf = (name: string, what: string) => {
      const counts = perCycle.get(name) ?? [];
      const best = Math.min(...counts);
      return [
        name,
        Math.round(best).toLocaleString('en-US'),
        `${(best / floor).toFixed(2)}×`,
        counts.map((c) => Math.round(c).toLocaleString('en-US')).join(' / '),
        what,
      ];
    };
    const rows = VARIANTS.map((v) => rowOf(v.name, v.what));
    const contendedRows = CONTENDED_MODES.map((m) => rowOf(m.name, m.what));
    process.stdout.write(
      `redis-server user-space instructions per uncontended acquire + release (callgrind, ${CYCLES} cycles per measurement, two measurements each)\n\n`,
    );
    process.stdout.write(`${renderTable([['variant', 'instructions per cycle', '÷ raw floor', 'both measurements', 'what it runs'], ...rows])}\n`);
    process.stdout.write(
      `\nper contended handover (${CONTENDED_WAITERS} waiters queued: the holder's release hands the lock to the first, the releaser queues again at once), against the raw floor's uncontended cycle (a perfect handover: the next holder's SET NX, the last one's compare-and-delete)\n\n`,
    );
    process.stdout.write(
      `${renderTable([['mode', 'instructions per handover', '÷ raw floor', 'both measurements', 'what it runs'], ...contendedRows])}\n`,
    );
  } finally {
    if (server.exitCode === null) server.kill('SIGKILL');
    await exited;
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error)?.stack ?? String(error)}\n`);
  process.exit(1);
});
