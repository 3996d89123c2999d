import { describeValue } from '../errors/describe-value';
import { LockOptionsError } from '../errors/lock-options.error';
import { loneSurrogateIn } from '../keys/lone-surrogate';

/**
 * `keyPrefix` starts every Redis name the module writes, so it must leave the choice of the Cluster
 * slot to the lock's own hash tag (lib/redis/lock-redis-keys.ts). Redis hashes the text between
 * the *first* `{` and the next `}`, so a brace in the prefix would either put every lock in one
 * slot (`{app}:`), or, with an empty tag (`lock{}:`), hash each name of one lock whole and scatter
 * them over several slots (CROSSSLOT on every call). A lone `{` or `}` is harmless today but one
 * edit away from either, so braces are refused outright. And it must be storable as it is: no
 * lone surrogate (see lib/keys/lone-surrogate.ts).
 */
export function resolveKeyPrefix(value: unknown): string {
  if (typeof value !== 'string') throw new LockOptionsError('keyPrefix', `expected a string, got ${describeValue(value)}.`);
  const brace = /[{}]/.exec(value);
  if (brace) {
    throw new LockOptionsError(
      'keyPrefix',
      `${JSON.stringify(value)} contains "${brace[0]}": Redis Cluster picks a key's slot from its first {…} hash tag, ` +
        `so a brace in the prefix would decide the slot of every lock (all on one node) or split one lock's keys across slots. ` +
        `Each lock already has its own hash tag; use a prefix without braces, e.g. "lock:".`,
    );
  }
  const surrogate = loneSurrogateIn(value);
  if (surrogate) {
    throw new LockOptionsError(
      'keyPrefix',
      `${JSON.stringify(value)} contains a lone UTF-16 surrogate (${surrogate}). Redis stores names as UTF-8, where every ` +
        `lone surrogate becomes U+FFFD, so prefixes that differ only there would be one namespace. Use well-formed text.`,
    );
  }
  return value;
}
