// The ESM consumer of the package smoke (Nest 12 is ESM-only, so not under jest). Our package is
// CommonJS: Node hands it to ESM as a default export; it in turn require()s the ESM-only Nest 12.
import 'reflect-metadata';
import { createRequire } from 'node:module';
import * as common from '@nestjs/common';
import * as core from '@nestjs/core';
import * as terminus from '@nestjs/terminus';
import lock from 'nestjs-distributed-lock';
import lockTerminus from 'nestjs-distributed-lock/terminus';
import lockTesting from 'nestjs-distributed-lock/testing';

const require = createRequire(import.meta.url);
const smoke = require('./smoke-checks.js');
const versionOf = (name) => require(`${name}/package.json`).version;
const versions = { nest: versionOf('@nestjs/core'), terminus: versionOf('@nestjs/terminus'), node: process.version, module: 'esm' };
try {
  const result = await smoke({ common, core, lock, lockTerminus, lockTesting, terminus });
  console.log(JSON.stringify({ ...versions, ...result }));
  process.exit(result.ok ? 0 : 1);
} catch (error) {
  console.error(error);
  process.exit(1);
}
