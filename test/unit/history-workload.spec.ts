/**
 * The T12/T15 workloads: a seed must name the same workloads every time (that is what `SEED=<n>`
 * replays), a forced fault kind must be in every draw, and the per-process plans must split the
 * run and give every ring its own copy of the overlapping key sets.
 */
import { drawWorkloads, multiKeyReorderingArb, randomizedFaultsArb, workerPlans } from '../e2e/history/workload';
import { SeededRandom } from '../e2e/workers/support/seeded-random';

describe('history workloads', () => {
  it('the same seed draws the same workloads; another seed others', () => {
    expect(drawWorkloads(randomizedFaultsArb(), 1234, 5)).toEqual(drawWorkloads(randomizedFaultsArb(), 1234, 5));
    expect(drawWorkloads(randomizedFaultsArb(), 1234, 5)).not.toEqual(drawWorkloads(randomizedFaultsArb(), 1235, 5));
  });

  it('a forced fault kind is in every draw; T12 draws have no fault but jitter and multi-key sets', () => {
    for (const w of drawWorkloads(randomizedFaultsArb('restart-redis'), 99, 20)) expect(w.faults.map((f) => f.kind)).toContain('restart-redis');
    for (const w of drawWorkloads(multiKeyReorderingArb, 99, 20)) {
      expect(w).toMatchObject({ faults: [], closes: [], jitterMs: 15 });
      expect(w.multiShare).toBeGreaterThan(0);
    }
  });

  it('plans split the sections over the workers and copy the key ring per ring', () => {
    const [w] = drawWorkloads(multiKeyReorderingArb, 7, 1);
    const plans = workerPlans({ ...w, workers: 3, rings: 2, coldKeys: 2 }, { runId: 'r1', url: 'redis://x', sections: 100 });
    expect(plans.map((p) => [p.worker, p.sections, p.service.keyPrefix])).toEqual([
      ['w0', 34, 'r1:'],
      ['w1', 34, 'r1:'],
      ['w2', 34, 'r1:'],
    ]);
    expect(plans[0].hot).toEqual(['a', 'b', 'c', 'a1', 'b1', 'c1']);
    expect(plans[0].cold).toEqual(['k0', 'k1']);
    expect(plans[0].multis).toEqual([
      ['a', 'b'],
      ['b', 'c'],
      ['c', 'a'],
      ['a1', 'b1'],
      ['b1', 'c1'],
      ['c1', 'a1'],
    ]);
    expect(new Set(plans.map((p) => p.seed)).size).toBe(3);
  });

  it("the workers' random choices follow their seed", () => {
    const draw = (seed: number) => {
      const r = new SeededRandom(seed);
      return Array.from({ length: 5 }, () => [r.next(), r.int(1, 6), r.weighted([1, 0, 3]), r.pick(['x', 'y'])]);
    };
    expect(draw(5)).toEqual(draw(5));
    expect(draw(5)).not.toEqual(draw(6));
    expect(draw(5).every(([, , w]) => w !== 1)).toBe(true);
  });
});
