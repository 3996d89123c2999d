#!/usr/bin/env node
'use strict';
/**
 * Every suite runs against real redis-server processes it starts itself (never a mock, never the
 * system instance), so the binary must exist before jest starts. Used by `npm test`'s pretest, by
 * jest's globalSetup and by the demo.
 */
const fs = require('fs');
const path = require('path');
const { ensureDebianPackage, runAsCli } = require('./debian-package');

// Non-login shells and CI images often lack the sbin directories on PATH.
const EXTRA_DIRS = ['/usr/bin', '/usr/sbin', '/usr/local/bin'];
const NOT_INSTALLED = 'redis-server is not installed. Install it with: sudo apt-get install -y redis-server';

function isExecutable(file) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/** @returns {string | null} absolute path of redis-server, or null */
function findRedisServer() {
  const dirs = (process.env.PATH || '').split(path.delimiter).filter(Boolean).concat(EXTRA_DIRS);
  for (const dir of dirs) {
    const candidate = path.join(dir, 'redis-server');
    if (isExecutable(candidate)) return candidate;
  }
  return null;
}

/**
 * Returns the redis-server path, installing it with apt when running as root. Throws an Error
 * whose message says how to install it otherwise: as a library (jest globalSetup) exiting the
 * caller's process would be rude; the CLI entry below turns the throw into stderr + exit 1.
 * The package may auto-start a service on 6379; the harness never relies on it.
 * @returns {string}
 */
function ensureRedisServer() {
  return ensureDebianPackage({ find: findRedisServer, pkg: 'redis-server', notInstalled: NOT_INSTALLED });
}

module.exports = { ensureRedisServer, findRedisServer, NOT_INSTALLED };

// A harness without Redis cannot test anything.
if (require.main === module) runAsCli(ensureRedisServer, 'redis-server');
