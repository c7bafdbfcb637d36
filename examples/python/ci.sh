#!/usr/bin/env bash
# The Python example against the real stack, as CI runs it (scripts/test.sh calls this):
# builds the example (build.sh) and the LPS binaries (debug, reusing what `cargo test`
# built), starts the test malls and proxy gateway, a coordinator on a fresh database and a
# crawler node driving headless Chromium (scripts/lib/stack.sh), and runs check.py, which
# runs lowest_price.py and checks its answers against test-kit/catalog.toml. Exits non-zero
# when a check fails.
#
# Honours DATABASE_URL (the database `lps_python_example` next to it is dropped and made
# anew). Ports 28080-28107 and 28051. Logs go to .run/python-example/*.log.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/postgres.sh
source scripts/lib/chromium.sh
source scripts/lib/stack.sh

lps_pg_ensure
lps_chromium_ensure
examples/python/build.sh

lps_log "building LPS (debug)…"
cargo build --locked -q -p lps-coordinator -p lps-crawler-node -p lps-test-kit
bin=$PWD/target/debug

# A fresh database: the answers are crawled, not served from an earlier run's results.
db=lps_python_example
psql "$DATABASE_URL" -q -v ON_ERROR_STOP=1 \
  -c "drop database if exists $db with (force)" -c "create database $db"
export DATABASE_URL
DATABASE_URL=$(lps_pg_url_with_db "$DATABASE_URL" "$db")

run=$PWD/.run/python-example
cleanup() {
  local code=$?
  trap - EXIT INT TERM
  lps_stack_stop
  [ $code -eq 0 ] || lps_log "python example failed (exit $code); logs are in $run"
  exit $code
}
trap cleanup EXIT INT TERM
lps_stack_start "$bin" "$run" 28080 28051

examples/python/.venv/bin/python examples/python/check.py
