import * as os from 'os';
import { LockMode, parseLockMode } from '../locking/lock-mode';

/** Everything the app reads from the environment, parsed and checked once at start-up. */
export interface AppConfig {
  /** Where the distributed locks live. */
  REDIS_URL: string;
  /** Lease of the claim lock in ms; the watchdog renews it while a claim runs. */
  LOCK_TTL: number;
  /** How long a claim waits for its campaign's lock before answering 409. */
  CLAIM_WAIT_MS: number;
  /** The SQLite file every instance opens. */
  DB_PATH: string;
  /** Simulated round trip of each database call in ms (0: just yield to the event loop), as with a database server. */
  DB_LATENCY_MS: number;
  /** 0 picks a free port (announced on stdout). */
  PORT: number;
  /** Name written next to every coupon and settlement this instance makes. */
  INSTANCE: string;
  LOCK_MODE: LockMode;
  /** Enables the x-debug-stall-claim header the demo uses to freeze an instance inside a claim. Never in production. */
  DEBUG_HOOKS: boolean;
}

function integer(env: Record<string, unknown>, name: string, fallback: number, min: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be an integer >= ${min}; got ${JSON.stringify(raw)}.`);
  return value;
}

/** ConfigModule's `validate`: turns process.env into an AppConfig or refuses to start. */
export function validateConfig(env: Record<string, unknown>): AppConfig {
  const str = (name: string, fallback: string) => (typeof env[name] === 'string' && env[name] !== '' ? env[name] : fallback);
  return {
    REDIS_URL: str('REDIS_URL', 'redis://127.0.0.1:6379'),
    LOCK_TTL: integer(env, 'LOCK_TTL', 10_000, 100),
    CLAIM_WAIT_MS: integer(env, 'CLAIM_WAIT_MS', 10_000, 0),
    DB_PATH: str('DB_PATH', 'coupons.sqlite'),
    DB_LATENCY_MS: integer(env, 'DB_LATENCY_MS', 0, 0),
    PORT: integer(env, 'PORT', 3000, 0),
    INSTANCE: str('INSTANCE', `${os.hostname()}-${process.pid}`),
    LOCK_MODE: parseLockMode(env.LOCK_MODE as string | undefined),
    DEBUG_HOOKS: env.DEBUG_HOOKS === '1' || env.DEBUG_HOOKS === 'true',
  };
}
