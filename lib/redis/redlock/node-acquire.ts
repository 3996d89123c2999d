/** One node's answer to an acquire attempt (REDLOCK_ACQUIRE_SCRIPT's reply). */
export type NodeAcquire =
  | { kind: 'ours'; fence: number; validFor: number }
  | { kind: 'busy'; holderTtl: number; position: number; lastFence: number; holder: string }
  | { kind: 'recovering'; left: number };

export function nodeAcquire(raw: unknown): NodeAcquire {
  const reply = raw as Array<number | string>;
  if (reply[0] === 1) return { kind: 'ours', fence: Number(reply[1]), validFor: Number(reply[2]) };
  if (reply[0] === 2) return { kind: 'recovering', left: Number(reply[1]) };
  return {
    kind: 'busy',
    holderTtl: Number(reply[1]),
    position: Number(reply[2] ?? -1),
    lastFence: Number(reply[3] ?? 0),
    holder: String(reply[4] ?? ''),
  };
}
