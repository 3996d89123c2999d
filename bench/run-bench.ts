/**
 * `npm run bench`: the same workloads against this library, its peers and a raw floor, side by
 * side in one run, each library on its own fresh redis-server. Prints the tables and the issue's
 * targets as PASS/FAIL, writes bench/results.md and the wait-time chart. Targets are reported, not
 * asserted: exit code 0 whenever it ran, non-zero only on a crash or an overlap (a broken lock).
 * Last comes the Cluster section (this library on a 3-master Cluster vs one node). `BENCH_ONLY=cluster`
 * runs only that section (prints it; results.md is left alone).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ADAPTERS, LockAdapter, SEQUENTIAL_DIAGNOSTICS } from './adapters';
import { benchConfig } from './bench-config';
import { redisServerVersion } from './measure/bench-server';
import { nowMs } from './measure/clock';
import { HandoverFloorResult, mergeHandoverFloorRepeats, runHandoverFloor } from './measure/handover-floor';
import { idleRedisCpuUsPerSec } from './measure/idle-redis-cpu';
import { interleavedRounds } from './measure/interleaved';
import { installRoundTripCounter } from './measure/round-trips';
import type { BenchResults } from './report/bench-results';
import { renderTable } from './report/format';
import { machineInfo } from './report/machine';
import { resultsMarkdown } from './report/results-markdown';
import { clusterChecks, clusterChecksTable, clusterContendedTable, clusterParallelTable, clusterSectionMarkdown } from './report/cluster-tables';
import { contendedTable, handoverFloorLine, heldTable, parallelTable, sequentialShareLine, sequentialTable } from './report/tables';
import { checkTargets, targetsTable, totalOverlaps } from './report/targets';
import { waitDistributionSvg } from './report/wait-distribution-svg';
import {
  checkMultiNodeTargets,
  MULTI_NODE_FULL,
  MULTI_NODE_QUICK,
  multiNodeChecksTable,
  multiNodeMarkdown,
  multiNodeShareLine,
  multiNodeTable,
  MultiNodeResults,
  runMultiNodeSection,
} from './multinode/multinode-section';
import { CLUSTER_SECTION, ClusterSectionResult, runClusterSection } from './workloads/cluster.workload';
import { MODES_FULL, MODES_QUICK, modesMarkdown, modesTable, runModesSection } from './modes/modes-section';
import { ContendedResult, mergeContendedRepeats, runContended } from './workloads/contended.workload';
import { HeldResult, runHeldWatchdog } from './workloads/held-watchdog.workload';
import { ParallelRound, runParallelRound, summarizeParallel } from './workloads/parallel-distinct.workload';
import { runSequentialRound, SequentialRound, summarizeSequential } from './workloads/sequential.workload';

const CHART_FILE = 'wait-distribution-20ms.svg';
/** Libraries that renew leases by themselves; redlock-10ms shares redlock's extension code. */
const HELD_LIBRARIES = new Set(['ours', 'redis-semaphore', 'redlock']);
/** Section lengths whose Redis-CPU target gets the perfect-handover floor as a reference. */
const HANDOVER_FLOOR_MIN_SECTION_MS = 20;
/** The perfect-handover floor's place among the (c) runs it is interleaved with (not a library: no adapter). */
const HANDOVER_FLOOR = 'perfect-handover floor';

const log = (line: string) => process.stdout.write(`${line}\n`);

/** Rounds of `run` over every library, interleaved (see interleavedRounds). */
const interleaved = <T>(rounds: number, run: (adapter: LockAdapter) => Promise<T>) => interleavedRounds(ADAPTERS, rounds, run);

/** The multi-node (Redlock) section: runs, prints its table and targets, returns its results.md section. */
async function multiNode(quick: boolean): Promise<{ markdown: string; overlaps: number }> {
  const results: MultiNodeResults = await runMultiNodeSection(quick ? MULTI_NODE_QUICK : MULTI_NODE_FULL, log);
  const checks = checkMultiNodeTargets(results);
  log('');
  log(`(m) Redlock mode over ${results.config.nodes} independent nodes, side by side`);
  log(renderTable(multiNodeTable(results)));
  const share = multiNodeShareLine(results);
  if (share) log(share);
  log('');
  log('Multi-node targets');
  log(renderTable(multiNodeChecksTable(checks)));
  const overlaps = Object.values(results.contended).reduce((n, r) => n + r.overlaps, 0);
  return { markdown: multiNodeMarkdown(results, checks), overlaps };
}

