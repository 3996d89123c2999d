import type { LockAdapter } from '../adapters';
import type { BenchConfig } from '../bench-config';
import type { HandoverFloorResult } from '../measure/handover-floor';
import type { ContendedResult } from '../workloads/contended.workload';
import type { HeldResult } from '../workloads/held-watchdog.workload';
import type { ParallelResult } from '../workloads/parallel-distinct.workload';
import type { SequentialResult } from '../workloads/sequential.workload';
import type { MachineInfo } from './machine';

/** Everything one run measured, keyed by adapter name. */
export interface BenchResults {
  config: BenchConfig;
  machine: MachineInfo;
  adapters: readonly LockAdapter[];
  /** Parts of ours measured alone in (a) (SEQUENTIAL_DIAGNOSTICS): in `sequential`, never peers or targets. */
  diagnostics: readonly LockAdapter[];
  /** Redis CPU of an idle server holding 32 connections (16 of them subscribed), µs per second. */
  idleRedisCpuUsPerSec: number;
  sequential: Record<string, SequentialResult>;
  parallel: Record<string, ParallelResult>;
  /** Per section length: every library's repeats merged; the handover floor where it was run (20 ms). */
  contended: Array<{
    sectionMs: number;
    durationMs: number;
    repeats: number;
    byLib: Record<string, ContendedResult>;
    handoverFloor?: HandoverFloorResult;
  }>;
  /** `undefined` for a library without automatic lease extension. */
  held: Record<string, HeldResult | undefined>;
  totalSeconds: number;
}
