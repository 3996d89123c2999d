/** One node's answer to one call: its reply, or why there was none (an Error; our own typed ones pass through). */
export type Vote<T> = { ok: true; value: T } | { ok: false; error: Error };

/** Shortest grace given to the last nodes once a majority answered without agreeing (timer granularity). */
const MIN_GRACE_MS = 2;

/** ⌊N/2⌋ + 1: any two majorities of the same N nodes share at least one node. */
export const quorumOf = (nodes: number): number => Math.floor(nodes / 2) + 1;

/**
 * Sends `ask` to every node at once and resolves with each node's vote (undefined: still pending)
 * as soon as `decided(votes)` says the outcome cannot change, or once every node answered. Each
 * call is bounded by its node's own timeout, so this is bounded by the slowest bound, never more.
 */
export function askAll<N, T>(
  nodes: readonly N[],
  ask: (node: N, index: number) => Promise<T>,
  decided: (votes: ReadonlyArray<Vote<T> | undefined>) => boolean = () => false,
  /**
   * Once `when(votes)` holds (e.g. a majority answered without agreeing), the rest get as long again
   * as that took (at least MIN_GRACE_MS), not their whole bound: a frozen node must not make every
   * undecided attempt wait for its timeout.
   */
  grace?: {
    when: (votes: ReadonlyArray<Vote<T> | undefined>) => boolean;
    /** Shortest grace (ms; default MIN_GRACE_MS). */
    minMs?: number;
  },
  /** Told each vote that arrives after the outcome was decided (the caller may owe that node a give-back). */
  late?: LateVotes<T>,
): Promise<Array<Vote<T> | undefined>> {
  return new Promise((resolve) => {
    const votes: Array<Vote<T> | undefined> = nodes.map(() => undefined);
    const sentAt = performance.now();
    let pending = nodes.length;
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    const finish = () => {
      if (done) return;
      done = true;
      if (timer) clearTimeout(timer);
      resolve([...votes]);
    };
    const settle = (index: number, vote: Vote<T>) => {
      votes[index] = vote;
      pending--;
      if (done) return late?.receive(index, vote);
      if (pending === 0 || decided(votes)) return finish();
      if (grace && !timer && grace.when(votes)) {
        timer = setTimeout(finish, Math.max(grace.minMs ?? MIN_GRACE_MS, Math.ceil(performance.now() - sentAt)));
        timer.unref();
      }
    };
    nodes.forEach((node, i) => {
      let call: Promise<T>;
      try {
        call = ask(node, i);
      } catch (error) {
        call = Promise.reject(error);
      }
      call.then(
        (value) => settle(i, { ok: true, value }),
        (error: unknown) => settle(i, { ok: false, error: error instanceof Error ? error : new Error(String(error)) }),
      );
    });
  });
}

/**
 * Votes that arrive after askAll resolved (and replies that came after a node's own deadline had failed
 * the call: RedlockStore.acquire adds those), kept until the caller, having decided, says what to do
 * with them (`handle`), then handed to it as they come. A reply can be read between askAll's
 * resolution and the caller's continuation, so none may be dropped for arriving early.
 */
export class LateVotes<T> {
  private early: Array<[number, Vote<T>]> = [];
  private handler?: (index: number, vote: Vote<T>) => void;

  receive(index: number, vote: Vote<T>): void {
    if (this.handler) this.handler(index, vote);
    else this.early.push([index, vote]);
  }

  handle(handler: (index: number, vote: Vote<T>) => void): void {
    this.handler = handler;
    const early = this.early;
    this.early = [];
    for (const [index, vote] of early) handler(index, vote);
  }
}

/** Votes that are answers (not failures or pending) and satisfy `test`. */
export function count<T>(votes: ReadonlyArray<Vote<T> | undefined>, test: (value: T) => boolean = () => true): number {
  let n = 0;
  for (const v of votes) if (v?.ok && test(v.value)) n++;
  return n;
}

/** Indexes of the votes that are answers satisfying `test`: the nodes `count` counts. */
export function indexesOf<T>(votes: ReadonlyArray<Vote<T> | undefined>, test: (value: T) => boolean): number[] {
  const indexes: number[] = [];
  votes.forEach((v, i) => {
    if (v?.ok && test(v.value)) indexes.push(i);
  });
  return indexes;
}

/** The first failure among the votes, for an error's cause. */
export function firstFailure<T>(votes: ReadonlyArray<Vote<T> | undefined>): Error | undefined {
  for (const v of votes) if (v && !v.ok) return v.error;
  return undefined;
}
