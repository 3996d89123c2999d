import { LockOptionsError } from '../errors/lock-options.error';
import { editDistance } from './edit-distance';

/** Shortest names compared by edits: between shorter ones ('db', 'id') two edits are most of the name, so a match is chance. */
const MIN_EDITED_NAME_LENGTH = 3;
const MAX_EDITS = 2;

/**
 * The name in `known` that `key` (not one of them) is most likely a slip of: the same but for case, or, when both
 * are at least `minEditedLength` characters long, within 2 edits (a swap of two adjacent characters is one).
 * Refusing a name takes the default (3); a suggestion for a name refused anyway may take 0.
 */
export function nearMissOf(key: string, known: readonly string[], minEditedLength = MIN_EDITED_NAME_LENGTH): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const name of known) {
    const sameButCase = name.toLowerCase() === key.toLowerCase();
    if (!sameButCase && Math.min(name.length, key.length) < minEditedLength) continue;
    const distance = sameButCase ? 0 : editDistance(name, key, MAX_EDITS);
    if (distance <= MAX_EDITS && (!best || distance < best.distance)) best = { name, distance };
  }
  return best?.name;
}

/**
 * Refuses the keys of options for ioredis that are a near miss of a name it reads (`known`): it ignores names it does
 * not know, so a slip (`prot`, `Port`) left that option at its default without a word. Other unknown names pass: a
 * later ioredis may read names the list does not have yet. `whose`: what the names are, and `defaults`: what a left-out
 * option means where that matters, both for the message.
 */
export function assertNoNearMissKeys(
  where: string,
  options: object,
  known: readonly string[],
  whose: string,
  defaults: Readonly<Record<string, string>> = {},
): void {
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue;
    const near = nearMissOf(key, known);
    if (near === undefined) continue;
    const meaning = Object.hasOwn(defaults, near) ? ` (${defaults[near]})` : '';
    throw new LockOptionsError(
      `${where}.${key}`,
      `is not ${whose}: ioredis ignores a name it does not know, so '${near}' would keep its default without a word${meaning}. ` +
        `Did you mean '${near}'? Rename it, or remove it.`,
    );
  }
}
