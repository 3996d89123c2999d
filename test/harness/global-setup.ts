/**
 * jest globalSetup: fail the whole run up front when redis-server is missing, instead of every
 * suite failing on its own with a spawn ENOENT. libfaketime (only the clock-jump suite needs it)
 * is installed here too when running as root; otherwise that one suite fails with the command.
 * So is iptables (only the network-faults suite's partition cases need it, with `ip` and root);
 * without it those cases are skipped and say why.
 */
import { spawnSync } from 'child_process';
import { accessSync, constants } from 'fs';
import * as path from 'path';
// Plain CommonJS on purpose: the same file runs as `npm test`'s pretest without any TS tooling.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { ensureRedisServer } = require('../../scripts/ensure-redis.js') as {
  ensureRedisServer: () => string;
};
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { ensureLibfaketime } = require('../../scripts/ensure-faketime.js') as {
  ensureLibfaketime: () => string;
};
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { ensureDebianPackage } = require('../../scripts/debian-package.js') as {
  ensureDebianPackage: (spec: { find: () => string | null; pkg: string; notInstalled: string }) => string;
};

/** iptables lives in sbin, which non-login shells often lack on PATH. */
function findIptables(): string | null {
  for (const file of ['/usr/sbin/iptables', '/sbin/iptables', '/usr/bin/iptables']) {
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // not here
    }
  }
  return null;
}

export default async function globalSetup(): Promise<void> {
  try {
    ensureRedisServer();
  } catch (err) {
    throw new Error(
      `The test suites start their own redis-server processes, but none is available: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  try {
    ensureLibfaketime();
  } catch {
    // Not fatal for the other suites: core-clock-jump.spec.ts fails on its own, naming the command.
  }
  if (typeof process.getuid === 'function' && process.getuid() === 0) {
    try {
      ensureDebianPackage({ find: findIptables, pkg: 'iptables', notInstalled: 'iptables is not installed' });
    } catch {
      // Not fatal: the iptables cases of core-network-faults.spec.ts skip and print why.
    }
  }
  // Forked workers then start without loading TypeScript (see warm-ts-cache.js); not fatal: a cold
  // cache only makes the first workers slow.
  spawnSync(process.execPath, [path.join(__dirname, 'warm-ts-cache.js')], { stdio: 'inherit', timeout: 120_000 });
}
