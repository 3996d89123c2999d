/**
 * Type test, checked by `npm run typecheck` and, through the compiler API, by test/unit/ioredis-option-keys.spec.ts
 * (never run): the names lib/options/ioredis-option-keys.ts lists are exactly those of the installed ioredis's
 * `RedisOptions` (and of a Sentinel address). An ioredis that adds or renames an option fails here, naming it, until
 * the list follows: a new option missing from it would be refused as a near miss of an old one, and a renamed one
 * would no longer be recognised in its old spelling.
 */
import type { RedisOptions } from 'ioredis';
import { IOREDIS_OPTION_KEYS, SENTINEL_ADDRESS_KEYS } from '../../lib/options/ioredis-option-keys';

type Listed = (typeof IOREDIS_OPTION_KEYS)[number];
type SentinelAddress = NonNullable<RedisOptions['sentinels']>[number];

/** `true` when nothing is left over; otherwise the names left over, which the error then shows. */
type NoneLeft<Names> = [Names] extends [never] ? true : Names;

// Names ioredis reads that the list lacks (added in an ioredis upgrade): add them.
export const noneMissing: NoneLeft<Exclude<keyof RedisOptions, Listed>> = true;
// Names the list has that ioredis no longer reads (renamed or removed): follow the rename.
export const noneExtra: NoneLeft<Exclude<Listed, keyof RedisOptions>> = true;
export const sentinelNoneMissing: NoneLeft<Exclude<keyof SentinelAddress, (typeof SENTINEL_ADDRESS_KEYS)[number]>> = true;
export const sentinelNoneExtra: NoneLeft<Exclude<(typeof SENTINEL_ADDRESS_KEYS)[number], keyof SentinelAddress>> = true;
