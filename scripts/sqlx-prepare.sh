#!/usr/bin/env bash
# Refreshes the committed `.sqlx/` query data: migrates a scratch database and compiles
# every crate with the query macros checking against it (no sqlx-cli needed).
# Usage: scripts/sqlx-prepare.sh   (honours DATABASE_URL's server; uses database lps_sqlx)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/postgres.sh
lps_pg_ensure
admin_url=$DATABASE_URL
url=$(lps_pg_url_with_db "$admin_url" lps_sqlx)
psql "$admin_url" -qc 'drop database if exists lps_sqlx' -qc 'create database lps_sqlx'
# One transaction per migration, as sqlx applies them.
for f in migrations/*.sql; do psql "$url" -1 -v ON_ERROR_STOP=1 -q -f "$f"; done
rm -rf .sqlx && mkdir -p .sqlx
# Touch the sources so every query macro runs again.
find coordinator bench -name '*.rs' -exec touch {} +
# Only the crates with query macros.
SQLX_OFFLINE=false DATABASE_URL=$url SQLX_OFFLINE_DIR=$PWD/.sqlx cargo check -p lps-coordinator -p lps-bench --all-targets --quiet
echo "sqlx-prepare: $(ls .sqlx | wc -l) queries saved in .sqlx/"
