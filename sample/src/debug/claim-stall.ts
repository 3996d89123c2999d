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
 * `x-debug-stall-claim: 1` announces that it has read and checked everything and is about to write,
 * while holding the campaign lock, and then waits until the process has been frozen (SIGSTOP) and thawed (SIGCONT)
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
    // Read the clock BEFORE announcing: the demo reacts within microseconds, so the freeze may land
    // before the next statement runs, and a clock read after it would hide the gap.
    const announcedAt = performance.now();
    announce('claim-stalled', { instance: this.instance, fence: lock?.fencingToken ?? null, ...details });
    const frozenMs = await waitUntilFrozenAndThawed(announcedAt);
    // isHeld() checks the lease deadline against this process's clock: false after a freeze longer than the TTL.
    announce('claim-resumed', { instance: this.instance, frozenMs, leaseHeld: lock ? lock.isHeld() : null, ...details });
  }
}

/** Resolves with the length of the freeze (0 if none came within MAX_STALL_MS). */
async function waitUntilFrozenAndThawed(start: number): Promise<number> {
  let last = start;
  for (;;) {
    const now = performance.now();
    if (now - last > FREEZE_GAP_MS) return Math.round(now - last);
    if (now - start > MAX_STALL_MS) return 0;
    last = now;
    await sleep(10);
  }
}
