import * as http from 'http';
import { requestJson } from './http-json';

export interface BurstOptions {
  ports: readonly number[];
  campaignId: string;
  claims: number;
  users: number;
  /**
   * Round 3: claim `index` carries the debug stall header and comes from `userId`, a user with no
   * other claim, so its checks pass and it really reaches the write.
   */
  stall?: { index: number; userId: string };
  /** Round 4: the deferring endpoint (POST /campaigns/:id/claims/deferred) instead of the waiting one. */
  deferred?: boolean;
  onSettled?: () => void;
}

export interface ClaimOutcome {
  index: number;
  userId: string;
  port: number;
  status: number;
  /** `reason` of the answer body (sold-out, already-claimed, stale-fence, timeout, busy, ...). */
  reason?: string;
  /** BullMQ job id of a 202 (deferred) answer. */
  jobId?: string;
  ms: number;
  /** Network-level failure (connection refused/reset), when there was no HTTP answer. */
  error?: string;
}

/**
 * Every claim at once (no pacing), round-robin over the instances like a load balancer. A user's
 * claims are consecutive (claim i comes from user floor(i * users / claims)), so they arrive
 * together on different instances — an impatient user double-clicking through the load balancer.
 */
export async function runBurst(opts: BurstOptions): Promise<ClaimOutcome[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  try {
    return await Promise.all(
      Array.from({ length: opts.claims }, async (_, index): Promise<ClaimOutcome> => {
        const port = opts.ports[index % opts.ports.length];
        const stalled = index === opts.stall?.index;
        const userId = stalled ? opts.stall!.userId : `user-${String(Math.floor((index * opts.users) / opts.claims)).padStart(4, '0')}`;
        const headers: Record<string, string> = stalled ? { 'x-debug-stall-claim': '1' } : {};
        const started = performance.now();
        try {
          const path = `/campaigns/${opts.campaignId}/claims${opts.deferred ? '/deferred' : ''}`;
          const res = await requestJson(agent, port, 'POST', path, { userId }, headers);
          const ms = performance.now() - started;
          const body = typeof res.body === 'object' && res.body ? (res.body as Record<string, unknown>) : {};
          const reason = body.reason as string | undefined;
          const jobId = res.status === 202 ? (body.jobId as string | undefined) : undefined;
          return { index, userId, port, status: res.status, reason, jobId, ms };
        } catch (error) {
          return { index, userId, port, status: 0, error: (error as Error).message, ms: performance.now() - started };
        } finally {
          opts.onSettled?.();
        }
      }),
    );
  } finally {
    agent.destroy();
  }
}

/** Nearest-rank percentile of the latencies, in ms. */
export function percentile(outcomes: readonly ClaimOutcome[], p: number): number {
  const sorted = outcomes.map((o) => o.ms).sort((a, b) => a - b);
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

export function countStatus(outcomes: readonly ClaimOutcome[], status: number): number {
  return outcomes.filter((o) => o.status === status).length;
}