/** The Cluster section: runs it and prints its tables and target; returns it, or the overlap count as a failure. */
async function clusterSection(quick: boolean): Promise<ClusterSectionResult> {
  const result = await runClusterSection(CLUSTER_SECTION[quick ? 'quick' : 'full'], log);
  const { contended: c, parallel: p } = result.config;
  log('');
  log(`(cluster a) ${c.workers} workers, one key, ${c.sectionMs} ms section: Redis CPU per acquisition, all servers (idle share out)`);
  log(renderTable(clusterContendedTable(result)));
  log('');
  log(`(cluster b) ${p.inFlight} in flight on distinct keys`);
  log(renderTable(clusterParallelTable(result)));
  log('');
  log('Cluster target');
  log(renderTable(clusterChecksTable(clusterChecks(result))));
  return result;
}

const clusterOverlaps = (result: ClusterSectionResult): number => result.contended.reduce((n, r) => n + r.overlaps, 0);

/** The deployment-modes section: runs, prints its table, returns its results.md section. */
async function modes(quick: boolean): Promise<string> {
  const results = await runModesSection(quick ? MODES_QUICK : MODES_FULL, log);
  log('');
  log('(modes) uncontended acquire + release in each deployment mode');
  log(renderTable(modesTable(results)));
  return modesMarkdown(results);
}

