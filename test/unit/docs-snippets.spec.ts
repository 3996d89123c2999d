import { readdirSync, readFileSync } from 'fs';
import { join } from 'path';
import * as ts from 'typescript';

/**
 * Users paste the ```ts blocks of the README and of docs/ (the user documents) into their code, so each must
 * compile against the API as exported. Each block is compiled as written, with only what a user's own file
 * would add around it: the declarations it leaves to the reader (`ClaimDto`, a store) and a class or function
 * around a fragment. The package name is read as lib/. Lines that docs/locked.md marks `// error` must fail to
 * compile (they get an `@ts-expect-error`, and one that finds no error is itself a diagnostic, TS2578).
 * A new block fails here until it is given its surroundings below.
 */
const root = join(__dirname, '..', '..');

interface Surroundings {
  /** Declarations the block assumes, put after its imports. */
  prelude?: string;
  /** Turns the block's code (its imports taken out) into what a user's file would hold. */
  wrap?: (code: string) => string;
}

/** Writes each line of docs/locked.md's Types block as its own class; a line commented `// error` must not compile. */
const typesBlock = (code: string): string =>
  code
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line, i) => {
      const method = line.replace(/\{ … \}/g, '{ return undefined!; }');
      return `export class Declaration${i} {\n${/\/\/ error\b/.test(line) ? '// @ts-expect-error\n' : ''}${method}\n}`;
    })
    .join('\n');

const inClass = (name: string) => (code: string) => `@Injectable()\nexport class ${name} {\n${code}\n}`;
const inAsyncFunction = (code: string) => `export async function example(): Promise<void> {\n${code}\n}`;

/** For each user document, the surroundings of its ```ts blocks, in order. */
const documents: Record<string, Surroundings[]> = {
  'README.md': [
    { prelude: "import { Injectable } from '@nestjs/common';\nimport { Locked } from 'nestjs-distributed-lock';", wrap: inClass('CouponsService') },
    {},
    {
      prelude: 'class ClaimDto { userId!: string; }\ninterface CouponStore { issue(dto: ClaimDto, options: { fence: number }): Promise<void>; }',
      // The store the snippet writes to is the user's.
      wrap: (code) => code.replace('export class CouponsService {', '$&\n  constructor(private readonly store: CouponStore) {}'),
    },
    {
      prelude:
        'declare const store: { write(order: unknown, options: { fence: number; signal: AbortSignal }): Promise<void> };\n' +
        'declare const order: unknown;\ndeclare function transfer(lock: unknown): Promise<void>;',
      // A constructor, then statements a method of the same class runs.
      wrap: (code) => {
        const [constructor, ...statements] = code.trimStart().split('\n');
        return `export class Orders {\n${constructor}\nasync example() {\nconst locks = this.locks;\n${statements.join('\n')}\n}\n}`;
      },
    },
  ],
  'docs/locked.md': [
    {
      prelude:
        "import { INestApplication } from '@nestjs/common';\nimport { APP_FILTER, HttpAdapterHost } from '@nestjs/core';\nimport { LockHttpErrorsFilter } from 'nestjs-distributed-lock';\n" +
        'declare const app: INestApplication;\nexport const providers = [{ provide: APP_FILTER, useClass: LockHttpErrorsFilter }];',
    },
    { prelude: "import { Locked } from 'nestjs-distributed-lock';", wrap: typesBlock },
    {
      prelude:
        "import { Injectable } from '@nestjs/common';\nimport { Transactional } from '@nestjs-cls/transactional';\nimport { Locked } from 'nestjs-distributed-lock';",
      wrap: inClass('CampaignsService'),
    },
  ],
  'docs/operations.md': [
    {
      prelude:
        "import { Controller, Get, Module } from '@nestjs/common';\nimport { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';",
    },
  ],
  'docs/defer.md': [
    {
      prelude:
        "import { Injectable } from '@nestjs/common';\nimport { Deferred, DistributedLockModule, Locked } from 'nestjs-distributed-lock';\n" +
        'declare const redis: string;\ninterface ClaimDto { requestId: string; }\ninterface Claim { claimed: boolean; }',
      wrap: (code) => {
        const [forRoot, ...method] = code.replace('{ ... }', '{ return { claimed: true }; }').split('\n\n');
        return `${forRoot}\n${inClass('ClaimsService')(method.join('\n\n'))}`;
      },
    },
  ],
  'docs/testing.md': [
    {
      prelude:
        "import { Injectable, Module } from '@nestjs/common';\nimport { Locked } from 'nestjs-distributed-lock';\n" +
        "@Injectable() class BillingService { @Locked('invoice:<0>', { onBusy: 'fail-fast', fallback: 'skipped' }) async send(id: string): Promise<string> { return id; } }\n" +
        '@Module({ providers: [BillingService] }) class BillingModule {}',
      wrap: inAsyncFunction,
    },
    {
      prelude:
        "import { Module } from '@nestjs/common';\nimport { Test } from '@nestjs/testing';\nimport { DistributedLockModule } from 'nestjs-distributed-lock';\n" +
        "import { DistributedLockTestingModule } from 'nestjs-distributed-lock/testing';\n@Module({}) class BillingModule {}",
      wrap: inAsyncFunction,
    },
    {
      prelude:
        "import { Injectable, Module } from '@nestjs/common';\nimport { Test } from '@nestjs/testing';\nimport { Locked } from 'nestjs-distributed-lock';\n" +
        "import { DistributedLockTestingModule, LockTestingController } from 'nestjs-distributed-lock/testing';\n" +
        '@Injectable() class ClaimsService {\n' +
        "  @Locked('claim:<0>', { onBusy: 'defer', deferKey: 'claim-request:<1.requestId>' })\n" +
        '  async claim(id: string, dto: { requestId: string }): Promise<{ claimed: boolean } | Deferred> { return { claimed: dto.requestId !== id }; }\n}\n' +
        '@Module({ providers: [ClaimsService] }) class ClaimsModule {}',
      wrap: inAsyncFunction,
    },
  ],
  'docs/metrics.md': [{}],
  'docs/options.md': [],
};

