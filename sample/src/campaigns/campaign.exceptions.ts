import { ConflictException, GoneException, NotFoundException, UnprocessableEntityException } from '@nestjs/common';

/**
 * The answers of a claim besides 201. `reason` lets clients (and the demo) tell them apart.
 * 409 is kept for "the lock said no, retry later" (busy, waited too long, lease lost).
 */
export class CampaignNotFoundException extends NotFoundException {
  constructor(campaignId: string) {
    super({ statusCode: 404, reason: 'no-campaign', message: `No campaign "${campaignId}".` });
  }
}

export class SoldOutException extends GoneException {
  constructor(campaignId: string) {
    super({ statusCode: 410, reason: 'sold-out', message: `Campaign "${campaignId}" has no coupons left.` });
  }
}

export class AlreadyClaimedException extends UnprocessableEntityException {
  constructor(campaignId: string, userId: string) {
    super({ statusCode: 422, reason: 'already-claimed', message: `User "${userId}" already has a coupon of "${campaignId}".` });
  }
}

/** The fence refused the write: our lease had lapsed and a newer holder wrote the row. Nothing was written. */
export class LeaseLostException extends ConflictException {
  constructor(campaignId: string, fence: number, lastFence: number) {
    super({
      statusCode: 409,
      reason: 'stale-fence',
      message:
        `The lock on campaign "${campaignId}" expired before this write (its fencing token ${fence} < ${lastFence}, already written by a newer holder); ` +
        `nothing was written. Retry the request.`,
    });
  }
}
