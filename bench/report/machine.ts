import * as fs from 'node:fs';
import * as os from 'node:os';

export interface MachineInfo {
  node: string;
  cpu: string;
  cores: number;
  os: string;
  redis: string;
  date: string;
}

function cpuModel(): string {
  try {
    const match = /^model name\s*:\s*(.+)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'));
    if (match) return match[1].trim();
  } catch {
    // Not Linux: fall back to what Node reports.
  }
  return os.cpus()[0]?.model ?? 'unknown';
}

export function machineInfo(redisVersion: string): MachineInfo {
  return {
    node: process.version,
    cpu: cpuModel(),
    cores: os.cpus().length,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    redis: redisVersion,
    date: new Date().toISOString(),
  };
}
