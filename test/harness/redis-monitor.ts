/**
 * What Redis itself ran, seen through MONITOR: renewals counted (and timed) on the server, not by
 * the client that sends them. Shared by the watchdog suite and the clock-jump suite (T10).
 */
import { createHash } from 'crypto';
import { RENEW_SCRIPT } from '../../lib/redis/scripts/renew.script';
import type { RedisProcess } from './redis-process';

const RENEW_SHA = createHash('sha1').update(RENEW_SCRIPT).digest('hex');

export interface Seen {
  /** Server time, ms. */
  at: number;
  args: string[];
  source: string;
}

/** Records every command Redis executes (including those run inside scripts, source "lua"). */
export async function startMonitor(redis: RedisProcess): Promise<{ seen: Seen[]; stop: () => void }> {
  const seen: Seen[] = [];
  const monitor = await redis.client().monitor();
  monitor.on('error', () => undefined);
  monitor.on('monitor', (time: string, args: string[], source: string) => seen.push({ at: Number(time) * 1000, args, source }));
  return { seen, stop: () => monitor.disconnect() };
}

/** The renew script, by SHA or (first use on a connection: ioredis falls back to EVAL) by text; args[3] is its key. */
export const isRenewScript = (c: Seen): boolean =>
  (c.args[0].toLowerCase() === 'evalsha' && c.args[1] === RENEW_SHA) || (c.args[0].toLowerCase() === 'eval' && unrepr(c.args[1]) === RENEW_SCRIPT);

/** MONITOR quotes arguments C-style: a newline arrives as backslash + n, a quote as backslash + quote. */
const unrepr = (text: string): string => text.replace(/\\(["\\nrt])/g, (_, ch: string) => ({ n: '\n', r: '\r', t: '\t' })[ch] ?? ch);

/** Anything that could extend `lockKey`: the renew script naming it, or a PEXPIRE of it (run inside any script). */
export const isRenewalOf =
  (lockKey: string) =>
  (c: Seen): boolean =>
    (isRenewScript(c) && c.args[3] === lockKey) || (c.args[0].toLowerCase() === 'pexpire' && c.args[1] === lockKey);
