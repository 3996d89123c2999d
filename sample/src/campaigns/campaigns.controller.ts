import { Body, Controller, Get, Headers, HttpCode, Param, Post, Put } from '@nestjs/common';
import { Deferred } from '../../../lib';
import type { Campaign, Coupon } from './campaign.entities';
import { AlreadyClaimedException, SoldOutException } from './campaign.exceptions';
import { CampaignsService, CampaignView } from './campaigns.service';
import { CampaignParams } from './dto/campaign-params.dto';
import { ClaimCouponDto } from './dto/claim-coupon.dto';
import { UpsertCampaignDto } from './dto/upsert-campaign.dto';

@Controller('campaigns')
export class CampaignsController {
  constructor(private readonly campaigns: CampaignsService) {}

  @Put(':id')
  upsert(@Param() { id }: CampaignParams, @Body() dto: UpsertCampaignDto): Promise<Campaign> {
    return this.campaigns.upsert(id, dto.stock);
  }

  @Get(':id')
  view(@Param() { id }: CampaignParams): Promise<CampaignView> {
    return this.campaigns.view(id);
  }

  /** 201 coupon · 410 sold out · 422 already has one · 409 lock busy/lost, retry · 400 invalid body. */
  @Post(':id/claims')
  @HttpCode(201)
  claim(@Param() { id }: CampaignParams, @Body() dto: ClaimCouponDto, @Headers('x-debug-stall-claim') stall?: string): Promise<Coupon> {
    return this.campaigns.claim(id, dto.userId, { stall: stall === '1' });
  }

  /**
   * The deferring claim (demo round 4): 202 with the job id when the campaign's lock is busy (the claim
   * runs later; its result is the job's return value), else the same answers as above, at once.
   */
  @Post(':id/claims/deferred')
  @HttpCode(201)
  async claimDeferred(@Param() { id }: CampaignParams, @Body() dto: ClaimCouponDto): Promise<Coupon | Deferred> {
    const result = await this.campaigns.claimOrDefer(id, dto.userId);
    if (result instanceof Deferred) return result;
    if (result.outcome === 'sold-out') throw new SoldOutException(id);
    if (result.outcome === 'already-claimed') throw new AlreadyClaimedException(id, dto.userId);
    return result.coupon;
  }
}
