import type { LockKeySpec } from '../keys/key-source';
import type { LockedOptions } from './locked-options.interface';

/**
 * Metadata key under which `@Locked` records its keys and options on the decorated method, for
 * tooling and tests: `Reflect.getMetadata(LOCKED_METADATA, instance.method)` or
 * `reflector.get(LOCKED_METADATA, handler)`.
 */
export const LOCKED_METADATA = 'distributed-lock:locked';

/** What `LOCKED_METADATA` holds: the arguments given to `@Locked`, as given. */
export interface LockedMetadata {
  readonly keys: LockKeySpec;
  readonly options: Readonly<LockedOptions>;
}
