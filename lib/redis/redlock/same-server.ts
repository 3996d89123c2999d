import { LockOptionsError } from '../../errors/lock-options.error';

/** `run_id` of a server's `INFO server`: random per server process, so two nodes that report the same one are one server. */
export const runIdOf = (info: string): string | undefined => /^run_id:([0-9a-f]+)/m.exec(info)?.[1];

/**
 * Two entries of `nodes` that reached one server: through addresses the options cannot tell apart (a DNS alias, a
 * proxy or load balancer in front, 127.0.0.1 and the host's own address, an IPv4-mapped IPv6 address). That server's
 * votes counted twice, so it alone was a majority of three: with the third node down every lock was still granted,
 * by one server, and its loss stopped them all.
 */
export function sameServerRefusal(index: number, target: string, earlierIndex: number, earlierTarget: string, runId: string): LockOptionsError {
  return new LockOptionsError(
    `nodes[${index}]`,
    `${target} is the same Redis server as nodes[${earlierIndex}] (${earlierTarget}): both report run_id ${runId}. ` +
      'One server counted twice is a majority of one. Each entry must be a different, independent Redis master; check for an alias, ' +
      'proxy or load balancer in front of the same server.',
  );
}
