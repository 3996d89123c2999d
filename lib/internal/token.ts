import { randomBytes } from 'node:crypto';

/** 128 bits from the OS CSPRNG: no two holders, processes or restarts can share an owner token. */
export const newOwnerToken = (): string => randomBytes(16).toString('base64url');
