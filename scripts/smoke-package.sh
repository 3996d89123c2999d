#!/usr/bin/env bash
# Proves the PACKED package as users install it: `npm pack`s this repo, installs the tarball into
# fresh scratch applications on NestJS 10 and 11 (CommonJS, terminus 11) and 12 (ESM-only, terminus
# 12), one after the other, and runs test/smoke/consumer-*.js against a real redis-server each starts
# on a free port: @Locked, LockService and the /terminus health indicator. Also compiles a consumer
# file against the installed types under moduleResolution node (Nest 11) and nodenext (Nest 12).
# All installs share one npm cache (the user's, --prefer-offline). Prints the total time.
set -euo pipefail
# Run through `npm run`, npm exports this repo's .npmrc settings as npm_config_* variables; the scratch apps'
# own installs would take allow-scripts from there as a command-line flag, which npm refuses in a project.
unset npm_config_allow_scripts NPM_CONFIG_ALLOW_SCRIPTS
repo="$(cd "$(dirname "$0")/.." && pwd)"
started=$SECONDS
node "$repo/scripts/ensure-redis.js"
REDIS_SERVER="$(node -e "console.log(require('$repo/scripts/ensure-redis.js').findRedisServer())")"
export REDIS_SERVER
work="$(mktemp -d)"
# The scratch apps hold ~100 MB of node_modules: removing them is part of the cost, so it is timed too.
trap 'rm -rf "$work"; echo "package smoke: $((SECONDS - started)) s in all, cleanup included"' EXIT
step() { echo "{\"step\":\"$1\",\"atSeconds\":$((SECONDS - started))}"; }
# prepack builds dist/ from lib/ (a clean build).
tarball="$work/$(cd "$repo" && npm pack --silent --pack-destination "$work" | tail -1)"
tsc="$repo/node_modules/.bin/tsc"
step packed

# A file a TypeScript user writes: the main entry and the /terminus subpath, types only checked.
write_consumer_types() {
  cat >"$1/consumer-types.ts" <<'TS'
import { LockService, type LockOptions } from 'nestjs-distributed-lock';
import { LockHealthIndicator, type LockHealthData, type LockHealthOptions } from 'nestjs-distributed-lock/terminus';

export async function probe(locks: LockService, indicator: LockHealthIndicator): Promise<number | undefined> {
  const options = { ttl: 1_000 } satisfies LockOptions;
  await (await locks.acquire('k', options)).release();
  const limits: LockHealthOptions = { maxRoundTrip: 100 };
  const result = await indicator.isHealthy('lock', limits);
  const data: LockHealthData = result.lock as unknown as LockHealthData;
  return data.roundTripMs;
}
TS
}

# smoke_app <name> <nest major> <terminus major> <cjs|esm> [moduleResolution to type-check with]
smoke_app() {
  local name=$1 nest=$2 terminus=$3 kind=$4 resolution=${5:-}
  local app="$work/$name"
  mkdir -p "$app" && cd "$app"
  if [ "$kind" = esm ]; then echo '{ "name": "smoke-app", "private": true, "type": "module" }' >package.json; else echo '{ "name": "smoke-app", "private": true }' >package.json; fi
  npm i --no-audit --no-fund --prefer-offline --loglevel=error "$tarball" "@nestjs/common@$nest" "@nestjs/core@$nest" "@nestjs/terminus@$terminus" \
    ioredis reflect-metadata rxjs >/dev/null
  step "$name installed"
  cp "$repo/test/smoke/smoke-checks.js" .
  if [ "$kind" = esm ]; then
    # smoke-checks.js is CommonJS; in a "type": "module" app it needs the .cjs extension.
    mv smoke-checks.js smoke-checks.cjs
    sed 's#./smoke-checks.js#./smoke-checks.cjs#' "$repo/test/smoke/consumer-esm.mjs" >consumer.mjs
    node consumer.mjs
  else
    cp "$repo/test/smoke/consumer-cjs.js" consumer.js
    node consumer.js
  fi
  step "$name ran"
  if [ -n "$resolution" ]; then
    write_consumer_types "$app"
    # Under node (no "exports"), typesVersions maps the subpath: our .d.ts files are checked too
    # (skipLibCheck false), so a type they name but the build stripped would fail here. Under
    # nodenext, the "types" conditions of "exports" resolve it; the libraries' own .d.ts are skipped (time).
    local module=commonjs skip=false
    [ "$resolution" = nodenext ] && module=nodenext && skip=true
    "$tsc" --noEmit --strict --skipLibCheck "$skip" --experimentalDecorators --target es2022 --types node --typeRoots "$repo/node_modules/@types" \
      --module "$module" --moduleResolution "$resolution" consumer-types.ts
    step "$name types ok (moduleResolution $resolution)"
  fi
}

smoke_app nest10 10 11 cjs
smoke_app nest11 11 11 cjs node
smoke_app nest12 12 12 esm nodenext
echo "package smoke: ok ($(basename "$tarball"), $(du -k "$tarball" | cut -f1) KiB)"
