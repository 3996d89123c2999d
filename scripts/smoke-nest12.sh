#!/usr/bin/env bash
# Proves the built package on NestJS 12 (ESM-only, so not under jest): packs this repo, installs it with
# Nest 12 in a scratch project and runs test/smoke/nest12-smoke.mjs against a real redis-server.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
node "$repo/scripts/ensure-redis.js"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$repo" && npm run build --silent && tarball="$(npm pack --silent --pack-destination "$work" | tail -1)"
cd "$work"
npm init -y >/dev/null
npm i --no-audit --no-fund --silent "./$tarball" @nestjs/common@12 @nestjs/core@12 ioredis reflect-metadata rxjs >/dev/null
cp "$repo/test/smoke/nest12-smoke.mjs" .
REDIS_SERVER="$(node -e "console.log(require('$repo/scripts/ensure-redis.js').findRedisServer())")" node nest12-smoke.mjs
