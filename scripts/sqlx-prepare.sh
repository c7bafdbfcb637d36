#!/usr/bin/env bash
# Refreshes the committed `.sqlx/` query data: migrates a scratch database and compiles
# every crate with the query macros checking against it (no sqlx-cli needed).
# Usage: scripts/sqlx-prepare.sh [--check]   (honours DATABASE_URL's server; uses database
# lps_sqlx). --check writes the data to a scratch directory and fails, listing the
# differences, unless it equals the committed `.sqlx/` (CI runs it: a query changed
# without its data refreshed fails there, not at a user's offline build).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/postgres.sh
check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac
lps_pg_ensure
admin_url=$DATABASE_URL
url=$(lps_pg_url_with_db "$admin_url" lps_sqlx)
psql "$admin_url" -qc 'drop database if exists lps_sqlx' -qc 'create database lps_sqlx'
# One transaction per migration, as sqlx applies them.
for f in migrations/*.sql; do psql "$url" -1 -v ON_ERROR_STOP=1 -q -f "$f"; done
if [ "$check" = 1 ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
else
  out=$PWD/.sqlx
  rm -rf "$out"
fi
mkdir -p "$out"
# Touch the sources so every query macro runs again.
find coordinator bench -name '*.rs' -exec touch {} +
# Only the crates with query macros.
SQLX_OFFLINE=false DATABASE_URL=$url SQLX_OFFLINE_DIR=$out cargo check -p lps-coordinator -p lps-bench --all-targets --quiet
if [ "$check" = 1 ]; then
  if ! diff -r -q .sqlx "$out" >&2; then
    echo "sqlx-prepare --check: .sqlx/ is stale (above: what differs); run scripts/sqlx-prepare.sh and commit .sqlx/" >&2
    exit 1
  fi
  echo "sqlx-prepare --check: .sqlx/ matches the queries ($(ls .sqlx | wc -l) queries)"
else
  echo "sqlx-prepare: $(ls .sqlx | wc -l) queries saved in .sqlx/"
fi
