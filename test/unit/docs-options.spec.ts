import { readFileSync } from 'fs';
import { join } from 'path';
import { DistributedLockModule, type LockedOptions } from '../../lib';
import { DEFER_OPTION_KEYS, LOCK_OPTION_KEYS, MODULE_OPTION_KEYS } from '../../lib/options/known-keys';
import { DEFER_DEFAULTS, LOCK_DEFAULTS } from '../../lib/options/lock-defaults';

/**
 * docs/options.md is where the README sends users for "defaults, ranges and what each does". An option the library
 * reads but the table leaves out cannot be looked up there (`deferKey` and `allowOuterWrapper` were missing), and a
 * default the table states differently from lib/options/lock-defaults.ts is believed over the code.
 */
const root = join(__dirname, '..', '..');
const optionsDoc = readFileSync(join(root, 'docs', 'options.md'), 'utf8');
const readme = readFileSync(join(root, 'README.md'), 'utf8');

/** Options only `@Locked` reads; the compile-time check below fails when LockedOptions gains one not listed. */
const LOCKED_ONLY_KEYS = ['deferKey', 'allowOuterWrapper'] as const;
type Unlisted = Exclude<keyof LockedOptions, (typeof LOCK_OPTION_KEYS)[number] | (typeof LOCKED_ONLY_KEYS)[number]>;
const everyLockedOptionListed: [Unlisted] extends [never] ? true : Unlisted = true;

/** The table's rows: option name → default cell, as written. */
function tableRows(markdown: string): Map<string, string> {
  const rows = new Map<string, string>();
  for (const [, name, defaultCell] of markdown.matchAll(/^\| `(\w+)`[^|]*\| ([^|]*) \|/gm)) rows.set(name, defaultCell.trim());
  return rows;
}

/** A default as the table writes it: numbers bare, strings quoted, the rest in code. */
function written(value: unknown): string {
  if (typeof value === 'number') return String(value);
  if (typeof value === 'string') return `\`'${value}'\``;
  if (typeof value === 'boolean') return `\`${value}\``;
  const entries = Object.entries(value as object).map(([key, v]) => `${key}: ${String(v)}`);
  return `\`{ ${entries.join(', ')} }\``;
}

describe('docs/options.md', () => {
  const rows = tableRows(optionsDoc);

  it('has a row for every option the library reads', () => {
    expect(everyLockedOptionListed).toBe(true);
    const options = new Set<string>([...LOCK_OPTION_KEYS, ...MODULE_OPTION_KEYS, ...LOCKED_ONLY_KEYS]);
    expect([...options].filter((name) => !rows.has(name))).toEqual([]);
    expect([...rows.keys()].filter((name) => !options.has(name))).toEqual([]);
  });

  it('states the defaults of lib/options/lock-defaults.ts', () => {
    const stated = Object.keys(LOCK_DEFAULTS).map((name) => [name, rows.get(name)]);
    const actual = Object.entries(LOCK_DEFAULTS).map(([name, value]) => [name, written(value)]);
    expect(stated).toEqual(actual);
    // isGlobal is Nest's extra (distributed-lock.module-definition.ts), not in LOCK_DEFAULTS.
    expect(rows.get('isGlobal')).toBe(written(DistributedLockModule.forRoot({ redis: 'redis://127.0.0.1:6379' }).global));
  });

  it("states the defer option's defaults, field by field", () => {
    const [, fields, defaults] = /`\{ ([^}]+) \}` \(defaults ([^)]+)\)/.exec(optionsDoc) ?? [];
    expect(fields?.split(', ')).toEqual(DEFER_OPTION_KEYS);
    const ms = new Set(['backoff', 'jobLease']);
    const actual = DEFER_OPTION_KEYS.map((key) => `${written(DEFER_DEFAULTS[key])}${ms.has(key) ? ' ms' : ''}`);
    expect(defaults?.split(', ')).toEqual(actual);
  });

  it("agrees with the README's Options paragraph on the defaults it repeats", () => {
    const paragraph = readme.slice(readme.indexOf('### Options'));
    for (const name of ['ttl', 'onBusy', 'waitTimeout'] as const) {
      const [, value] = new RegExp(`\`${name}\` \\(([^)]+)\\)`).exec(paragraph) ?? [];
      expect([name, value]).toEqual([name, written(LOCK_DEFAULTS[name])]);
    }
  });
});
