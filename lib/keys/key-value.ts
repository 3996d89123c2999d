import { describeValue } from '../errors/describe-value';
import { LockKeyError } from '../errors/lock-key.error';
import type { KeyPlaceholder } from './key-template';
import { LONE_SURROGATE_ADVICE, loneSurrogateIn } from './lone-surrogate';

/**
 * Turns a resolved placeholder value into key text, or throws `LockKeyError` naming the placeholder
 * and the value's type. Only values that identify something are accepted: non-empty strings, finite
 * numbers, bigints and booleans. `undefined`/`null` (a missing field), `''`, `NaN`/`Infinity`,
 * strings with a lone UTF-16 surrogate (see lone-surrogate.ts),
 * objects and arrays (`[object Object]`), functions and symbols would all silently make unrelated
 * calls share one lock (`seat:undefined`), so they are refused before any Redis command.
 *
 * Values are compared by their text: `42` and `'42'` name the same resource, on purpose (a route
 * parameter arrives as a string, a service passes a number).
 */
export function keyValueText(value: unknown, placeholder: KeyPlaceholder, where: string, note = ''): string {
  switch (typeof value) {
    case 'string': {
      if (value.length === 0) break;
      const surrogate = loneSurrogateIn(value);
      if (surrogate) {
        throw new LockKeyError(
          `${where}: placeholder ${placeholder.source} resolved to a string with a lone UTF-16 surrogate (${surrogate}). ` +
            `${LONE_SURROGATE_ADVICE} The method was not run.`,
        );
      }
      return value;
    }
    case 'number':
      if (Number.isFinite(value)) return String(value);
      break;
    case 'bigint':
    case 'boolean':
      return String(value);
  }
  throw new LockKeyError(
    `${where}: placeholder ${placeholder.source} resolved to ${describeValue(value)}${note}; a lock key part must be a non-empty string, ` +
      `a finite number, a bigint or a boolean. The method was not run.`,
  );
}

/**
 * Escaping of resolved values: `%` becomes `%25` and `:` becomes `%3A` (percent-encoding of exactly
 * the escape character and the separator). The result never contains `:`, so a value cannot forge a
 * separator, and the encoding is reversible, so two different values never escape to the same text:
 * with `'x:<0>:<1>'`, `('a:b', 'c')` gives `x:a%3Ab:c` and `('a', 'b:c')` gives `x:a:b%3Ac`.
 */
export function escapeKeyValue(text: string): string {
  return text.replace(/[%:]/g, (ch) => (ch === '%' ? '%25' : '%3A'));
}
