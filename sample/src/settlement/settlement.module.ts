import { Module } from '@nestjs/common';
import { SettlementJob } from './settlement.job';
import { SettlementRepository } from './settlement.repository';

@Module({ providers: [SettlementJob, SettlementRepository] })
export class SettlementModule {}