/** The ```ts blocks of a Markdown file, their list indentation removed. */
function tsBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^( *)```ts\n([\s\S]*?)^ *```$/gm)].map(([, indent, body]) =>
    body
      .split('\n')
      .map((line) => (line.startsWith(indent) ? line.slice(indent.length) : line))
      .join('\n')
      .trimEnd(),
  );
}

/** The package's entry points, as a file in test/unit imports them. */
const toLib = (code: string) =>
  code.replace(/from 'nestjs-distributed-lock(\/testing|\/terminus)?'/g, (_, entry: string = '') => `from '../../lib${entry}'`);

function sourceOf(block: string, { prelude = '', wrap = (code) => code }: Surroundings): string {
  const lines = block.split('\n');
  const imports = lines.filter((line) => line.startsWith('import '));
  const code = lines.filter((line) => !line.startsWith('import ')).join('\n');
  // `export {}`: a module even when nothing else makes it one, so the snippets' names never meet.
  return toLib(`${imports.join('\n')}\n${prelude}\n${wrap(code)}\nexport {};\n`);
}

describe('code snippets of the README and docs/', () => {
  const files = new Map<string, string>();
  for (const [document, surroundings] of Object.entries(documents)) {
    const blocks = tsBlocks(readFileSync(join(root, document), 'utf8'));
    it(`${document} has a surrounding for each of its ${blocks.length} ts block(s)`, () => {
      expect(surroundings).toHaveLength(blocks.length);
    });
    blocks.forEach((block, i) => {
      if (surroundings[i])
        files.set(join(root, 'test', 'unit', `docs-snippet-${document.replace(/\W+/g, '-')}-${i}.ts`), sourceOf(block, surroundings[i]));
    });
  }

  it('every document of docs/ with ts blocks is listed here, so none is left unchecked', () => {
    const withBlocks = readdirSync(join(root, 'docs'))
      .map((name) => `docs/${name}`)
      .filter((document) => document.endsWith('.md') && tsBlocks(readFileSync(join(root, document), 'utf8')).length > 0);
    expect(withBlocks.filter((document) => !(document in documents))).toEqual([]);
  });

  // A user starts from the README's setup, @Locked and manual-use blocks: they import what they take from the
  // package themselves (the teaser above them is one line), so their surroundings may not supply it.
  it("README.md's blocks after the first import the package's names themselves", () => {
    expect(documents['README.md'].slice(1).filter(({ prelude = '' }) => prelude.includes("from 'nestjs-distributed-lock"))).toEqual([]);
  });

  it('compile as written', () => {
    const { config } = ts.readConfigFile(join(root, 'tsconfig.json'), (path) => ts.sys.readFile(path)) as { config: unknown };
    const { options } = ts.parseJsonConfigFileContent(config, ts.sys, root);
    const compilerOptions = { ...options, noEmit: true };
    const host = ts.createCompilerHost(compilerOptions);
    const { fileExists, readFile, getSourceFile } = host;
    host.fileExists = (name) => files.has(name) || fileExists.call(host, name);
    host.readFile = (name) => files.get(name) ?? readFile.call(host, name);
    host.getSourceFile = (name, language, ...rest) => {
      const text = files.get(name);
      return text === undefined ? getSourceFile.call(host, name, language, ...rest) : ts.createSourceFile(name, text, language);
    };
    const program = ts.createProgram([...files.keys()], compilerOptions, host);
    const messages = ts.getPreEmitDiagnostics(program).map((d) => {
      const where = d.file ? `${d.file.fileName}:${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}: ` : '';
      const source = d.file && files.has(d.file.fileName) ? `\n--- as compiled ---\n${files.get(d.file.fileName)}` : '';
      return `${where}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}${source}`;
    });
    expect(messages).toEqual([]);
    // Every `// error` line of the Types block was checked to fail.
    expect([...files.values()].join('\n').match(/@ts-expect-error/g)?.length).toBeGreaterThanOrEqual(2);
  }, 120_000);
});
