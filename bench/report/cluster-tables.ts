import type { ClusterContendedResult, ClusterSectionResult, ClusterTarget } from '../workloads/cluster.workload';
import { fmt, renderTable, Table } from './format';

/** The target: Redis CPU per contended acquisition on the Cluster, summed over its masters, at most this × the single node's. */
export const CLUSTER_CPU_TARGET_RATIO = 1.2;

const LABEL: Record<ClusterTarget, string> = {
  single: 'one redis-server',
  'cluster-spublish': '3-master Cluster, SPUBLISH (Redis 7)',
  'cluster-publish': '3-master Cluster, PUBLISH (fallback)',
};

const byTarget = <T extends { target: ClusterTarget }>(rows: T[], target: ClusterTarget): T | undefined => rows.find((r) => r.target === target);

export function clusterContendedTable(result: ClusterSectionResult): Table {
  const single = byTarget(result.contended, 'single')!;
  const header = [
    'target',
    'acq/s',
    'Redis CPU µs/acq (all servers)',
    'vs one node',
    'lock master µs/acq',
    'other masters µs/acq',
    'PUBLISH/acq',
    'SPUBLISH/acq',
    'overlaps',
  ];
  return [
    header,
    ...result.contended.map((r) => [
      LABEL[r.target],
      fmt(r.acquisitionsPerSec, 0),
      fmt(r.cpuUsPerAcq),
      `${(r.cpuUsPerAcq / single.cpuUsPerAcq).toFixed(2)}×`,
      fmt(r.lockMasterCpuUsPerAcq),
      r.target === 'single' ? '–' : fmt(r.cpuUsPerAcq - r.lockMasterCpuUsPerAcq),
      r.publishPerAcq.toFixed(2),
      r.spublishPerAcq.toFixed(2),
      String(r.overlaps),
    ]),
  ];
}

export function clusterParallelTable(result: ClusterSectionResult): Table {
  const single = byTarget(result.parallel, 'single')!;
  return [
    ['target', 'ops/s (median round)', 'rounds', 'vs one node', 'Redis CPU µs/op (all servers)'],
    ...result.parallel.map((r) => [
      LABEL[r.target],
      fmt(r.opsPerSec, 0),
      r.opsPerSecRounds.map((v) => fmt(v, 0)).join(' / '),
      `${(r.opsPerSec / single.opsPerSec).toFixed(2)}×`,
      fmt(r.cpuUsPerOp),
    ]),
  ];
}

export interface ClusterCheck {
  target: string;
  measured: string;
  ratio: number;
  pass: boolean;
}

/** Redis CPU per contended acquisition summed over the Cluster's masters ≤ 1.2 × one node's; PUBLISH shown for comparison. */
export function clusterChecks(result: ClusterSectionResult): ClusterCheck[] {
  const single = byTarget(result.contended, 'single')!;
  const check = (r: ClusterContendedResult | undefined): ClusterCheck[] => {
    if (!r) return [];
    const ratio = r.cpuUsPerAcq / single.cpuUsPerAcq;
    return [
      {
        target: `${LABEL[r.target]}: Redis CPU per contended acquisition, summed over masters ≤ ${CLUSTER_CPU_TARGET_RATIO}× one node`,
        measured: `${fmt(r.cpuUsPerAcq)} µs vs ${fmt(single.cpuUsPerAcq)} µs`,
        ratio,
        pass: ratio <= CLUSTER_CPU_TARGET_RATIO,
      },
    ];
  };
  return [...check(byTarget(result.contended, 'cluster-spublish')), ...check(byTarget(result.contended, 'cluster-publish'))];
}

export function clusterChecksTable(checks: ClusterCheck[]): Table {
  return [
    ['target', 'measured', 'ratio', 'result'],
    ...checks.map((c) => [c.target, c.measured, `${c.ratio.toFixed(2)}×`, c.pass ? 'PASS' : 'FAIL']),
  ];
}

/** The section as markdown (printed, and appended to bench/results.md by a full run). */
export function clusterSectionMarkdown(result: ClusterSectionResult): string {
  const { contended: c, parallel: p } = result.config;
  return [
    '## Redis Cluster (3 masters on loopback) vs one redis-server',
    '',
    `(cluster a) ${c.workers} workers (one LockService and Cluster client each), one key, ${c.sectionMs} ms section, ${c.durationMs / 1000} s per target in ${c.repeats} interleaved repeats. Redis CPU is each server's \`used_cpu_user + used_cpu_sys\` delta minus its idle rate over the same time.`,
    '',
    renderTable(clusterContendedTable(result)),
    '',
    `(cluster b) one LockService, ${p.inFlight} in flight on distinct keys, ${p.rounds} rounds × ${p.ops} ops per target.`,
    '',
    renderTable(clusterParallelTable(result)),
    '',
    renderTable(clusterChecksTable(clusterChecks(result))),
    '',
  ].join('\n');
}
