import { IsInt, Max, Min } from 'class-validator';

export class UpsertCampaignDto {
  @IsInt()
  @Min(0)
  @Max(1_000_000)
  stock!: number;
}
