import type { LockAdapter } from '../adapters/lock-adapter';
import { freshNodes } from '../measure/bench-server';
import { interleavedRounds } from '../measure/interleaved';
import { fmt, fmtMs, fmtPct, renderTable, Table } from '../report/format';
import { oursShareLine } from '../report/share-line';
import { mergeContendedRepeats, runContended, ContendedResult } from '../workloads/contended.workload';
import { runParallelRound, summarizeParallel, ParallelResult } from '../workloads/parallel-distinct.workload';
import { runSequentialRound, summarizeSequential, SequentialResult, SequentialRound } from '../workloads/sequential.workload';
import { MultiNodeAdapter, multiNodeAdapters } from './multinode-adapters';
import { oursRedlockScriptsAdapter } from './ours-redlock-scripts.adapter';

/** Parts of ours measured alone in (m-a) only, interleaved with the libraries: never a peer, no target uses them. */
const SEQUENTIAL_DIAGNOSTICS: readonly LockAdapter[] = [oursRedlockScriptsAdapter];

/** Sizes of the multi-node section (Redlock over independent nodes); smaller than the single-node ones: N servers per round. */
export interface MultiNodeConfig {
  nodes: number;
  sequential: { rounds: number; cyclesPerRound: number };
  parallel: { rounds: number; opsPerRound: number; inFlight: number };
  contended: { workers: number; sectionMs: number; durationMs: number; repeats: number };
}

export const MULTI_NODE_FULL: MultiNodeConfig = {
  nodes: 3,
  sequential: { rounds: 9, cyclesPerRound: 500 },
  parallel: { rounds: 5, opsPerRound: 2_000, inFlight: 64 },
  contended: { workers: 16, sectionMs: 20, durationMs: 8_000, repeats: 2 },
};

export const MULTI_NODE_QUICK: MultiNodeConfig = {
  nodes: 3,
  sequential: { rounds: 3, cyclesPerRound: 200 },
  parallel: { rounds: 2, opsPerRound: 1_000, inFlight: 64 },
  contended: { workers: 16, sectionMs: 20, durationMs: 2_000, repeats: 2 },
};

interface ContendedWithVotes extends ContendedResult {
  /** Split votes per 1,000 acquisitions; undefined when the library does not expose them. */
  splitVotesPerThousand?: number;
}

export interface MultiNodeResults {
  config: MultiNodeConfig;
  adapters: MultiNodeAdapter[];
  /** Measured in (m-a) only (SEQUENTIAL_DIAGNOSTICS): in `sequential`, not in the table's columns. */
  diagnostics: readonly LockAdapter[];
  sequential: Record<string, SequentialResult>;
  parallel: Record<string, ParallelResult>;
  contended: Record<string, ContendedWithVotes>;
}

export interface MultiNodeCheck {
  target: string;
  measured: string;
  pass: boolean | undefined;
}

