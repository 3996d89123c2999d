import { KeyTemplate, parseKeyTemplate } from './key-template';
import { resolveKeyTemplate } from './resolve-key-template';

const parsed = new Map<string, KeyTemplate>();

/**
 * The key `@Locked(template)` locks for these arguments, for code that takes the same lock by hand
 * (`locks.acquire(lockKey('campaign:<0>', id))`): values are escaped exactly as the decorator
 * escapes them, so a hand-built key can never miss (or hit) the decorator's lock by accident.
 * Throws `LockKeyError` like the decorator does.
 */
export function lockKey(template: string, ...args: unknown[]): string {
  let compiled = parsed.get(template);
  if (!compiled) {
    compiled = parseKeyTemplate(template, 'lockKey()');
    parsed.set(template, compiled);
  }
  return resolveKeyTemplate(compiled, args, 'lockKey()');
}
