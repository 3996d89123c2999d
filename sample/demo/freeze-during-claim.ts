import * as fs from 'fs';
import { setTimeout as sleep } from 'timers/promises';
import type { AppInstance } from './app-cluster';

export interface FreezeEvidence {
  instance: string;
  pid: number;
  /** Fencing token the frozen claim held. */
  fence: number | null;
  /** SIGSTOP to SIGCONT, measured here. */
  stoppedMs: number;
  /** The kernel reported the process as stopped ('T' in /proc/<pid>/stat); null where /proc is missing. */
  kernelSawStopped: boolean | null;
  /** The gap the instance itself saw in its timers: proof it was frozen, not just signalled. */
  frozenMsSeenByInstance: number;
  /** Whether the instance still considered its lease valid after thawing (expected: false). */
  leaseHeldAfterThaw: boolean | null;
  stoppedAt: number;
  continuedAt: number;
}

function processState(pid: number): string | null {
  try {
    // "pid (comm) S ...": the state follows the last ')' (comm may contain spaces or parentheses).
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
  } catch {
    return null;
  }
}

/**
 * Round 3's fault: waits until `target` announces that a claim is inside its critical section
 * (lock held, campaign read, nothing written yet), freezes the whole process with SIGSTOP for
 * `freezeMs` (longer than the lock TTL, so its lease expires and another instance takes the lock),
 * then thaws it with SIGCONT and collects what the instance saw.
 */
export async function freezeDuringClaim(target: AppInstance, freezeMs: number, announceTimeoutMs: number): Promise<FreezeEvidence> {
  const { worker } = target;
  const stalled = await worker.waitFor((l) => l.event === 'claim-stalled', announceTimeoutMs);
  worker.pause();
  const stoppedAt = Date.now();
  await sleep(50);
  const state = processState(worker.pid);
  try {
    await sleep(Math.max(0, freezeMs - 50));
  } finally {
    worker.resume();
  }
  const continuedAt = Date.now();
  const resumed = await worker.waitFor((l) => l.event === 'claim-resumed', 10_000);
  return {
    instance: target.name,
    pid: worker.pid,
    fence: stalled.fence,
    stoppedMs: continuedAt - stoppedAt,
    kernelSawStopped: state === null ? null : state === 'T' || state === 't',
    frozenMsSeenByInstance: resumed.frozenMs,
    leaseHeldAfterThaw: resumed.leaseHeld,
    stoppedAt,
    continuedAt,
  };
}
