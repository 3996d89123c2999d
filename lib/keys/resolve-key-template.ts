import { describeThrown, isHttpException } from '../errors/thrown-value';
import { LockKeyError } from '../errors/lock-key.error';
import { MAX_KEY_BYTES } from './key-limits';
import { describeValue, quoted } from '../errors/describe-value';
import { escapeKeyValue, keyValueText } from './key-value';
import type { KeyPlaceholder, KeyTemplate } from './key-template';

/**
 * Builds the key of one call. Deterministic and injective for a given template (see
 * `parseKeyTemplate` and `escapeKeyValue`). A key longer than the core's limit (1024 UTF-8 bytes) is
 * rejected here with the template named, never hashed or truncated: a key is meant to be an id,
 * and a readable key is what an operator looks for in Redis.
 */
export function resolveKeyTemplate(template: KeyTemplate, args: readonly unknown[], where: string): string {
  let key = template.literals[0];
  template.placeholders.forEach((placeholder, i) => {
    const value = valueAt(placeholder, args, where);
    key += escapeKeyValue(keyValueText(value, placeholder, where, notPassed(placeholder, args))) + template.literals[i + 1];
  });
  const bytes = Buffer.byteLength(key, 'utf8');
  if (bytes > MAX_KEY_BYTES) {
    throw new LockKeyError(
      `${where}: key template "${template.source}" resolved to a key of ${bytes} bytes (${quoted(key)}); ` +
        `the limit is ${MAX_KEY_BYTES}. Lock on an id rather than on a payload. The method was not run.`,
    );
  }
  return key;
}

function valueAt(placeholder: KeyPlaceholder, args: readonly unknown[], where: string): unknown {
  let value: unknown = args[placeholder.arg];
  let walked = `<${placeholder.arg}`;
  for (const name of placeholder.path) {
    if (value === null || value === undefined) {
      throw new LockKeyError(
        `${where}: placeholder ${placeholder.source} cannot be resolved: ${walked}> is ${describeValue(value)}` +
          `${walked === `<${placeholder.arg}` ? notPassed(placeholder, args) : ''}, which has no property "${name}". The method was not run.`,
      );
    }
    try {
      value = (value as Record<string, unknown>)[name];
    } catch (error) {
      // A getter (or Proxy) that throws is a key that cannot be built, like a missing property: a LockKeyError
      // (400 over HTTP), not the getter's own error escaping as a 500; an HTTP exception is the getter's own answer.
      if (isHttpException(error)) throw error;
      throw new LockKeyError(
        `${where}: placeholder ${placeholder.source} cannot be resolved: reading "${name}" of ${walked}> threw ` +
          `${describeThrown(error)}. The method was not run.`,
        { cause: error },
      );
    }
    walked += `.${name}`;
  }
  return value;
}

/**
 * Why an argument is undefined when the call did not pass it: a template reads the arguments as passed, so the
 * value of a default parameter (`b = 'all'`) is not seen. Empty when the call passed it.
 */
function notPassed(placeholder: KeyPlaceholder, args: readonly unknown[]): string {
  if (placeholder.arg < args.length) return '';
  return (
    ` (the call passed ${args.length} argument(s): a key template reads the arguments as passed, so a default parameter's ` +
    `value is not seen; pass the argument, or lock with a key function that applies the default)`
  );
}
