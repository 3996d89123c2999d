import { Matches } from 'class-validator';

/** Campaign ids become part of lock keys and URLs: keep them plain. */
export class CampaignParams {
  @Matches(/^[\w.-]{1,64}$/, { message: 'campaign id must be 1-64 letters, digits, "_", "-" or "."' })
  id!: string;
}
