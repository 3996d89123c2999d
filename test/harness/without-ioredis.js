'use strict';
/**
 * `node -r ./without-ioredis.js …`: a process in which ioredis cannot be loaded, as for a user who
 * installed the package without it. Resolving 'ioredis' (or a file inside it) throws, so any code
 * path that would load it fails loudly instead of silently working.
 */
const Module = require('module');

const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (request === 'ioredis' || request.startsWith('ioredis/')) {
    throw Object.assign(new Error(`Cannot find module '${request}' (ioredis is not installed in this process)`), { code: 'MODULE_NOT_FOUND' });
  }
  return resolve.call(this, request, ...rest);
};
