import { existsSync, readdirSync, readFileSync } from 'fs';
import { dirname, join, relative, resolve } from 'path';
import * as entry from '../../lib';

/**
 * What the README and docs/ point at must exist: a link or anchor that a heading's rename broke, a repository file
 * named after it moved, an `npm run` script that is gone, an error class a user would import that the package does
 * not export. None of these fail a build; a user finds them. (The ```ts blocks are compiled by docs-snippets.spec.ts.)
 */
const root = join(__dirname, '..', '..');
const documents = ['README.md', 'CHANGELOG.md', 'CONTRIBUTING.md', ...readdirSync(join(root, 'docs')).map((name) => `docs/${name}`)].filter((name) =>
  name.endsWith('.md'),
);
/** What package.json's "files" ships beside dist/: a link from a shipped document to anything else is dead in node_modules. */
const shipped = (path: string) => path === 'README.md' || path === 'CHANGELOG.md' || path === 'LICENSE' || path.startsWith('docs/');
/** Error classes the documents name that are not this library's (the platform's, BullMQ's). */
const FOREIGN_ERRORS = new Set(['AbortError', 'SuppressedError', 'TypeError', 'UnrecoverableError']);

const read = (document: string) => readFileSync(join(root, document), 'utf8');
/** The prose of a Markdown file: code blocks hold no links, and their `#` lines are no headings. */
const prose = (markdown: string) => markdown.replace(/^ *```[\s\S]*?^ *```$/gm, '');

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const [, heading] of prose(markdown).matchAll(/^#{1,6} (.+)$/gm)) {
    const slug = heading
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

describe('references in the README and docs/', () => {
  it('relative links name a file that exists and, with an anchor, one of its headings', () => {
    const broken: string[] = [];
    for (const document of documents) {
      for (const [, target] of prose(read(document)).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/i.test(target)) continue;
        const [path, anchor] = target.split('#');
        const file = path === '' ? join(root, document) : resolve(dirname(join(root, document)), path);
        const name = relative(root, file);
        if (!existsSync(file)) broken.push(`${document}: ${target} (no such file)`);
        else if (shipped(document) && !shipped(name)) broken.push(`${document}: ${target} (not in the npm package; link to GitHub)`);
        else if (anchor !== undefined && !anchorsOf(readFileSync(file, 'utf8')).has(anchor)) broken.push(`${document}: ${target} (no such heading)`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('repository files they name exist', () => {
    const missing = documents.flatMap((document) =>
      [...read(document).matchAll(/\b(?:lib|test|sample|bench|scripts)\/[\w./*-]*[\w*]/g)]
        .map(([path]) => path)
        // A pattern (`test/e2e/sentinel-*.spec.ts`) names files by a part of their name, which a rename still keeps.
        .filter((path) => !path.includes('*') && !existsSync(join(root, path)))
        .map((path) => `${document}: ${path}`),
    );
    expect(missing).toEqual([]);
  });

  it('npm scripts they name are in package.json', () => {
    const { scripts } = JSON.parse(read('package.json')) as { scripts: Record<string, string> };
    const missing = documents.flatMap((document) =>
      [...read(document).matchAll(/\bnpm run ([\w:-]+)/g)].map(([, script]) => script).filter((script) => !(script in scripts)),
    );
    expect(missing).toEqual([]);
  });

  it('error classes they name are exported by the main entry point, as errors of this library', () => {
    const named = new Set(documents.filter(shipped).flatMap((document) => [...read(document).matchAll(/`(\w+Error)`/g)].map(([, name]) => name)));
    const exported = entry as unknown as Record<string, unknown>;
    const missing = [...named]
      .filter((name) => !FOREIGN_ERRORS.has(name))
      .filter((name) => {
        const value = exported[name];
        return !(typeof value === 'function' && (value === entry.DistributedLockError || value.prototype instanceof entry.DistributedLockError));
      });
    expect(missing).toEqual([]);
    expect(named.size).toBeGreaterThan(FOREIGN_ERRORS.size);
  });
});
