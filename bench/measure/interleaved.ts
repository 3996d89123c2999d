/**
 * Rounds interleaved across libraries, starting with a different library each round, so drift and
 * noise hit all alike. Each library's list is in round order: index r of every library is round r.
 */
export async function interleavedRounds<A extends { name: string }, T>(
  adapters: readonly A[],
  rounds: number,
  run: (adapter: A) => Promise<T>,
): Promise<Record<string, T[]>> {
  const byLib: Record<string, T[]> = Object.fromEntries(adapters.map((a) => [a.name, [] as T[]]));
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < adapters.length; i++) {
      const adapter = adapters[(i + round) % adapters.length];
      byLib[adapter.name].push(await run(adapter));
    }
  }
  return byLib;
}
