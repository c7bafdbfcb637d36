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

products=("$@")
if [ ${#products[@]} -eq 0 ]; then
  products=("제주 삼다수 2L x 12" "코카콜라 500ml 24개" "농심 신라면 120g 5개입" "크리넥스 3겹 30롤" "진라면 순한맛 120g 5개입" "세상에 없는 상품 9999")
fi

lps_pg_ensure
[ "${LPS_DEMO_EXECUTOR:-browser}" = scripted ] || lps_chromium_ensure

lps_log "building (release)…"
cargo build --release --locked -q -p lps-coordinator -p lps-crawler-node -p lps-test-kit
bin=$PWD/target/release

run=$PWD/.run/demo
rm -rf "$run" && mkdir -p "$run/profiles"
secret() { head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' ; }
client_token="demo-client-$(secret)"
node_token="demo-node-$(secret)"
proxy_password="$(secret)"
printf '%s\n' "$proxy_password" > "$run/proxy-password"
chmod 600 "$run/proxy-password"

pids=()
cleanup() {
  local code=$?
  trap - EXIT INT TERM
  # Stop in order: the node drains first, then the coordinator, then the test malls.
  for ((i=${#pids[@]}-1; i>=0; i--)); do
    kill -TERM "${pids[$i]}" 2>/dev/null || true
    for _ in $(seq 1 150); do kill -0 "${pids[$i]}" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "${pids[$i]}" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  [ $code -eq 0 ] || lps_log "failed (exit $code); logs are in $run"
  exit $code
}
trap cleanup EXIT INT TERM

wait_http() { # URL SECONDS
  for _ in $(seq 1 $(( $2 * 5 ))); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.2
  done
  lps_log "timed out waiting for $1"; return 1
}

lps_log "starting the test malls and the proxy gateway"
"$bin/lps-test-kit" serve \
  --alpha-listen 127.0.0.1:18081 --beta-listen 127.0.0.1:18082 --gamma-listen 127.0.0.1:18083 \
  --gateway-listen-base 127.0.0.1:18100 --ports 8 \
  --user lps --password-file "$run/proxy-password" \
  > "$run/testkit.json" 2> "$run/testkit.log" &
pids=($!)   # the test kit stops last
wait_http http://127.0.0.1:18081/_control/stats 20
wait_http http://127.0.0.1:18082/_control/stats 20
wait_http http://127.0.0.1:18083/_control/stats 20

lps_log "starting the coordinator"
DATABASE_URL=$DATABASE_URL \
LPS_GRPC_ADDR=127.0.0.1:50151 LPS_HTTP_ADDR=127.0.0.1:18080 \
LPS_CLIENT_TOKENS=$client_token LPS_NODE_TOKENS=$node_token \
LPS_MALLS=testmall-alpha,testmall-beta,testmall-gamma \
LPS_PROXY_GATEWAY_HOST=127.0.0.1 LPS_PROXY_PORTS=18100-18107 \
LPS_PROXY_USERNAME=lps LPS_PROXY_PASSWORD=$proxy_password \
LPS_JOB_DEADLINE=120s \
  "$bin/coordinator" > "$run/coordinator.log" 2>&1 &
pids+=($!)
wait_http http://127.0.0.1:18080/readyz 60

lps_log "starting a crawler node (2 browser slots)"
LPS_COORDINATOR_URL=http://127.0.0.1:50151 LPS_NODE_TOKEN=$node_token \
LPS_NODE_ID=demo-node LPS_NODE_SLOTS=2 LPS_HTTP_ADDR=127.0.0.1:18090 \
LPS_EXECUTOR=${LPS_DEMO_EXECUTOR:-browser} LPS_PROFILE_ROOT=$run/profiles \
LPS_DRAIN_TIMEOUT=20s \
  "$bin/crawler-node" > "$run/node.log" 2>&1 &
pids+=($!)
wait_http http://127.0.0.1:18090/readyz 60

export LPS_ADDR=http://127.0.0.1:50151 LPS_TOKEN=$client_token
for product in "${products[@]}"; do
  printf '\n\033[1m== %s\033[0m\n' "$product"
  "$bin/lpsctl" search "$product" --wait
done
printf '\n'
lps_log "done; stopping everything"
