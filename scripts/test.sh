#!/usr/bin/env bash
# The whole LPS test suite, exactly as CI runs it (.ci/run calls this).
#
# Brings up what the tests need (PostgreSQL, Chromium + ChromeDriver, promtool, node), then:
# formatting, the module floors (scripts/lib/layering.py), clippy with warnings as errors,
# `.sqlx/` freshness (scripts/sqlx-prepare.sh
# --check), the API docs with warnings as errors, the Helm chart checks, every crate's tests (unit,
# #[sqlx::test] on real PostgreSQL, services on 127.0.0.1:0, real Chromium against the
# test mall, the chart's autoscaling SQL), the Python client example against the real
# stack (examples/python/ci.sh, counted as one test), the chart's LPS_* names against the
# binaries' --help, and last the container images, built and run end to end
# (scripts/test-images.sh): always in CI (CI=true), elsewhere when docker or podman works;
# LPS_TEST_IMAGES=1|0 forces it on or off. Honours DATABASE_URL when it is set.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/postgres.sh
source scripts/lib/chromium.sh
source scripts/lib/images.sh
source scripts/lib/checkers.sh

lps_pg_ensure
lps_chromium_ensure
# The outside checkers the tests run (scripts/lib/checkers.sh): promtool (Debian's
# `prometheus` package; both services' /metrics and the chart's alerting rules) and node
# (the test mall's wall script). Under CI=true one that cannot be installed fails the suite
# here, and every test that needs it fails too: a check never passes by skipping.
lps_checkers_ensure || exit 1
lps_log "database: ${DATABASE_URL%%@*}@…"

cargo fmt --all -- --check
# The crates' module floors (DESIGN §1 "Layout"): no import cycle between the top-level
# modules of any crate, only app/main/config import the coordinator's config, and the
# coordinator's upward imports stay within their bound.
python3 scripts/lib/layering.py .
cargo clippy --workspace --all-targets --locked -- -D warnings
# What drifts without failing a build: the committed .sqlx/ query data against the queries
# and migrations, and the API docs (broken or private intra-doc links, bad HTML).
scripts/sqlx-prepare.sh --check
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --locked --quiet
scripts/check-helm.sh
# The same-product judge on its corpus parts (bench/judge/README.md): fails when a part's
# precision or recall falls below its recorded floor.
cargo run -q --locked -p lps-bench --bin judge-bench -- --check > /dev/null

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

scripts/check-chart-env.sh || status=1

images=${LPS_TEST_IMAGES:-}
if [ -z "$images" ]; then
  if [ "${CI:-}" = true ] || lps_engine_usable; then images=1; else images=0; fi
fi
if [ "$images" = 1 ]; then
  started=$SECONDS
  scripts/test-images.sh || status=1
  lps_log "images step: $((SECONDS - started))s"
else
  lps_log "images step skipped: no working docker or podman (LPS_TEST_IMAGES=1 installs podman)"
fi
exit "$status"
