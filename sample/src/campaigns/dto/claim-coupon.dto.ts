import { IsString, Matches } from 'class-validator';

export class ClaimCouponDto {
  @IsString()
  @Matches(/^[\w.-]{1,64}$/, { message: 'userId must be 1-64 letters, digits, "_", "-" or "."' })
  userId!: string;
}
