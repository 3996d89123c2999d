/**
 * The one lock key per campaign: claims (@Locked('campaign:<0>')) and stock changes (by hand) of a
 * campaign exclude each other. @Locked percent-escapes ':' and '%' in argument values; campaign ids
 * cannot contain either (CampaignParams), so this plain concatenation names the very same key.
 */
export const campaignLockKey = (campaignId: string) => `campaign:${campaignId}`;
