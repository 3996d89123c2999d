import type { CommandDeadlines } from './command-deadlines';
import type { LockRedisKeys } from './lock-redis-keys';
import { lockStateError } from './lock-state';
import { CommandArg, isNoScript, LuaScript, ScriptRunner } from './lua-script';

/**
 * One script call the way every store sends it: bounded by `deadlines` (a NOSCRIPT reply is answered
 * once with the script's text, unless `retryIf` says otherwise), parsed by `parse`, and a script's
 * refusal of damaged state turned into `LockStateError` naming the key. `late`: see CommandDeadlines.bound.
 */
export function runBoundedScript<T = unknown>(
  deadlines: CommandDeadlines,
  scripts: ScriptRunner,
  script: LuaScript,
  operation: string,
  keys: LockRedisKeys,
  args: readonly CommandArg[],
  parse?: (reply: unknown) => T,
  retryIf: (error: unknown) => boolean = isNoScript,
  late?: (reply: unknown) => void,
): Promise<T> {
  return deadlines.bound(
    operation,
    (attempt) => scripts.run(script, args, attempt),
    parse,
    retryIf,
    (error) => lockStateError(keys, operation, error),
    late,
  );
}
