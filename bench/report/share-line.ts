import { pairedRatio } from '../measure/paired-ratio';
import type { SequentialResult } from '../workloads/sequential.workload';
import { fmt, fmtRatioSpread } from './format';

/**
 * Where ours' uncontended time goes, from rounds paired: what the library's client code adds (ours ÷ its scripts sent
 * alone) and what its scripts add against `reference` (the raw floor, or the fastest Redlock peer). `what` opens the line
 * ("Where ours' time goes"); `cpuScope` says what the Redis CPU covers (", all nodes," on several servers).
 */
export function oursShareLine(
  what: string,
  byName: Readonly<Record<string, SequentialResult>>,
  names: { ours: string; scripts: string; reference: string },
  cpuScope = '',
): string {
  const { ours, scripts, reference } = names;
  const [o, s, r] = [byName[ours], byName[scripts], byName[reference]];
  return (
    `${what}, paired per round: its client code ${fmtRatioSpread(pairedRatio(o.usPerCycleRounds, s.usPerCycleRounds))} ` +
    `(${ours} ÷ ${scripts}), its scripts ${fmtRatioSpread(pairedRatio(s.usPerCycleRounds, r.usPerCycleRounds))} (${scripts} ÷ ${reference}); ` +
    `Redis CPU${cpuScope} ${scripts} ÷ ${reference} ${fmtRatioSpread(pairedRatio(s.cpuUsPerCycleRounds, r.cpuUsPerCycleRounds))}; ` +
    `client CPU per cycle ${ours} ${fmt(o.clientCpuUsPerCycle)} µs, ${scripts} ${fmt(s.clientCpuUsPerCycle)}, ${reference} ${fmt(r.clientCpuUsPerCycle)}.`
  );
}