/** Runs workloads a, b and c of the single-node section against `config.nodes` fresh, independent redis-servers. */
export async function runMultiNodeSection(config: MultiNodeConfig, log: (line: string) => void): Promise<MultiNodeResults> {
  const adapters = multiNodeAdapters();
  const nodes = freshNodes(config.nodes);
  const { rounds: sRounds, cyclesPerRound } = config.sequential;
  log(`(m) ${config.nodes} nodes, sequential: ${sRounds} rounds × ${cyclesPerRound} cycles per library and ours' scripts alone…`);
  const seq = await interleavedRounds<LockAdapter, SequentialRound>([...adapters, ...SEQUENTIAL_DIAGNOSTICS], sRounds, (a) =>
    runSequentialRound(a, cyclesPerRound, nodes),
  );
  const { rounds: pRounds, opsPerRound, inFlight } = config.parallel;
  log(`(m) ${config.nodes} nodes, ${inFlight} in flight: ${pRounds} rounds × ${opsPerRound} ops per library…`);
  const par = await interleavedRounds(adapters, pRounds, (a) => runParallelRound(a, opsPerRound, inFlight, nodes));
  const { workers, sectionMs, durationMs, repeats } = config.contended;
  log(
    `(m) ${config.nodes} nodes, ${workers} workers on one key, ${sectionMs} ms section: ${repeats} × ${durationMs / repeats / 1000} s per library…`,
  );
  const con = await interleavedRounds(adapters, repeats, async (a) => {
    a.resetSplitVotes();
    const result = await runContended(a, workers, sectionMs, durationMs / repeats, nodes);
    return { result, splitVotes: a.splitVotes() };
  });
  const contended: Record<string, ContendedWithVotes> = {};
  for (const [name, runs] of Object.entries(con)) {
    const merged = mergeContendedRepeats(runs.map((r) => r.result));
    const votes = runs.map((r) => r.splitVotes);
    const known = votes.filter((v): v is number => v !== undefined);
    const total = known.length === votes.length ? known.reduce((n, v) => n + v, 0) : undefined;
    contended[name] = { ...merged, splitVotesPerThousand: total === undefined ? undefined : (total * 1000) / merged.acquisitions };
    if (merged.overlaps > 0) log(`    !!! ${name}: ${merged.overlaps} OVERLAPS on ${config.nodes} nodes`);
  }
  return {
    config,
    adapters,
    diagnostics: SEQUENTIAL_DIAGNOSTICS,
    sequential: Object.fromEntries(Object.entries(seq).map(([n, r]) => [n, summarizeSequential(r)])),
    parallel: Object.fromEntries(Object.entries(par).map(([n, r]) => [n, summarizeParallel(r, inFlight)])),
    contended,
  };
}

/** One row per figure, one column per library. */
export function multiNodeTable(results: MultiNodeResults): Table {
  const names = results.adapters.map((a) => a.name);
  const row = (label: string, cell: (name: string) => string) => [label, ...names.map(cell)];
  const { sequential: s, parallel: p, contended: c } = results;
  return [
    ['', ...names],
    row('(a) µs per uncontended cycle (median round)', (n) => fmt(s[n].usPerCycle)),
    row('(a) round trips per cycle', (n) => fmt(s[n].roundTripsPerCycle, 2)),
    row('(a) Redis CPU µs per cycle, all nodes', (n) => fmt(s[n].cpuUsPerCycle)),
    row('(a) client CPU µs per cycle', (n) => fmt(s[n].clientCpuUsPerCycle)),
    row(`(b) ops/s, ${results.config.parallel.inFlight} in flight (median round)`, (n) => fmt(p[n].opsPerSec, 0)),
    row('(c) acquisitions/s', (n) => fmt(c[n].acquisitionsPerSec, 1)),
    row('(c) wait p50 ms', (n) => fmtMs(c[n].waitP50)),
    row('(c) wait p99 ms', (n) => fmtMs(c[n].waitP99)),
    row('(c) handoff p50 ms', (n) => fmtMs(c[n].handoffP50)),
    row('(c) re-acquired by the releaser', (n) => fmtPct(c[n].reacquireShare)),
    row('(c) round trips per acquisition', (n) => fmt(c[n].roundTripsPerAcq, 1)),
    row('(c) Redis commands per acquisition, all nodes', (n) => fmt(c[n].commandsPerAcq, 1)),
    row('(c) Redis CPU µs per acquisition, all nodes', (n) => fmt(c[n].cpuUsPerAcq)),
    row('(c) split votes per 1,000 acquisitions', (n) => fmt(c[n].splitVotesPerThousand, 1)),
    row('(c) library gave up (retry budget)', (n) => String(c[n].giveUps)),
    row('(c) overlapping sections', (n) => String(c[n].overlaps)),
  ];
}

/**
 * Ahead of the peer on every figure (each against the best peer for that figure), and the contended
 * wait p99 bound of single-node mode: 1.5 × (workers − 1) × section.
 */
