import type Redis from 'ioredis';

/**
 * Calls per command Redis has served since it started or since CONFIG RESETSTAT, from `INFO
 * commandstats`: commands run inside scripts count too, under their own names (`set`, `incr` …).
 */
export async function commandStats(client: Redis): Promise<Record<string, number>> {
  const stats: Record<string, number> = {};
  for (const [, name, calls] of (await client.info('commandstats')).matchAll(/^cmdstat_(\S+?):calls=(\d+)/gm)) stats[name] = Number(calls);
  return stats;
}

/** Commands Redis has served in all, INFO itself left out (it is how they are counted): "did anything reach Redis?" */
export async function commandsServed(client: Redis): Promise<number> {
  const stats = await commandStats(client);
  return Object.entries(stats).reduce((sum, [name, calls]) => (name === 'info' ? sum : sum + calls), 0);
}
