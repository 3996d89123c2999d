import { markAclRefusal } from '../errors/acl-refusal-mark';
import { LockConnectionError } from '../errors/lock-connection.error';

export { isAclRefusal } from '../errors/acl-refusal-mark';

/**
 * Redis 7 refuses a command the user may not run (`NOPERM this user has no permissions to run the 'eval'
 * command`), a key or channel outside its patterns (`NOPERM … access one of the keys …`), and, inside a
 * script, either of them with `ERR The user executing the script can't …` (7.0).
 */
const ACL_REFUSAL = /^NOPERM |^ERR The user executing the script can't /;

/**
 * The error of a call Redis refused to the module's Redis user by its ACL, or undefined for any other
 * failure. Kept a `LockConnectionError` (the error the contract has for "the lock store cannot serve this
 * call"), but it says what it is: not an unreachable Redis that a retry outlives, but a permission that
 * every later call lacks too until it is granted, and which grant fixes it.
 */
export function aclRefusal(operation: string, error: unknown): LockConnectionError | undefined {
  const message = error instanceof Error ? error.message : String(error);
  if (!ACL_REFUSAL.test(message)) return undefined;
  const refusal = new LockConnectionError(
    `Redis refused ${operation} to the module's Redis user (${message.replace(/ script: [0-9a-f]+, on @user_script:\d+\.$/, '')}): ` +
      `its ACL lacks a permission that lock calls need, so they fail until it is granted, however often they are retried. ` +
      `${grantFor(message)} (the ACL a lock user needs: docs/operations.md, Redis data layout).`,
    operation,
    { cause: error },
  );
  return markAclRefusal(refusal);
}

/** The grant that lifts the refusal `message` describes; `<keyPrefix>` is the module's (channels are named after it). */
function grantFor(message: string): string {
  const command = /run the '([^']+)' command/.exec(message)?.[1];
  if (command === 'eval' || command === 'evalsha') {
    return 'Every lock call is a Lua script: grant ACL SETUSER <user> +@scripting (or at least +eval +evalsha)';
  }
  if (command) return `Grant ACL SETUSER <user> +${command}`;
  if (/keys/.test(message)) return 'Grant the lock keys: ACL SETUSER <user> ~<keyPrefix>*';
  if (/channel/.test(message)) return 'Grant the wake channels: ACL SETUSER <user> &<keyPrefix>waiters:*';
  // Inside a script Redis 7.0 does not name the command: the lock scripts call these.
  return 'Grant the commands the lock scripts call: ACL SETUSER <user> +@read +@write +time +publish (on a Redis 7 Cluster +spublish)';
}
