#!/bin/sh
# Installs the npm dependencies when they are missing or older than the lock file,
# so that `npm start` and `npm test` work on a fresh clone. Idempotent.
set -e
cd "$(dirname "$0")/.."
stamp=node_modules/.seed-installed
if [ ! -x node_modules/.bin/node ] || [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ] || [ package.json -nt "$stamp" ]; then
  echo "[seed] installing npm dependencies" >&2
  npm install --no-audit --no-fund --loglevel=error >&2
  touch "$stamp"
fi
