# shellcheck shell=bash
# Starts the real LPS stack on loopback: the project's three test malls and proxy gateway
# (lps-test-kit), a coordinator and one crawler node (headless Chromium unless the executor
# says otherwise), each in the background with its log in the run directory. Sourced by
# scripts/demo.sh and examples/python/ci.sh, after scripts/lib/postgres.sh (DATABASE_URL,
# lps_log) and, for the browser executor, lps_chromium_ensure.
#
#   lps_stack_start BIN_DIR RUN_DIR PORT_BASE GRPC_PORT [EXECUTOR]
#   trap lps_stack_stop EXIT   # or call it from the script's own trap
#
# BIN_DIR holds coordinator, crawler-node and lps-test-kit. RUN_DIR is emptied and gets
# testkit.log, coordinator.log, node.log. Ports: coordinator HTTP PORT_BASE, malls
# PORT_BASE+1..+3, node HTTP PORT_BASE+10, proxy gateway PORT_BASE+20..+27, coordinator gRPC
# GRPC_PORT. The built-in test-mall profiles (profiles/builtin/testmall-*.toml) search
# 127.0.0.1:18081..18083, so on another PORT_BASE the coordinator gets copies naming the
# malls' ports (LPS_PROFILES_DIR=RUN_DIR/mall-profiles). EXECUTOR: browser (default) or
# scripted. On return the stack is ready (node /readyz) and LPS_ADDR and LPS_TOKEN
# (lpsctl's variables) are exported.

LPS_STACK_PIDS=()

# lps_stack_wait_http URL SECONDS
lps_stack_wait_http() {
  for _ in $(seq 1 $(( $2 * 5 ))); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.2
  done
  lps_log "timed out waiting for $1"; return 1
}

lps_stack_secret() { head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' ; }

lps_stack_start() {
  local bin=$1 run=$2 base=$3 grpc=$4 executor=${5:-browser}
  local client_token node_token proxy_password
  local alpha=$((base + 1)) beta=$((base + 2)) gamma=$((base + 3)) node_http=$((base + 10))
  local gateway=$((base + 20)) style port
  local -a profiles_env=()
  rm -rf "$run" && mkdir -p "$run/profiles"
  client_token="demo-client-$(lps_stack_secret)"
  node_token="demo-node-$(lps_stack_secret)"
  proxy_password="$(lps_stack_secret)"
  printf '%s\n' "$proxy_password" > "$run/proxy-password"
  chmod 600 "$run/proxy-password"

  lps_log "starting the test malls and the proxy gateway"
  "$bin/lps-test-kit" serve \
    --alpha-listen "127.0.0.1:$alpha" --beta-listen "127.0.0.1:$beta" \
    --gamma-listen "127.0.0.1:$gamma" \
    --gateway-listen-base "127.0.0.1:$gateway" --ports 8 \
    --user lps --password-file "$run/proxy-password" \
    > "$run/testkit.json" 2> "$run/testkit.log" &
  LPS_STACK_PIDS=($!)   # the test kit stops last
  lps_stack_wait_http "http://127.0.0.1:$alpha/_control/stats" 20
  lps_stack_wait_http "http://127.0.0.1:$beta/_control/stats" 20
  lps_stack_wait_http "http://127.0.0.1:$gamma/_control/stats" 20

  if [ "$base" != 18080 ]; then
    mkdir -p "$run/mall-profiles"
    profiles_env=("LPS_PROFILES_DIR=$run/mall-profiles")
    for style in alpha beta gamma; do
      case $style in alpha) port=$alpha ;; beta) port=$beta ;; gamma) port=$gamma ;; esac
      sed -E "s#127\.0\.0\.1:1808[1-3]#127.0.0.1:$port#" "profiles/builtin/testmall-$style.toml" \
        > "$run/mall-profiles/testmall-$style.toml"
    done
  fi

  lps_log "starting the coordinator"
  # NB: the secrets are the environment of `env` (not its arguments, which ps shows);
  # `env` adds only LPS_PROFILES_DIR, when set, and execs the coordinator (same pid).
  DATABASE_URL=$DATABASE_URL \
  LPS_GRPC_ADDR="127.0.0.1:$grpc" LPS_HTTP_ADDR="127.0.0.1:$base" \
  LPS_CLIENT_TOKENS=$client_token LPS_NODE_TOKENS=$node_token \
  LPS_MALLS=testmall-alpha,testmall-beta,testmall-gamma \
  LPS_PROXY_GATEWAY_HOST=127.0.0.1 LPS_PROXY_PORTS="$gateway-$((gateway + 7))" \
  LPS_PROXY_USERNAME=lps LPS_PROXY_PASSWORD=$proxy_password \
  LPS_JOB_DEADLINE=120s \
    env "${profiles_env[@]}" "$bin/coordinator" > "$run/coordinator.log" 2>&1 &
  LPS_STACK_PIDS+=($!)
  lps_stack_wait_http "http://127.0.0.1:$base/readyz" 60

  lps_log "starting a crawler node (2 browser slots)"
  LPS_COORDINATOR_URL="http://127.0.0.1:$grpc" LPS_NODE_TOKEN=$node_token \
  LPS_NODE_ID=demo-node LPS_NODE_SLOTS=2 LPS_HTTP_ADDR="127.0.0.1:$node_http" \
  LPS_EXECUTOR=$executor LPS_PROFILE_ROOT=$run/profiles \
  LPS_DRAIN_TIMEOUT=20s \
    "$bin/crawler-node" > "$run/node.log" 2>&1 &
  LPS_STACK_PIDS+=($!)
  lps_stack_wait_http "http://127.0.0.1:$node_http/readyz" 60

  export LPS_ADDR="http://127.0.0.1:$grpc" LPS_TOKEN=$client_token
}

# Stops what lps_stack_start started, in order: the node drains first, then the
# coordinator, then the test malls; each gets 30 s after SIGTERM before SIGKILL.
lps_stack_stop() {
  local i
  for ((i=${#LPS_STACK_PIDS[@]}-1; i>=0; i--)); do
    kill -TERM "${LPS_STACK_PIDS[$i]}" 2>/dev/null || true
    for _ in $(seq 1 150); do kill -0 "${LPS_STACK_PIDS[$i]}" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "${LPS_STACK_PIDS[$i]}" 2>/dev/null || true
  done
  LPS_STACK_PIDS=()
  wait 2>/dev/null || true
}