export function checkMultiNodeTargets(results: MultiNodeResults): MultiNodeCheck[] {
  const ours = results.adapters.find((a) => a.role === 'ours')!.name;
  const peers = results.adapters.filter((a) => a.role === 'peer').map((a) => a.name);
  const checks: MultiNodeCheck[] = [];
  const ahead = (label: string, value: (n: string) => number | undefined, better: 'lower' | 'higher', show: (v: number | undefined) => string) => {
    const mine = value(ours);
    const theirs = peers.map((n) => ({ n, v: value(n) })).filter((x): x is { n: string; v: number } => x.v !== undefined && !Number.isNaN(x.v));
    if (theirs.length === 0) return;
    const best = theirs.reduce((a, b) => ((better === 'lower' ? b.v < a.v : b.v > a.v) ? b : a));
    const pass = mine === undefined ? undefined : better === 'lower' ? mine <= best.v : mine >= best.v;
    checks.push({ target: `${label}: ${better === 'lower' ? '≤' : '≥'} best peer`, measured: `${show(mine)} vs ${best.n} ${show(best.v)}`, pass });
  };
  const { sequential: s, parallel: p, contended: c } = results;
  ahead(
    '(m-a) µs per uncontended cycle',
    (n) => s[n].usPerCycle,
    'lower',
    (v) => fmt(v),
  );
  ahead(
    '(m-b) ops/s, 64 in flight',
    (n) => p[n].opsPerSec,
    'higher',
    (v) => fmt(v, 0),
  );
  ahead('(m-c) wait p50', (n) => c[n].waitP50, 'lower', fmtMs);
  ahead('(m-c) wait p99', (n) => c[n].waitP99, 'lower', fmtMs);
  ahead('(m-c) re-acquisitions by the releaser', (n) => c[n].reacquireShare, 'lower', fmtPct);
  ahead(
    '(m-c) round trips per acquisition',
    (n) => c[n].roundTripsPerAcq,
    'lower',
    (v) => fmt(v, 1),
  );
  ahead(
    '(m-c) Redis CPU per acquisition',
    (n) => c[n].cpuUsPerAcq,
    'lower',
    (v) => fmt(v),
  );
  ahead(
    '(m-c) split votes per 1,000',
    (n) => c[n].splitVotesPerThousand,
    'lower',
    (v) => fmt(v, 1),
  );
  const { workers, sectionMs } = results.config.contended;
  const bound = 1.5 * (workers - 1) * sectionMs;
  checks.push({
    target: `(m-c) wait p99 ≤ 1.5 × (workers − 1) × section = ${bound} ms`,
    measured: `${fmtMs(c[ours].waitP99)} ms`,
    pass: c[ours].waitP99 <= bound,
  });
  return checks;
}

/**
 * Where ours' uncontended time goes, from (m-a)'s rounds paired: the library's client code (ours ÷ its scripts sent
 * alone) and its scripts against the fastest peer of (m-a). Undefined when (m-a) ran without the diagnostic.
 */
export function multiNodeShareLine(results: MultiNodeResults): string | undefined {
  const s = results.sequential;
  const ours = results.adapters.find((a) => a.role === 'ours')?.name;
  const scripts = results.diagnostics[0]?.name;
  const peers = results.adapters.filter((a) => a.role === 'peer' && s[a.name]).map((a) => a.name);
  if (!ours || !scripts || !s[ours] || !s[scripts] || peers.length === 0) return undefined;
  const peer = peers.reduce((a, b) => (s[b].usPerCycle < s[a].usPerCycle ? b : a));
  return oursShareLine("Where ours' (m-a) time goes", s, { ours, scripts, reference: peer }, ', all nodes,');
}

export function multiNodeChecksTable(checks: MultiNodeCheck[]): Table {
  return [['target', 'measured', 'verdict'], ...checks.map((c) => [c.target, c.measured, c.pass === undefined ? 'n/a' : c.pass ? 'PASS' : 'FAIL'])];
}

/** The section for results.md: settings, the side-by-side table, the targets. */
export function multiNodeMarkdown(results: MultiNodeResults, checks: MultiNodeCheck[]): string {
  const share = multiNodeShareLine(results);
  return [
    `## Multi-node: Redlock over ${results.config.nodes} independent redis-servers`,
    '',
    ...[...results.adapters, ...results.diagnostics].map((a) => `- **${a.name}**: ${a.settings}`),
    '',
    renderTable(multiNodeTable(results)),
    '',
    ...(share ? [share, ''] : []),
    renderTable(multiNodeChecksTable(checks)),
    '',
  ].join('\n');
}
