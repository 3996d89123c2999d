import { luaScript } from '../lua-script';
import { ABANDON_SCRIPT, SHARDED_ABANDON_SCRIPT } from './abandon.script';
import { ACQUIRE_SCRIPT } from './acquire.script';
import { HEALTH_PROBE_SCRIPT } from './health-probe.script';
import { IS_LOCKED_SCRIPT } from './is-locked.script';
import { PERMISSION_CHECK_SCRIPT } from './permission-check.script';
import { PASS_ON_SCRIPT, SHARDED_PASS_ON_SCRIPT } from './pass-on.script';
import { RELEASE_SCRIPT, SHARDED_RELEASE_SCRIPT } from './release.script';
import { RENEW_SCRIPT } from './renew.script';

/** Every script the store runs, called by SHA1 with an EVAL fallback (see lua-script.ts). */
export const LOCK_SCRIPTS = {
  acquire: luaScript(4, ACQUIRE_SCRIPT),
  release: luaScript(4, RELEASE_SCRIPT),
  renew: luaScript(1, RENEW_SCRIPT),
  abandon: luaScript(4, ABANDON_SCRIPT),
  passOn: luaScript(4, PASS_ON_SCRIPT),
  isLocked: luaScript(1, IS_LOCKED_SCRIPT),
} as const;

/** The scripts that may hand a lock over (and so announce it), in one of their two variants. */
export interface HandoverScripts {
  readonly release: typeof LOCK_SCRIPTS.release;
  readonly abandon: typeof LOCK_SCRIPTS.abandon;
  readonly passOn: typeof LOCK_SCRIPTS.passOn;
}

/** PUBLISH: a single Redis, Sentinel, or a Cluster without sharded pub/sub. The very scripts of LOCK_SCRIPTS. */
export const PUBLISHING_SCRIPTS: HandoverScripts = LOCK_SCRIPTS;

/** SPUBLISH: a Redis 7 Cluster, on a channel in the lock's own slot. */
export const SHARDED_PUBLISHING_SCRIPTS: HandoverScripts = {
  release: luaScript(4, SHARDED_RELEASE_SCRIPT),
  abandon: luaScript(4, SHARDED_ABANDON_SCRIPT),
  passOn: luaScript(4, SHARDED_PASS_ON_SCRIPT),
};

/** The health check's write (not a lock operation: apart from LOCK_SCRIPTS). */
export const HEALTH_PROBE = luaScript(1, HEALTH_PROBE_SCRIPT);

/** Startup's check of the module's Redis user (not a lock operation either). */
export const PERMISSION_CHECK = luaScript(1, PERMISSION_CHECK_SCRIPT);
