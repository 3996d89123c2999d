import { LockKeyError } from '../errors/lock-key.error';
import { quoted } from '../errors/describe-value';
import { LONE_SURROGATE_ADVICE, loneSurrogateIn } from './lone-surrogate';
import { MAX_KEY_BYTES } from './key-limits';

/**
 * Refuses key text Redis cannot keep as given: a lone UTF-16 surrogate, or more than MAX_KEY_BYTES.
 * One check for both places a whole key is checked: normalizeKeys (every key any caller passes) and a
 * `@Locked` key function's result, checked while the call's keys are resolved so that a refusal is
 * that call's own key error (a 400 for a route handler's input) rather than the engine's (a 500).
 * `subject` begins the message ("Lock key", or the method's key function); `outcome` ends it.
 */
export function assertKeyText(key: string, subject: string, outcome = ''): void {
  const surrogate = loneSurrogateIn(key);
  if (surrogate) {
    throw new LockKeyError(`${subject} ${quoted(key)} contains a lone UTF-16 surrogate (${surrogate}). ${LONE_SURROGATE_ADVICE}${outcome}`);
  }
  // A UTF-16 length within a third of the limit cannot exceed it in UTF-8 bytes: skip the count.
  if (key.length * 3 <= MAX_KEY_BYTES) return;
  const bytes = Buffer.byteLength(key, 'utf8');
  if (bytes > MAX_KEY_BYTES) {
    throw new LockKeyError(
      `${subject} ${quoted(key)} is ${bytes} bytes long; the limit is ${MAX_KEY_BYTES}. Lock on an id rather than on a payload.${outcome}`,
    );
  }
}
