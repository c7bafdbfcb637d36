#!/usr/bin/env bash
# One command, end to end, on a fresh machine and without internet: installs what is missing
# (PostgreSQL, Chromium, ChromeDriver), builds LPS, starts the project's own test malls and
# proxy gateway, the coordinator and a crawler node driving headless Chromium, runs
# `lpsctl search` for a few products with progress, prints the result tables, and stops
# everything cleanly on exit or Ctrl-C.
#
#   scripts/demo.sh                      # the default products
#   scripts/demo.sh "햇반 210g 12개" ...  # your own (the test catalog: test-kit/catalog.toml)
#
# Honours DATABASE_URL. Logs go to .run/demo/*.log. LPS_DEMO_EXECUTOR=scripted runs the node
# without a browser (for a quick look at the plumbing).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/postgres.sh
source scripts/lib/chromium.sh
source scripts/lib/stack.sh

products=("$@")
if [ ${#products[@]} -eq 0 ]; then
  products=("제주 삼다수 2L x 12" "코카콜라 500ml 24개" "농심 신라면 120g 5개입" "크리넥스 3겹 30롤" "진라면 순한맛 120g 5개입" "세상에 없는 상품 9999")
fi

lps_pg_ensure
[ "${LPS_DEMO_EXECUTOR:-browser}" = scripted ] || lps_chromium_ensure

lps_log "building (release)…"
cargo build --release --locked -q -p lps-coordinator -p lps-cli -p lps-crawler-node -p lps-test-kit
bin=$PWD/target/release

run=$PWD/.run/demo
cleanup() {
  local code=$?
  trap - EXIT INT TERM
  lps_stack_stop
  [ $code -eq 0 ] || lps_log "failed (exit $code); logs are in $run"
  exit $code
}
trap cleanup EXIT INT TERM
lps_stack_start "$bin" "$run" 18080 50151 "${LPS_DEMO_EXECUTOR:-browser}"

for product in "${products[@]}"; do
  printf '\n\033[1m== %s\033[0m\n' "$product"
  "$bin/lpsctl" search "$product" --wait
done
printf '\n'
lps_log "done; stopping everything"
