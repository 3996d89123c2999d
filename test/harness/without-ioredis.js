'use strict';
/**
 * `node -r ./without-ioredis.js …`: a process in which ioredis (and bullmq, which needs it) cannot be
 * loaded, as for a user who installed the package without them. Resolving either (or a file inside
 * one) throws, so any code path that would load them fails loudly instead of silently working.
 */
const Module = require('module');

const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (['ioredis', 'bullmq'].some((name) => request === name || request.startsWith(`${name}/`))) {
    throw Object.assign(new Error(`Cannot find module '${request}' (not installed in this process)`), { code: 'MODULE_NOT_FOUND' });
  }
  return resolve.call(this, request, ...rest);
};
