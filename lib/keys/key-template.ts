import { LockKeyError } from '../errors/lock-key.error';
import { LONE_SURROGATE_ADVICE, loneSurrogateIn } from './lone-surrogate';

/** One `<N>` / `<N.path.to.field>` placeholder of a key template. */
export interface KeyPlaceholder {
  /** The placeholder as written, e.g. `<1.user.id>` (used in error messages). */
  readonly source: string;
  /** Argument index N. */
  readonly arg: number;
  /** Property names (array indexes are names too) followed from the argument. */
  readonly path: readonly string[];
}

/** A template parsed once at decoration time: literal text and placeholders, alternating. */
export interface KeyTemplate {
  readonly source: string;
  /** `literals.length === placeholders.length + 1`; the key is literals[0] value0 literals[1] value1 … */
  readonly literals: readonly string[];
  readonly placeholders: readonly KeyPlaceholder[];
}

/** The separator between key parts; values must not be able to forge it (see `escapeKeyValue`). */
export const KEY_SEPARATOR = ':';

const PLACEHOLDER_BODY = /^(0|[1-9]\d*)((?:\.(?:[A-Za-z_$][\w$]*|\d+))*)$/;

/**
 * Parses `'coupon:<0>:<1.userId>'`. `<` and `>` are reserved: a stray one is a syntax error rather
 * than literal text, because a typo there would otherwise silently lock on a constant key.
 *
 * Two placeholders must be separated by literal text containing `:`. That is what makes keys
 * injective: resolved values never contain a bare `:` (it is escaped), so the first `:` after a value
 * marks where that value ends. `<0><1>` or `<0>-<1>` would let `('ab','c')` and `('a','bc')` collide.
 *
 * Throws `LockKeyError` (prefixed with `where`, e.g. `@Locked on Svc.method`) for every defect.
 */
export function parseKeyTemplate(template: unknown, where: string): KeyTemplate {
  if (typeof template !== 'string') {
    throw new LockKeyError(`${where}: a key template must be a string, got ${template === null ? 'null' : typeof template}.`);
  }
  if (template.length === 0) {
    throw new LockKeyError(`${where}: the key template is empty; an empty key would make unrelated calls share one lock.`);
  }
  const surrogate = loneSurrogateIn(template);
  if (surrogate) {
    throw new LockKeyError(
      `${where}: key template ${JSON.stringify(template)} contains a lone UTF-16 surrogate (${surrogate}). ${LONE_SURROGATE_ADVICE}`,
    );
  }
  const literals: string[] = [];
  const placeholders: KeyPlaceholder[] = [];
  let literal = '';
  let i = 0;
  while (i < template.length) {
    const ch = template[i];
    if (ch === '>') throw syntax(where, template, i, `unmatched ">"`);
    if (ch !== '<') {
      literal += ch;
      i++;
      continue;
    }
    const end = template.indexOf('>', i + 1);
    const nextOpen = template.indexOf('<', i + 1);
    if (end < 0 || (nextOpen >= 0 && nextOpen < end)) throw syntax(where, template, i, `"<" is not closed by ">"`);
    const body = template.slice(i + 1, end);
    const match = PLACEHOLDER_BODY.exec(body);
    if (!match) {
      throw syntax(where, template, i, `"<${body}>" is not a placeholder; write <N> or <N.path.to.field> with N an argument index (0, 1, …)`);
    }
    if (placeholders.length > 0 && !literal.includes(KEY_SEPARATOR)) {
      const previous = placeholders[placeholders.length - 1].source;
      throw new LockKeyError(
        `${where}: in key template "${template}", ${previous} and <${body}> must be separated by text containing "${KEY_SEPARATOR}" ` +
          `(e.g. "${previous}${KEY_SEPARATOR}<${body}>"), otherwise different arguments could produce the same key.`,
      );
    }
    literals.push(literal);
    literal = '';
    placeholders.push({ source: `<${body}>`, arg: Number(match[1]), path: match[2] ? match[2].slice(1).split('.') : [] });
    i = end + 1;
  }
  literals.push(literal);
  return { source: template, literals, placeholders };
}

function syntax(where: string, template: string, at: number, what: string): LockKeyError {
  return new LockKeyError(`${where}: syntax error in key template "${template}" at position ${at}: ${what}.`);
}
