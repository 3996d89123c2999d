/**
 * jest globalSetup: fail the whole run up front when redis-server is missing, instead of every
 * suite failing on its own with a spawn ENOENT. libfaketime (only the clock-jump suite needs it)
 * is installed here too when running as root; otherwise that one suite fails with the command.
 */
// Plain CommonJS on purpose: the same file runs as `npm test`'s pretest without any TS tooling.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { ensureRedisServer } = require('../../scripts/ensure-redis.js') as {
  ensureRedisServer: () => string;
};
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { ensureLibfaketime } = require('../../scripts/ensure-faketime.js') as {
  ensureLibfaketime: () => string;
};

export default async function globalSetup(): Promise<void> {
  try {
    ensureRedisServer();
  } catch (err) {
    throw new Error(
      `The test suites start their own redis-server processes, but none is available: ${
        err instanceof Error ? err.message : String(err)
      }`,
    );
  }
  try {
    ensureLibfaketime();
  } catch {
    // Not fatal for the other suites: core-clock-jump.spec.ts fails on its own, naming the command.
  }
}
