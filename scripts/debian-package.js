'use strict';
/**
 * What ensure-redis.js and ensure-faketime.js share: a test prerequisite comes from a Debian
 * package, installed with apt when running as root (CI on a fresh machine), otherwise named in an
 * error with the one command to run. Plain CommonJS: it runs before any TS tooling.
 */
const { spawnSync } = require('child_process');

function run(cmd, args, env) {
  const r = spawnSync(cmd, args, { stdio: 'inherit', env: { ...process.env, ...env } });
  return r.status === 0;
}

/**
 * `find()` again after installing `pkg` when root; throws `new Error(notInstalled)` when still missing.
 * @param {{ find: () => string | null, pkg: string, notInstalled: string }} spec
 * @returns {string}
 */
function ensureDebianPackage({ find, pkg, notInstalled }) {
  const found = find();
  if (found) return found;
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  if (isRoot) {
    run('apt-get', ['update']);
    run('apt-get', ['install', '-y', pkg], { DEBIAN_FRONTEND: 'noninteractive' });
    const installed = find();
    if (installed) return installed;
  }
  throw new Error(notInstalled);
}

/**
 * The command-line entry of an ensure-*.js script: stderr + exit 1 when missing, the path with --verbose.
 * @param {() => string} ensure
 * @param {string} label
 */
function runAsCli(ensure, label) {
  let found;
  try {
    found = ensure();
  } catch (err) {
    // One clear line beats many ENOENT spawn errors later.
    process.stderr.write(`${err && err.message ? err.message : err}\n`);
    process.exit(1);
  }
  if (process.argv.includes('--verbose')) process.stdout.write(`${label}: ${found}\n`);
}

module.exports = { ensureDebianPackage, runAsCli };
