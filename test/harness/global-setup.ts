/**
 * jest globalSetup: fail the whole run up front when redis-server is missing, instead of every
 * suite failing on its own with a spawn ENOENT.
 */
// Plain CommonJS on purpose: the same file runs as `npm test`'s pretest without any TS tooling.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { ensureRedisServer } = require('../../scripts/ensure-redis.js') as {
  ensureRedisServer: () => string;
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
}
