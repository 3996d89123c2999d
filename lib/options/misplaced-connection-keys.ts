import { LockOptionsError } from '../errors/lock-options.error';
import { IOREDIS_OPTION_KEYS } from './ioredis-option-keys';
import { MODULE_OPTION_KEYS } from './known-keys';

/**
 * Names of the lock module's own options that ioredis does not read. Written inside `redis` (or a Redlock node)
 * they were ignored by ioredis without a word, so the module kept its default: `redis: { host, port, ttl: 60000 }`
 * ran every lock with a 30 s lease. `keyPrefix` and `commandTimeout` are ioredis options too, so they are not here.
 */
const IOREDIS_KEYS: readonly string[] = IOREDIS_OPTION_KEYS;
const MODULE_ONLY_KEYS: readonly string[] = MODULE_OPTION_KEYS.filter((k) => !IOREDIS_KEYS.includes(k));

/**
 * Names other Redis clients use for what ioredis calls otherwise. ioredis ignores them, so the setting was lost:
 * `password` under another name connected as the default user; `database` locked in database 0. A name a later
 * ioredis reads itself is left to it.
 */
const OTHER_CLIENTS_NAMES: Readonly<Record<string, string>> = {
  auth: "'password' (and 'username' for an ACL user)",
  pass: "'password'",
  pwd: "'password'",
  user: "'username'",
  hostname: "'host'",
  server: "'host'",
  database: "'db'",
  ssl: "'tls' (an object of TLS options, {} for the defaults)",
  url: "the URL as the redis option itself: redis: 'redis://…' (rediss:// for TLS)",
  socket: "'host' and 'port' (node-redis' socket options), or 'path' for a Unix socket",
};

/**
 * Refuses, in ioredis options (`where`: `redis`, `nodes[i]`), a name that belongs elsewhere: one of the lock
 * module's options, or another client's name for an ioredis option. Checked before near misses, whose suggestion
 * for these was odd (`ttl`: did you mean `tls`?; `auth`: did you mean `path`?).
 */
export function assertNoMisplacedConnectionKeys(where: string, options: object): void {
  for (const key of Object.keys(options)) {
    if (MODULE_ONLY_KEYS.includes(key)) {
      throw new LockOptionsError(
        `${where}.${key}`,
        `is an option of the lock module, not of ioredis: ioredis ignores it, so the module's ${key} keeps its default. ` +
          `Move it out of ${where} into the module's options: DistributedLockModule.forRoot({ ${where.startsWith('nodes') ? 'nodes' : 'redis'}: …, ${key} }).`,
      );
    }
    if (Object.hasOwn(OTHER_CLIENTS_NAMES, key) && !IOREDIS_KEYS.includes(key)) {
      throw new LockOptionsError(
        `${where}.${key}`,
        `is not an ioredis option (another client's name): ioredis ignores it, so the setting is lost. Use ${OTHER_CLIENTS_NAMES[key]}.`,
      );
    }
  }
}
