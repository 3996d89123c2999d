/** Shared by the locked-*.spec.ts suites: timed critical sections and the overlap checks on them. */
import { performance } from 'perf_hooks';
import { currentLock } from '../../lib';

export interface TimedSection {
  label: string;
  /** Key of the lock the section ran under (undefined: it ran unlocked). */
  lockKey: string | undefined;
  start: number;
  end: number;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Records when each labelled piece of work ran, and under which lock. */
export class SectionLog {
  readonly sections: TimedSection[] = [];

  async run<T>(label: string, ms: number, result?: T): Promise<T | undefined> {
    const start = performance.now();
    const lockKey = currentLock()?.key;
    await sleep(ms);
    this.sections.push({ label, lockKey, start, end: performance.now() });
    return result;
  }

  of(label: string): TimedSection[] {
    return this.sections.filter((s) => s.label === label);
  }

  clear(): void {
    this.sections.length = 0;
  }
}

export const overlap = (a: TimedSection, b: TimedSection) => a.start < b.end && b.start < a.end;

/**
 * Runs two calls on the same key and one on another key at the same time: the same-key pair must
 * not overlap, the other key must run in parallel with them (a lock per method would serialise it).
 */
export async function expectSerialSameKeyParallelOtherKey(
  log: SectionLog,
  call: (id: string) => Promise<unknown>,
  labelOf: (id: string) => string,
): Promise<void> {
  log.clear();
  await Promise.all([call('same'), call('same'), call('other')]);
  const same = log.of(labelOf('same'));
  const [other] = log.of(labelOf('other'));
  expect(same).toHaveLength(2);
  expect(other).toBeDefined();
  expect(overlap(same[0], same[1])).toBe(false);
  expect(overlap(other, same[0]) || overlap(other, same[1])).toBe(true);
  for (const s of [...same, other]) expect(s.lockKey).toMatch(/:(same|other)$/);
}
