import { luaScript } from '../lua-script';
import { ABANDON_SCRIPT } from './abandon.script';
import { ACQUIRE_SCRIPT } from './acquire.script';
import { PASS_ON_SCRIPT } from './pass-on.script';
import { RELEASE_SCRIPT } from './release.script';
import { RENEW_SCRIPT } from './renew.script';

/** Every script the store runs, called by SHA1 with an EVAL fallback (see lua-script.ts). */
export const LOCK_SCRIPTS = {
  acquire: luaScript(4, ACQUIRE_SCRIPT),
  release: luaScript(4, RELEASE_SCRIPT),
  renew: luaScript(1, RENEW_SCRIPT),
  abandon: luaScript(4, ABANDON_SCRIPT),
  passOn: luaScript(4, PASS_ON_SCRIPT),
} as const;
