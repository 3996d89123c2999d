/** Longest piece of user text an error message quotes; longer text is cut with "…". */
const QUOTED_TEXT_MAX_CHARS = 60;

/** The text as an error message shows it: quoted, with lone surrogates and control characters escaped, long text cut. */
export function quoted(text: string): string {
  if (text.length <= QUOTED_TEXT_MAX_CHARS) return JSON.stringify(text);
  // Cut between the halves of a pair would show a lone surrogate the text does not have.
  const end = /[\ud800-\udbff]/.test(text[QUOTED_TEXT_MAX_CHARS - 1]) ? QUOTED_TEXT_MAX_CHARS - 1 : QUOTED_TEXT_MAX_CHARS;
  return JSON.stringify(`${text.slice(0, end)}…`);
}

/** A value as an error message names it (option and key errors alike): its type, and its text when it is short enough to help. */
export function describeValue(value: unknown): string {
  try {
    return describeKnownValue(value);
  } catch {
    // A revoked Proxy, or a constructor getter that throws: the error being built must still be ours.
    return 'a value that cannot be inspected';
  }
}

function describeKnownValue(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (typeof value === 'string') return value.length === 0 ? 'an empty string' : `the string ${quoted(value)}`;
  if (typeof value === 'number') return Number.isNaN(value) ? 'NaN' : `the number ${value}`;
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return `an object (${value.constructor?.name ?? 'null prototype'})`;
  return `a ${typeof value}`;
}
