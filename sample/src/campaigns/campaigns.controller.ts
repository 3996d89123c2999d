import { Body, Controller, Get, Headers, HttpCode, Param, Post, Put } from '@nestjs/common';
import type { Campaign, Coupon } from './campaign.entities';
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
}
