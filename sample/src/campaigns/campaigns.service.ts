import { Injectable } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { currentLock, Deferred, Locked, LockService } from '../../../lib';
import type { AppConfig } from '../config/app-config';
import { ClaimStall } from '../debug/claim-stall';
import { SwitchableLocked } from '../locking/switchable-locked.decorator';
import type { Campaign, Coupon } from './campaign.entities';
import { CAMPAIGN_LOCK, campaignLockKey } from './campaign-lock-key';
import { AlreadyClaimedException, CampaignNotFoundException, LeaseLostException, SoldOutException } from './campaign.exceptions';
import { CampaignRepository } from './campaign.repository';

export interface CampaignView {
  id: string;
  stock: number;
  /** The counter on the campaign row. */
  issued: number;
  remaining: number;
  /** Coupon rows that really exist (differs from `issued` after an oversell's lost updates). */
  couponsIssued: number;
}

/** What a claim came to, as a value: the result of a deferred claim's job. */
export type ClaimResult = { outcome: 'issued'; coupon: Coupon } | { outcome: 'sold-out' } | { outcome: 'already-claimed' };

export interface ClaimDebug {
  /** Freeze point for the demo (see ClaimStall). */
  stall?: boolean;
}

@Injectable()
export class CampaignsService {
  private readonly instance: string;

  constructor(
    private readonly campaigns: CampaignRepository,
    private readonly locks: LockService,
    private readonly stall: ClaimStall,
    config: ConfigService<AppConfig, true>,
  ) {
    this.instance = config.get('INSTANCE', { infer: true });
  }

  /**
   * Issues one coupon if stock remains and the user has none yet: read, check, write — three steps
   * with awaits in between, correct only while no other claim of this campaign runs meanwhile on
   * ANY instance. Waits (bounded by the module's waitTimeout) for the campaign's lock; 409 when that
   * runs out. ttl and waitTimeout come from DistributedLockModule.forRootAsync (LOCK_TTL, CLAIM_WAIT_MS).
   */
  @SwitchableLocked(CAMPAIGN_LOCK, { onBusy: 'retry' })
  async claim(campaignId: string, userId: string, debug: ClaimDebug = {}): Promise<Coupon> {
    return this.issue(campaignId, userId, debug);
  }

  /**
   * The same claim, but a busy campaign does not make the caller wait: the call becomes a BullMQ job
   * (a `Deferred`, 202 over HTTP) that some instance's worker runs later under the same lock. Sold out
   * and already claimed are returned as results, not thrown, so such a job completes with its answer
   * (kept in BullMQ as the job's return value) instead of being retried and dead-lettered. Arguments
   * are plain strings: a job carries JSON (a DTO class instance would be refused, DeferArgumentError).
   * Always the distributed lock, whatever LOCK_MODE says: there is no in-process equivalent of 'defer'.
   */
  @Locked(CAMPAIGN_LOCK, { onBusy: 'defer' })
  async claimOrDefer(campaignId: string, userId: string): Promise<ClaimResult | Deferred> {
    try {
      return { outcome: 'issued', coupon: await this.issue(campaignId, userId, {}) };
    } catch (error) {
      if (error instanceof SoldOutException) return { outcome: 'sold-out' };
      if (error instanceof AlreadyClaimedException) return { outcome: 'already-claimed' };
      throw error; // no campaign, or the fence refused a stale write: the job fails and BullMQ retries it
    }
  }

  /** The claim itself; called with the campaign's lock held (or, LOCK_MODE=in-process, the process mutex). */
  private async issue(campaignId: string, userId: string, debug: ClaimDebug): Promise<Coupon> {
    // undefined with LOCK_MODE=in-process: then the write is unfenced, exactly like the incident's code.
    const fence = currentLock()?.fencingToken;
    const campaign = await this.loadForClaim(campaignId, fence);
    if (await this.campaigns.findCouponOf(campaignId, userId)) throw new AlreadyClaimedException(campaignId, userId);
    if (campaign.issued >= campaign.stock) throw new SoldOutException(campaignId);
    // Demo only (DEBUG_HOOKS=1): the worst moment to stall — everything checked, nothing written.
    if (debug.stall && this.stall.enabled) await this.stall.freezeHere({ campaignId, userId });
    // No `lock.signal` check before writing: it would only narrow the window in which the lease can
    // lapse unnoticed (a pause can still come right after the check). The fence closes it.
    const written = await this.campaigns.issueCoupon(campaign, userId, this.instance, fence);
    if (!written.accepted) throw new LeaseLostException(campaignId, fence!, written.lastFence);
    return written.value;
  }

  /** The campaign, read under the lock's fence when there is one (see CampaignRepository.findCampaignFenced). */
  private async loadForClaim(campaignId: string, fence: number | undefined): Promise<Campaign> {
    if (fence === undefined) {
      const campaign = await this.campaigns.findCampaign(campaignId);
      if (!campaign) throw new CampaignNotFoundException(campaignId);
      return campaign;
    }
    const read = await this.campaigns.findCampaignFenced(campaignId, fence);
    if (!read) throw new CampaignNotFoundException(campaignId);
    if (!read.accepted) throw new LeaseLostException(campaignId, fence, read.lastFence);
    return read.value;
  }

  /**
   * Creates the campaign or sets its stock. LockService by hand rather than a decorator: an admin
   * change must not queue behind a burst of claims (`onBusy: 'throw'`: 409 at once), the write
   * needs the lock's fencing token in hand, and `await using` releases it at the end of the block.
   */
  async upsert(campaignId: string, stock: number): Promise<Campaign> {
    // name: the same lock as the claims' @Locked(CAMPAIGN_LOCK) in the metrics (lock.name), never the campaign id.
    await using lock = await this.locks.acquire(campaignLockKey(campaignId), { onBusy: 'throw', name: CAMPAIGN_LOCK });
    const written = await this.campaigns.upsertCampaign(campaignId, stock, lock.fencingToken);
    if (!written.accepted) throw new LeaseLostException(campaignId, lock.fencingToken, written.lastFence);
    return written.value;
  }

  /** A read without the lock: a snapshot, good enough for a status page. */
  async view(campaignId: string): Promise<CampaignView> {
    const campaign = await this.campaigns.findCampaign(campaignId);
    if (!campaign) throw new CampaignNotFoundException(campaignId);
    const couponsIssued = await this.campaigns.countIssuedCoupons(campaignId);
    return {
      id: campaign.id,
      stock: campaign.stock,
      issued: campaign.issued,
      remaining: Math.max(0, campaign.stock - campaign.issued),
      couponsIssued,
    };
  }
}
