/**
 * The worker processes of one run: started from their plans, followed as their lines come in (how
 * many top-level sections each has done, so faults can fire at a share of the run and a killed
 * worker's replacement takes over the rest of its quota).
 */
import * as path from 'path';
import { startWorker, WorkerHandle } from '../../harness/worker-process';
import type { WorkerPlan } from '../workers/support/history-plan';

const HISTORY_WORKER = path.join(__dirname, '..', 'workers', 'history.worker.ts');

export interface Member {
  plan: WorkerPlan;
  handle: WorkerHandle;
  /** Killed by the test (kill -9): its unsettled calls are cut, not hung. */
  killed: boolean;
  /** Killed by the run's time cap: it hung. */
  hung: boolean;
  /** Top-level sections seen so far. */
  sections: number;
  /** Its {done} line, once written. */
  done?: { sections: number; calls: number; outcomes: Record<string, number>; stats: Record<string, number> };
  exited: boolean;
  scanned: number;
  nested: Set<number>;
}

export class Crew {
  readonly members: Member[] = [];

  async start(plan: WorkerPlan): Promise<Member> {
    const handle = startWorker(HISTORY_WORKER, { env: { PLAN: JSON.stringify(plan) } });
    const member: Member = { plan, handle, killed: false, hung: false, sections: 0, exited: false, scanned: 0, nested: new Set() };
    void handle.exited.then(() => (member.exited = true));
    this.members.push(member);
    await handle.waitFor((l) => l.ready === true, 15_000);
    return member;
  }

  go(members: readonly Member[] = this.members): Promise<void[]> {
    return Promise.all(members.map((m) => m.handle.send({ go: true })));
  }

  /** Reads the lines that came in since the last call; returns the sections done by all workers. */
  progress(): number {
    let total = 0;
    for (const m of this.members) {
      const lines = m.handle.lines;
      for (; m.scanned < lines.length; m.scanned++) {
        const l = lines[m.scanned];
        if (l.ev === 'invoke' && l.parent !== undefined) m.nested.add(l.c);
        else if (l.ev === 'exit' && !m.nested.has(l.lock)) m.sections++;
        else if (l.done === true) m.done = l;
      }
      total += m.sections;
    }
    return total;
  }

  /** Workers still running their quota (not done, not killed, not exited). */
  running(): Member[] {
    this.progress();
    return this.members.filter((m) => !m.done && !m.exited);
  }

  allExited(): boolean {
    return this.members.every((m) => m.exited);
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.members.map((m) => m.handle.stop()));
  }
}
