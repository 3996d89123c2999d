/**
 * Redis keeps keys as bytes and ioredis sends strings as UTF-8, where a lone UTF-16 surrogate (half
 * of a pair, e.g. from text cut in the middle of an emoji or decoded wrongly) has no encoding:
 * it is written as U+FFFD. `user:\ud800` and `user:\udfff` would then be one key in Redis, and one
 * caller told "busy" by another's lock. Such text is refused wherever key text is accepted.
 *
 * A `u`-flag regex sees a valid pair as one code point and only a lone half as `\p{Cs}`
 * (`String.prototype.isWellFormed` would do, but Node 18 lacks it).
 */
const LONE_SURROGATE = /\p{Cs}/u;

/** Where the first lone surrogate of `text` is, e.g. `\ud800 at index 5`; undefined when the text is well-formed. */
export function loneSurrogateIn(text: string): string | undefined {
  const match = LONE_SURROGATE.exec(text);
  if (!match) return undefined;
  return `\\u${match[0].charCodeAt(0).toString(16)} at index ${match.index}`;
}

/** What is wrong with such text, and what to do; appended to every error about it. */
export const LONE_SURROGATE_ADVICE =
  'Redis stores keys as UTF-8, where every lone surrogate becomes U+FFFD, so this key would share a lock with every key ' +
  'that differs from it only there. Use well-formed text: fix the decoding or slicing that produced it, or lock on an id.';
