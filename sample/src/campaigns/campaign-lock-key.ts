/** The one lock key per campaign: claims and stock changes of a campaign exclude each other. */
export const campaignLockKey = (campaignId: string) => `campaign:${campaignId}`;
