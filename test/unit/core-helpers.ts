import type Redis from 'ioredis';
import { LockService } from '../../lib';
import type { DistributedLockModuleOptions } from '../../lib';
import { commandStats } from '../harness/command-stats';

/** Services made by a suite, closed in afterEach so no watchdog, timer or connection survives a test. */
export class ServicePool {
  private readonly services: LockService[] = [];

  constructor(private readonly url: () => string) {}

  async make(options: Partial<DistributedLockModuleOptions> = {}): Promise<LockService> {
    const service = new LockService({ redis: this.url(), keyPrefix: 'test:', ...options });
    this.services.push(service);
    await service.onModuleInit();
    return service;
  }

  async closeAll(): Promise<void> {
    await Promise.all(this.services.splice(0).map((s) => s.close()));
  }
}

/** Calls of one Redis command, from INFO commandstats (counts commands run inside scripts separately). */
export async function commandCalls(client: Redis, command: string): Promise<number> {
  return (await commandStats(client))[command] ?? 0;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls `check` every `everyMs` until it returns true or `timeoutMs` passed; returns whether it did. */
export async function pollUntil(check: () => boolean | Promise<boolean>, timeoutMs: number, everyMs = 5): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (performance.now() >= deadline) return false;
    await sleep(everyMs);
  }
}
