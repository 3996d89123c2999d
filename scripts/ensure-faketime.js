#!/usr/bin/env node
'use strict';
/**
 * The clock-jump test (T10) runs a lock holder under libfaketime (Debian package `faketime`, which
 * pulls in `libfaketime`) to move its wall clock by an hour mid-hold. Same rules as ensure-redis.js:
 * installed with apt when running as root, otherwise an error naming the one command to run.
 * Used by jest's globalSetup (install when root) and by the T10 suite (fail with the command).
 */
const fs = require('fs');
const { ensureDebianPackage, runAsCli } = require('./debian-package');

const NOT_INSTALLED = 'libfaketime is not installed (needed by the clock-jump test). Install it with: sudo apt-get install -y faketime';

// Debian installs it per architecture (e.g. /usr/lib/x86_64-linux-gnu/faketime/); a source build
// goes to /usr/local/lib/faketime/. The MT variant first: Node is multi-threaded, and that build
// serialises libfaketime's own state between threads.
const LIB_NAMES = ['libfaketimeMT.so.1', 'libfaketime.so.1'];
const ROOTS = ['/usr/lib', '/usr/local/lib', '/lib'];

function candidateDirs() {
  const dirs = [];
  for (const root of ROOTS) {
    dirs.push(`${root}/faketime`);
    let entries = [];
    try {
      entries = fs.readdirSync(root, { withFileTypes: true });
    } catch {
      continue;
    }
    for (const e of entries) if (e.isDirectory() && e.name.endsWith('-linux-gnu')) dirs.push(`${root}/${e.name}/faketime`);
  }
  return dirs;
}

/** @returns {string | null} absolute path of libfaketime's shared object, or null */
function findLibfaketime() {
  for (const name of LIB_NAMES) {
    for (const dir of candidateDirs()) {
      const file = `${dir}/${name}`;
      if (fs.existsSync(file)) return file;
    }
  }
  return null;
}

/**
 * Returns the libfaketime path, installing the package with apt when running as root. Throws an
 * Error whose message says how to install it otherwise.
 * @returns {string}
 */
function ensureLibfaketime() {
  return ensureDebianPackage({ find: findLibfaketime, pkg: 'faketime', notInstalled: NOT_INSTALLED });
}

module.exports = { ensureLibfaketime, findLibfaketime, NOT_INSTALLED };

if (require.main === module) runAsCli(ensureLibfaketime, 'libfaketime');
