import { LockKeyError } from '../errors/lock-key.error';
import { KeyTemplate, parseKeyTemplate } from './key-template';
import { resolveKeyTemplate } from './resolve-key-template';

/** Templates are usually a handful of constants; one built per call (an id inside it) must not grow this forever. */
const PARSED_TEMPLATES_MAX = 1_000;
/** @internal Parsed templates, emptied whenever it reaches PARSED_TEMPLATES_MAX (parsing again is cheap). */
export const parsedTemplates = new Map<string, KeyTemplate>();

/**
 * The key `@Locked(template)` locks for these arguments, for code that takes the same lock by hand
 * (`locks.acquire(lockKey('campaign:<0>', id))`): values are escaped exactly as the decorator
 * escapes them, so a hand-built key can never miss (or hit) the decorator's lock by accident.
 * Throws `LockKeyError` like the decorator does.
 */
export function lockKey(template: string, ...args: unknown[]): string {
  try {
    let compiled = parsedTemplates.get(template);
    if (!compiled) {
      compiled = parseKeyTemplate(template, 'lockKey()');
      if (parsedTemplates.size >= PARSED_TEMPLATES_MAX) parsedTemplates.clear();
      parsedTemplates.set(template, compiled);
    }
    return resolveKeyTemplate(compiled, args, 'lockKey()');
  } catch (error) {
    // The parser and resolver speak for @Locked, whose method then does not run; lockKey() runs no method.
    if (error instanceof LockKeyError) throw new LockKeyError(error.message.replace(/ The method was not run\.$/, ''));
    throw error;
  }
}
