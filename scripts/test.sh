#!/usr/bin/env bash
# The whole LPS test suite, exactly as CI runs it (.ci/run calls this).
#
# Brings up what the tests need (PostgreSQL, Chromium + ChromeDriver), then: formatting,
# clippy with warnings as errors, the Helm chart checks, and every crate's tests (unit,
# #[sqlx::test] on real PostgreSQL, services on 127.0.0.1:0, real Chromium against the
# test mall, the chart's autoscaling SQL), then the chart's LPS_* names against the
# binaries' --help. Honours DATABASE_URL when it is set.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/postgres.sh
source scripts/lib/chromium.sh

lps_pg_ensure
lps_chromium_ensure
lps_log "database: ${DATABASE_URL%%@*}@…"

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
scripts/check-helm.sh

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --locked --no-fail-fast 2>&1 | tee "$log" || status=$?
# One closing line for the whole suite (cargo prints one per test binary, doc tests last).
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }' "$log"

scripts/check-chart-env.sh || status=1
exit "$status"
