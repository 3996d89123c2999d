import { lockKey } from '../../../lib';

/** The key template of a campaign: claims (@Locked) and stock changes (by hand) of one campaign exclude each other. */
export const CAMPAIGN_LOCK = 'campaign:<0>';

/** The very key `@Locked(CAMPAIGN_LOCK)` takes for this campaign (same escaping). */
export const campaignLockKey = (campaignId: string) => lockKey(CAMPAIGN_LOCK, campaignId);

/** The BullMQ queue of deferred claims (onBusy 'defer'), shared by every instance. */
export const CLAIM_QUEUE = 'coupon-claims';
