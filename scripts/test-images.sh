#!/usr/bin/env bash
# Builds the LPS images (scripts/build-images.sh) and runs them the way the Helm chart
# does, end to end, on this machine (scripts/lib/images_e2e.py says what is asserted):
# the coordinator image against this machine's PostgreSQL (a scratch database on
# DATABASE_URL's server, dropped afterwards), node containers with the chart's security
# context and tmpfs mounts, the test kit (`lps-test-kit serve`) on the host, all on the
# host network; a real search through Chromium in the node image; SIGTERM to a node
# mid-search with the chart's grace period.
#
#   scripts/test-images.sh             # LPS_IMAGES_NO_BUILD=1: test the images already built
# Honours DATABASE_URL and the variables of scripts/build-images.sh. Exit status non-zero
# on any failure.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source scripts/lib/postgres.sh
source scripts/lib/images.sh
source scripts/lib/chart-tools.sh

started=$SECONDS
lps_pg_ensure
if [ "${LPS_IMAGES_NO_BUILD:-}" != 1 ]; then
  scripts/build-images.sh
fi
lps_engine_ensure
lps_chart_tools_ensure "$ROOT"
tag=$(lps_app_version "$ROOT")

# lpsctl and the test kit run on the host: the package set build-images.sh builds, so after
# its host path this is a no-op (after its builder path it is the first host build).
cargo build --release --locked -q -p lps-coordinator -p lps-cli -p lps-crawler-node -p lps-test-kit
bin=${CARGO_TARGET_DIR:-$ROOT/target}/release

work=$(mktemp -d)
db="lps_images_$$"
cleanup() {
  psql "$DATABASE_URL" -qAtX -c "drop database if exists $db with (force)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
psql "$DATABASE_URL" -qAtX -v ON_ERROR_STOP=1 -c "create database $db" >/dev/null

# What the chart deploys with its default values, as JSON for the test.
"$HELM" template lps "$ROOT/helm/lps" --namespace lps-images >"$work/rendered.yaml"
python3 -c 'import json, sys, yaml; json.dump([d for d in yaml.safe_load_all(open(sys.argv[1])) if d], open(sys.argv[2], "w"))' \
  "$work/rendered.yaml" "$work/rendered.json"

status=0
LPS_ENGINE_CMD="${ENGINE[*]}" \
LPS_COORDINATOR_IMAGE="lps-coordinator:$tag" \
LPS_NODE_IMAGE="lps-crawler-node:$tag" \
LPS_HOST_BIN="$bin" \
LPS_ROOT="$ROOT" \
LPS_RENDERED="$work/rendered.json" \
DATABASE_URL=$(lps_pg_url_with_db "$DATABASE_URL" "$db") \
  python3 "$ROOT/scripts/lib/images_e2e.py" || status=$?
lps_log "image test: $([ $status -eq 0 ] && echo passed || echo FAILED) in $((SECONDS - started))s"
exit "$status"
