#!/usr/bin/env bash
# Builds the two LPS images, tagged with the chart's appVersion (what helm/lps deploys by
# default) and `latest`:
#   lps-coordinator   (docker/coordinator.Dockerfile: coordinator + lpsctl)
#   lps-crawler-node  (docker/crawler-node.Dockerfile: crawler-node, Chromium, chromedriver)
#
# - Engine: docker when its daemon answers, else podman (apt-get installs podman, runc and
#   debootstrap when missing).
# - Bases: debian:bookworm-slim and rust:1-bookworm from the registry when it is reachable;
#   else a local bookworm base made with debootstrap (cached outside the checkout, made
#   only when missing; scripts/lib/images.sh).
# - Binaries: the Dockerfiles' multi-stage Rust builder when the Rust image is at hand;
#   else `cargo build --release --locked` on this host (Debian bookworm: the same glibc as
#   the runtime base) and a context of just those binaries (BINARIES=host). The runtime
#   stage is the same either way.
# Prints the images and their sizes.
#
#   scripts/build-images.sh
#   LPS_IMAGE_ENGINE=podman|docker  LPS_IMAGE_REGISTRY=0|1  LPS_IMAGE_BINARIES=host|builder
#   LPS_IMAGE_CACHE=DIR  EXTRA_PACKAGES=fonts-noto-cjk (node image)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source scripts/lib/postgres.sh   # lps_log
source scripts/lib/images.sh

lps_engine_ensure
tag=$(lps_app_version "$ROOT")
[ -n "$tag" ] || { lps_log "no appVersion in helm/lps/Chart.yaml"; exit 1; }

if lps_registry_reachable; then
  runtime_image=$LPS_REGISTRY_RUNTIME
  rust_image=$LPS_REGISTRY_RUST
  binaries=${LPS_IMAGE_BINARIES:-builder}
  lps_log "registry reachable: bases $runtime_image, $rust_image"
else
  lps_local_base_ensure
  runtime_image=$LPS_LOCAL_BASE
  rust_image=$LPS_REGISTRY_RUST   # unused: no Rust image without a registry
  binaries=${LPS_IMAGE_BINARIES:-host}
  if [ "$binaries" != host ]; then
    lps_log "LPS_IMAGE_BINARIES=$binaries needs $rust_image, and no registry is reachable"
    exit 1
  fi
  lps_log "no registry: base $runtime_image (debootstrap), binaries built on this host"
fi

build_args=(--build-arg "RUNTIME_IMAGE=$runtime_image" --build-arg "RUST_IMAGE=$rust_image"
            --build-arg "BINARIES=$binaries")
[ -n "${EXTRA_PACKAGES:-}" ] && node_args=(--build-arg "EXTRA_PACKAGES=$EXTRA_PACKAGES") || node_args=()
engine_args=()
if [ "$LPS_ENGINE" = podman ]; then
  # RUN steps use the host's network (apt-get) and stay within the host's ulimits.
  engine_args=(--network host "${LPS_CONTAINER_ULIMITS[@]}")
fi

context=$ROOT
if [ "$binaries" = host ]; then
  # The package set of scripts/demo.sh and scripts/test-images.sh: one feature resolution,
  # so their release builds reuse this one.
  lps_log "building the release binaries on this host"
  cargo build --release --locked -q -p lps-coordinator -p lps-cli -p lps-crawler-node -p lps-test-kit
  release=${CARGO_TARGET_DIR:-$ROOT/target}/release
  context=$(mktemp -d "$(lps_image_cache)/context.XXXXXX")
  trap 'rm -rf "$context"' EXIT
  for bin in coordinator lpsctl crawler-node; do
    install -m 0755 "$release/$bin" "$context/$bin"
  done
fi

build() {  # build IMAGE DOCKERFILE [ARGS...]
  local image=$1 file=$2 started log
  shift 2
  started=$SECONDS
  log=$(mktemp)
  lps_log "building $image:$tag ($LPS_ENGINE, $file, BINARIES=$binaries)"
  if ! "${ENGINE[@]}" build "${engine_args[@]}" "${build_args[@]}" "$@" \
      -f "$ROOT/$file" -t "$image:$tag" -t "$image:latest" "$context" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    rm -f "$log"
    lps_log "building $image failed"
    return 1
  fi
  rm -f "$log"
  lps_log "built $image:$tag in $((SECONDS - started))s"
}

build lps-coordinator docker/coordinator.Dockerfile
build lps-crawler-node docker/crawler-node.Dockerfile "${node_args[@]}"

for image in lps-coordinator lps-crawler-node; do
  printf '%-24s %s  %s\n' "$image:$tag" \
    "$("${ENGINE[@]}" image inspect --format '{{.Id}}' "$image:$tag" | sed 's/^sha256://' | cut -c1-12)" \
    "$("${ENGINE[@]}" image inspect --format '{{.Size}}' "$image:$tag" \
       | awk '{ printf "%.0f MB", $1 / 1000000 }')"
done
