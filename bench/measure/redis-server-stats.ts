import Redis from 'ioredis';

/** What Redis itself did between two snapshots. */
export interface ServerDelta {
  /** `total_commands_processed` delta: counts commands run inside Lua scripts too. */
  commands: number;
  /** `used_cpu_user + used_cpu_sys` delta in µs (the server's whole process). */
  cpuUs: number;
  /** `total_net_output_bytes` delta: replies and pub/sub deliveries written to clients. */
  outputBytes: number;
  /** Calls per command from `INFO commandstats` (script-internal calls included), for diagnosis. */
  byCommand: Record<string, number>;
}

type Snapshot = ServerDelta & { replyBytes: number };

function field(info: string, name: string): number {
  const match = new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info);
  if (!match) throw new Error(`INFO has no ${name}`);
  return Number(match[1]);
}

async function snapshot(admin: Redis): Promise<Snapshot> {
  // One INFO call for all sections, so the snapshot itself costs one (known) command.
  const info = await admin.info('everything');
  const byCommand: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) byCommand[m[1]] = Number(m[2]);
  return {
    commands: field(info, 'total_commands_processed'),
    cpuUs: Math.round((field(info, 'used_cpu_user') + field(info, 'used_cpu_sys')) * 1e6),
    outputBytes: field(info, 'total_net_output_bytes'),
    replyBytes: Buffer.byteLength(info) + 16,
    byCommand,
  };
}

/** Snapshots now; the returned function snapshots again and returns the difference. */
export async function startServerDelta(admin: Redis): Promise<() => Promise<ServerDelta>> {
  const before = await snapshot(admin);
  return async () => {
    const after = await snapshot(admin);
    const byCommand: Record<string, number> = {};
    for (const [name, calls] of Object.entries(after.byCommand)) {
      const d = calls - (before.byCommand[name] ?? 0);
      if (d > 0 && name !== 'info') byCommand[name] = d;
    }
    // The first INFO is counted after `before` was taken: take it out of the workload's figures.
    return {
      commands: after.commands - before.commands - 1,
      cpuUs: after.cpuUs - before.cpuUs,
      // The first INFO's reply was written after `before` was read: take it out too.
      outputBytes: after.outputBytes - before.outputBytes - before.replyBytes,
      byCommand,
    };
  };
}
