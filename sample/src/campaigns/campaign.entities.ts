export interface Campaign {
  id: string;
  stock: number;
  /** Counter kept on the campaign row (what the service believes it handed out). */
  issued: number;
  /** Highest fencing token that wrote the row. */
  lastFence: number;
}

export interface Coupon {
  id: number;
  campaignId: string;
  userId: string;
  code: string;
  instance: string;
  /** Fencing token of the lock the claim held; null for writes made without a distributed lock. */
  fence: number | null;
  issuedAt: number;
}

/** A fenced write either lands or is refused because a newer lock holder already wrote the row. */
export type FencedWrite<T> = { accepted: true; value: T } | { accepted: false; lastFence: number };
