/**
 * Bounded waits for "nothing is left running" (a drain's end): each `until` resolves true once its
 * condition holds (checked at once and whenever the owner says its state `changed()`), false once `ms`
 * passed first. close() waits for all work, and a close() called from work under a lock of the same
 * service waits for all but that work (see ShutdownDrain), so more than one wait may be pending.
 */
export class IdleWait {
  private readonly waits = new Set<{ done: () => boolean; finish: (drained: boolean) => void }>();

  until(done: () => boolean, ms: number): Promise<boolean> {
    if (done()) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const wait = {
        done,
        finish: (drained: boolean) => {
          clearTimeout(timer);
          this.waits.delete(wait);
          resolve(drained);
        },
      };
      const timer = setTimeout(() => wait.finish(false), ms);
      this.waits.add(wait);
    });
  }

  /** The owner's state changed: every wait whose condition holds now ends. */
  changed(): void {
    for (const wait of this.waits) if (wait.done()) wait.finish(true);
  }
}
