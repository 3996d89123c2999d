import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import * as ts from 'typescript';

/**
 * The folders of lib/ form layers (errors and time at the bottom, then keys, options, redis, core,
 * locked, and the Nest façade at the root): no folder may reach back to one that imports it, not
 * even through a type-only import. A cycle is where a layout stops showing the architecture.
 */
const LIB = resolve(__dirname, '../../lib');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

function folderOf(file: string): string {
  const parts = relative(LIB, file).split(sep);
  return parts.length > 1 ? parts[0] : '(root)';
}

/** Relative imports and re-exports of `file`, type-only ones included, resolved to files of lib/. */
function importsOf(file: string, files: ReadonlySet<string>): string[] {
  const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
  return info.importedFiles
    .map((f) => f.fileName)
    .filter((name) => name.startsWith('.'))
    .map((name) => resolve(dirname(file), name))
    .map((base) => [`${base}.ts`, join(base, 'index.ts')].find((candidate) => files.has(candidate)))
    .filter((f): f is string => f !== undefined);
}

/** Folder-level edges, each with one file-level import that makes it. */
function folderEdges(): Map<string, Map<string, string>> {
  const files = new Set(sourceFiles(LIB));
  const edges = new Map<string, Map<string, string>>();
  for (const file of files) {
    for (const target of importsOf(file, files)) {
      const [from, to] = [folderOf(file), folderOf(target)];
      if (from === to) continue;
      if (!edges.has(from)) edges.set(from, new Map());
      edges.get(from)!.set(to, `${relative(LIB, file)} -> ${relative(LIB, target)}`);
    }
  }
  return edges;
}

function reaches(edges: Map<string, Map<string, string>>, from: string, to: string): boolean {
  const seen = new Set([from]);
  const stack = [from];
  while (stack.length) {
    for (const next of edges.get(stack.pop()!)?.keys() ?? []) {
      if (next === to) return true;
      if (seen.has(next)) continue;
      seen.add(next);
      stack.push(next);
    }
  }
  return false;
}

describe('lib/ import graph', () => {
  it('sees the folders and their imports (the check below has something to check)', () => {
    const edges = folderEdges();
    expect([...edges.keys()].sort()).toEqual(expect.arrayContaining(['(root)', 'core', 'locked', 'options', 'redis']));
    expect(edges.get('redis')?.has('core')).toBe(true);
    expect(edges.get('locked')?.has('core')).toBe(true);
  });

  it('keeps the engine free of Redis: core/ runs on any backend (lib/redis, lib/testing)', () => {
    expect([...(folderEdges().get('core')?.keys() ?? [])].sort()).not.toContain('redis');
  });

  it('has no cycle between folders, type-only imports included', () => {
    const edges = folderEdges();
    const backEdges = [...edges].flatMap(([from, targets]) =>
      [...targets].filter(([to]) => reaches(edges, to, from)).map(([to, example]) => `${from} -> ${to} (${example})`),
    );
    expect(backEdges).toEqual([]);
  });
});
