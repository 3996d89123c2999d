/**
 * Reading a worker's settings from its environment. A missing variable is a bug in the test that
 * started the worker: it fails at start, with the worker's name, not halfway through a run.
 */

/** `env(name)`: the variable's value, or an error `<workerName>: env <name> is required`. */
export function requiredEnv(workerName: string): (name: string) => string {
  return (name) => {
    const value = process.env[name];
    if (value === undefined) throw new Error(`${workerName}: env ${name} is required`);
    return value;
  };
}

/** What every counter-hammering worker needs: WORKER, KEY, COUNTER_KEY, SECTIONS, HOLD_MS (optional). */
export function hammerSettings(env: (name: string) => string, defaultHoldMs: string) {
  return {
    worker: env('WORKER'),
    key: env('KEY'),
    counterKey: env('COUNTER_KEY'),
    sections: Number(env('SECTIONS')),
    holdMs: Number(process.env.HOLD_MS ?? defaultHoldMs),
  };
}

/** Resolves on the parent's first message, so all contenders start together. */
export const parentSaysGo = (): Promise<void> => new Promise<void>((resolve) => process.once('message', () => resolve()));
