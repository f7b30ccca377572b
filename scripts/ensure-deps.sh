#!/bin/sh
# Installs the npm dependencies exactly as package-lock.json records them (`npm ci`) when they are missing
# or older than the lock file, so that `npm start` and `npm test` work on a fresh clone. Idempotent: npm
# writes node_modules/.package-lock.json on every install, and a copy newer than the lock is up to date.
set -e
cd "$(dirname "$0")/.."
if [ ! -x node_modules/.bin/node ] || [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "[seed] installing npm dependencies (npm ci)" >&2
  npm ci --no-audit --no-fund --loglevel=error >&2
fi