async function main(): Promise<number> {
  const started = nowMs();
  const config = benchConfig();
  if (process.env.BENCH_ONLY === 'cluster') {
    installRoundTripCounter();
    log(`nestjs-distributed-lock bench, Cluster section only${config.quick ? ' (BENCH_QUICK=1)' : ''}: redis-server ${await redisServerVersion()}`);
    const result = await clusterSection(config.quick);
    log(`(${((nowMs() - started) / 1000).toFixed(0)} s)`);
    return clusterOverlaps(result) > 0 ? 2 : 0;
  } else if (process.env.BENCH_ONLY === 'multinode') {
    installRoundTripCounter();
    const { overlaps } = await multiNode(config.quick);
    return overlaps > 0 ? 2 : 0;
  } else if (process.env.BENCH_ONLY === 'modes') {
    installRoundTripCounter();
    await modes(config.quick);
    return 0;
  } else if (process.env.BENCH_ONLY) {
    throw new Error(`BENCH_ONLY=${process.env.BENCH_ONLY}: the sections that run alone are 'cluster', 'multinode' and 'modes'`);
  }
  installRoundTripCounter();
  const machine = machineInfo(await redisServerVersion());
  log(
    `nestjs-distributed-lock bench${config.quick ? ' (BENCH_QUICK=1)' : ''}: Node ${machine.node}, ${machine.cpu}, ${machine.cores} cores, redis-server ${machine.redis}`,
  );
  const idle = await idleRedisCpuUsPerSec();

  log(`(a) sequential: ${config.sequential.rounds} rounds × ${config.sequential.cyclesPerRound} cycles per library and ours' scripts alone…`);
  const seqRounds = await interleavedRounds<LockAdapter, SequentialRound>([...ADAPTERS, ...SEQUENTIAL_DIAGNOSTICS], config.sequential.rounds, (a) =>
    runSequentialRound(a, config.sequential.cyclesPerRound),
  );
  const sequential = Object.fromEntries(Object.entries(seqRounds).map(([n, r]) => [n, summarizeSequential(r)]));

  const { rounds: pRounds, opsPerRound, inFlight } = config.parallel;
  log(`(b) ${inFlight} in flight on distinct keys: ${pRounds} rounds × ${opsPerRound} ops per library…`);
  const parRounds = await interleaved<ParallelRound>(pRounds, (a) => runParallelRound(a, opsPerRound, inFlight));
  const parallel = Object.fromEntries(Object.entries(parRounds).map(([n, r]) => [n, summarizeParallel(r, inFlight)]));

  const contended: BenchResults['contended'] = [];
  const { workers } = config.contended;
  for (const { sectionMs, durationMs, repeats } of config.contended.runs) {
    const repeatMs = durationMs / repeats;
    // The perfect-handover floor runs as one more entry of each repeat, interleaved like a library, so its Redis CPU
    // is paired repeat by repeat with ours (the machine drifts too much for a floor measured once, minutes away).
    const withFloor = sectionMs >= HANDOVER_FLOOR_MIN_SECTION_MS;
    log(
      `(c) ${workers} workers, ${sectionMs} ms section: ${repeats} repeats × ${repeatMs / 1000} s per library${withFloor ? ' and the perfect-handover floor' : ''}…`,
    );
    const entries: Array<{ name: string; run: () => Promise<ContendedResult | HandoverFloorResult> }> = ADAPTERS.map((a) => ({
      name: a.name,
      run: () => runContended(a, workers, sectionMs, repeatMs),
    }));
    if (withFloor) entries.push({ name: HANDOVER_FLOOR, run: () => runHandoverFloor(workers, sectionMs, repeatMs) });
    const { [HANDOVER_FLOOR]: floorRepeats, ...runs } = await interleavedRounds(entries, repeats, (entry) => entry.run());
    const byLib = Object.fromEntries(Object.entries(runs).map(([n, r]) => [n, mergeContendedRepeats(r as ContendedResult[])]));
    for (const [name, r] of Object.entries(byLib)) if (r.overlaps > 0) log(`    !!! ${name}: ${r.overlaps} OVERLAPS`);
    const handoverFloor = floorRepeats ? mergeHandoverFloorRepeats(floorRepeats) : undefined;
    contended.push({ sectionMs, durationMs, repeats, byLib, handoverFloor });
  }

  const held: Record<string, HeldResult | undefined> = {};
  for (const adapter of ADAPTERS.filter((a) => HELD_LIBRARIES.has(a.name))) {
    log(`(d) ${config.held.locks} locks held with renewal: ${adapter.name}…`);
    held[adapter.name] = await runHeldWatchdog(adapter, config.held.locks, config.held.ttl, config.held.holdMs);
  }

  const multi = await multiNode(config.quick);
  const modesSection = await modes(config.quick);
  log('');
  const cluster = await clusterSection(config.quick);

  const results: BenchResults = {
    config,
    machine,
    adapters: ADAPTERS,
    diagnostics: SEQUENTIAL_DIAGNOSTICS,
    idleRedisCpuUsPerSec: idle,
    sequential,
    parallel,
    contended,
    held,
    totalSeconds: (nowMs() - started) / 1000,
  };
  const checks = checkTargets(results);

  log('');
  log('(a) sequential uncontended acquire + release');
  log(renderTable(sequentialTable(results)));
  const share = sequentialShareLine(results);
  if (share) log(share);
  log('');
  log(`(b) ${inFlight} in flight on distinct keys`);
  log(renderTable(parallelTable(results)));
  results.contended.forEach((run, i) => {
    log('');
    log(`(c) ${config.contended.workers} workers, one key, ${run.sectionMs} ms section`);
    log(renderTable(contendedTable(results, i)));
    if (run.handoverFloor) log(handoverFloorLine(run.handoverFloor));
  });
  log('');
  log('(d) locks held at once with automatic renewal');
  log(renderTable(heldTable(results)));
  log('');
  log('Targets (issue 16)');
  log(renderTable(targetsTable(checks)));

  const chartRun = results.contended.find((r) => r.sectionMs === 20) ?? results.contended[0];
  const svg = waitDistributionSvg(
    `Wait before entering, ${config.contended.workers} workers on one key, ${chartRun.sectionMs} ms section (CDF)`,
    ADAPTERS.filter((a) => chartRun.byLib[a.name]).map((a) => ({ name: a.name, result: chartRun.byLib[a.name] })),
    1.5 * (config.contended.workers - 1) * chartRun.sectionMs,
  );
  fs.writeFileSync(path.join(__dirname, CHART_FILE), svg);
  fs.writeFileSync(
    path.join(__dirname, 'results.md'),
    `${resultsMarkdown(results, checks, CHART_FILE)}\n${clusterSectionMarkdown(cluster)}\n${multi.markdown}\n${modesSection}`,
  );
  log('');
  log(`Wrote bench/results.md and bench/${CHART_FILE} (${results.totalSeconds.toFixed(0)} s).`);

  const overlaps = totalOverlaps(results) + clusterOverlaps(cluster) + multi.overlaps;
  if (overlaps > 0) {
    log(`FAILED: ${overlaps} overlapping critical sections: a lock let two holders in.`);
    return 2;
  }
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`bench crashed: ${(error as Error)?.stack ?? String(error)}\n`);
    process.exit(1);
  },
);
