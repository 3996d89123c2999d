import { Injectable } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { setTimeout as sleep } from 'timers/promises';
import { currentLock } from '../../../lib';
import type { AppConfig } from '../config/app-config';
import { announce } from '../events/announce';

/** A timer that fires this much later than asked means the whole process was frozen meanwhile. */
const FREEZE_GAP_MS = 250;
/** Give up waiting to be frozen after this long (then the claim just continues). */
const MAX_STALL_MS = 15_000;

/**
 * Debug hook for the demo's third round (DEBUG_HOOKS=1 only): a claim marked with
 * `x-debug-stall-claim: 1` announces that it is between its read and its write, while holding the
 * campaign lock, and then waits until the process has been frozen (SIGSTOP) and thawed (SIGCONT)
 * from outside — the stand-in for a long GC pause or a VM migration at the worst moment.
 */
@Injectable()
export class ClaimStall {
  readonly enabled: boolean;
  private readonly instance: string;

  constructor(config: ConfigService<AppConfig, true>) {
    this.enabled = config.get('DEBUG_HOOKS', { infer: true });
    this.instance = config.get('INSTANCE', { infer: true });
  }

  async freezeHere(details: Record<string, unknown>): Promise<void> {
    const lock = currentLock();
    announce('claim-stalled', { instance: this.instance, fence: lock?.fencingToken ?? null, ...details });
    const frozenMs = await waitUntilFrozenAndThawed();
    // isHeld() checks the lease deadline against this process's clock: false after a freeze longer than the TTL.
    announce('claim-resumed', { instance: this.instance, frozenMs, leaseHeld: lock ? lock.isHeld() : null, ...details });
  }
}

/** Resolves with the length of the freeze (0 if none came within MAX_STALL_MS). */
async function waitUntilFrozenAndThawed(): Promise<number> {
  const start = performance.now();
  let last = start;
  while (last - start < MAX_STALL_MS) {
    await sleep(10);
    const now = performance.now();
    if (now - last > FREEZE_GAP_MS) return Math.round(now - last);
    last = now;
  }
  return 0;
}
