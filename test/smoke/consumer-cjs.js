'use strict';
// The CommonJS consumer of the package smoke (Nest 10 and 11): plain require().
require('reflect-metadata');
const smoke = require('./smoke-checks.js');

const lock = require('nestjs-distributed-lock');
// The main entry must not load the optional peer (a user without terminus pays nothing).
const terminusLoadedEarly = Object.keys(require.cache).some((file) => file.includes('@nestjs/terminus'));
const mods = {
  common: require('@nestjs/common'),
  core: require('@nestjs/core'),
  lock,
  lockTerminus: require('nestjs-distributed-lock/terminus'),
  lockTesting: require('nestjs-distributed-lock/testing'),
  terminus: require('@nestjs/terminus'),
};
const versions = {
  nest: require('@nestjs/core/package.json').version,
  terminus: require('@nestjs/terminus/package.json').version,
  node: process.version,
  module: 'cjs',
};
smoke(mods).then(
  (result) => {
    const ok = result.ok && !terminusLoadedEarly;
    console.log(JSON.stringify({ ...versions, ...result, terminusLoadedEarly, ok }));
    process.exit(ok ? 0 : 1);
  },
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
