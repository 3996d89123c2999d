/**
 * One bounded wait for "nothing is left running" (a drain's end): `until` resolves true when the owner
 * says it became idle (`idleNow()`), false once `ms` passed first. One waiter at a time (close() waits once).
 */
export class IdleWait {
  private onIdle?: () => void;

  /** `idle`: whether the owner is idle already. */
  until(idle: boolean, ms: number): Promise<boolean> {
    if (idle) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => finish(false), ms);
      const finish = (drained: boolean) => {
        clearTimeout(timer);
        this.onIdle = undefined;
        resolve(drained);
      };
      this.onIdle = () => finish(true);
    });
  }

  /** The owner became idle: the wait (if any) ends. */
  idleNow(): void {
    this.onIdle?.();
  }
}
