#!/usr/bin/env bash
# The whole LPS test suite, exactly as CI runs it (.ci/run calls this).
#
# Brings up what the tests need (PostgreSQL, Chromium + ChromeDriver, promtool), then: formatting,
# clippy with warnings as errors, the Helm chart checks, and every crate's tests (unit,
# #[sqlx::test] on real PostgreSQL, services on 127.0.0.1:0, real Chromium against the
# test mall), then the Python client example against the real stack
# (examples/python/ci.sh), counted as one test. Honours DATABASE_URL when it is set.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/postgres.sh
source scripts/lib/chromium.sh

lps_pg_ensure
lps_chromium_ensure
# promtool (Debian's `prometheus` package): the tests check both services' /metrics with
# `promtool check metrics`, and check-helm.sh the chart's alerting rules.
if ! command -v promtool >/dev/null; then
  lps_log "installing promtool (apt-get install prometheus)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; } >/dev/null ||
    lps_log "WARNING: promtool could not be installed: the /metrics and alert-rule checks are SKIPPED"
fi
lps_log "database: ${DATABASE_URL%%@*}@…"

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
scripts/check-helm.sh

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --locked --no-fail-fast 2>&1 | tee "$log" || status=$?
python_failed=0
examples/python/ci.sh || { python_failed=1; status=1; }
# One closing line for the whole suite (cargo prints one per test binary, doc tests last;
# the Python example is one more test).
awk -v pf="$python_failed" '/^test result:/ { p += $4; f += $6 }
  END { printf "tests: %d passed, %d failed\n", p + 1 - pf, f + pf }' "$log"
exit "$status"
