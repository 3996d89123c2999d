import { Module } from '@nestjs/common';
import { ClaimStall } from '../debug/claim-stall';
import { CampaignRepository } from './campaign.repository';
import { CampaignsController } from './campaigns.controller';
import { CampaignsService } from './campaigns.service';

@Module({
  controllers: [CampaignsController],
  providers: [CampaignsService, CampaignRepository, ClaimStall],
})
export class CampaignsModule {}
