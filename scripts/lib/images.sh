# shellcheck shell=bash
# The container engine and base images the project's image scripts use
# (scripts/build-images.sh, scripts/test-images.sh). Sourced after scripts/lib/postgres.sh
# (for lps_log).
#
# - Engine: docker when its daemon answers, else podman (installed with apt-get when
#   missing). Podman here runs as root with runc and cgroupfs: Debian's default crun fails
#   on hybrid cgroup hosts ("cgroups in hybrid mode not supported"), and containers get
#   explicit ulimits within the host's own (a container may not raise them).
#   LPS_IMAGE_ENGINE=docker|podman forces one.
# - Registry: reachable when its /v2/ endpoint answers at all (401 counts).
# - Local base: `debootstrap --variant=minbase bookworm` into a tarball in the cache dir,
#   imported as localhost/lps-base:bookworm; made only when both are missing.
# - Cache dir: LPS_IMAGE_CACHE, else /var/cache/lps-images when writable, else
#   ~/.cache/lps-images. It lives outside the checkout, so CI's clean checkouts reuse it.

LPS_LOCAL_BASE=localhost/lps-base:bookworm
LPS_REGISTRY_RUNTIME=docker.io/library/debian:bookworm-slim
LPS_REGISTRY_RUST=docker.io/library/rust:1-bookworm
# Within this machine's limits (ulimit -n is 20000 here; a container cannot exceed it).
LPS_CONTAINER_ULIMITS=(--ulimit nofile=20000:20000 --ulimit nproc=4096:4096)

lps_image_cache() {
  local dir=${LPS_IMAGE_CACHE:-}
  if [ -z "$dir" ]; then
    if mkdir -p /var/cache/lps-images 2>/dev/null && [ -w /var/cache/lps-images ]; then
      dir=/var/cache/lps-images
    else
      dir=${XDG_CACHE_HOME:-$HOME/.cache}/lps-images
    fi
  fi
  mkdir -p "$dir" && printf '%s' "$dir"
}

lps_apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "$@" >/dev/null
}

# Sets LPS_ENGINE (docker|podman) and the array ENGINE (the command with its global flags).
lps_engine_ensure() {
  local want=${LPS_IMAGE_ENGINE:-}
  if [ "$want" != podman ] && command -v docker >/dev/null 2>&1 \
    && timeout 20 docker info >/dev/null 2>&1; then
    LPS_ENGINE=docker
    ENGINE=(docker)
    return 0
  fi
  if [ "$want" = docker ]; then
    lps_log "LPS_IMAGE_ENGINE=docker but the docker daemon does not answer"
    return 1
  fi
  if ! command -v podman >/dev/null 2>&1 || [ ! -x /usr/sbin/runc ]; then
    lps_log "installing podman and runc (apt-get)"
    lps_apt_install podman runc
  fi
  LPS_ENGINE=podman
  ENGINE=(podman --runtime /usr/sbin/runc --cgroup-manager=cgroupfs --events-backend=file)
  if ! "${ENGINE[@]}" info >/dev/null 2>&1; then
    lps_log "podman does not work here:"
    "${ENGINE[@]}" info >&2 || true
    return 1
  fi
}

# True when docker's daemon answers or podman is installed and works (nothing installed).
lps_engine_usable() {
  if command -v docker >/dev/null 2>&1 && timeout 20 docker info >/dev/null 2>&1; then
    return 0
  fi
  command -v podman >/dev/null 2>&1 && [ -x /usr/sbin/runc ] \
    && podman --runtime /usr/sbin/runc --cgroup-manager=cgroupfs --events-backend=file info >/dev/null 2>&1
}

# True when the engine can use the public registry (LPS_IMAGE_REGISTRY=0|1 forces it).
lps_registry_reachable() {
  case "${LPS_IMAGE_REGISTRY:-}" in
    0) return 1 ;;
    1) return 0 ;;
  esac
  local code
  code=$(curl -sS -m 10 -o /dev/null -w '%{http_code}' https://registry-1.docker.io/v2/ 2>/dev/null) || true
  [ -n "$code" ] && [ "$code" != 000 ]
}

# Makes $LPS_LOCAL_BASE exist: from the cached tarball, or debootstrap when that is missing.
lps_local_base_ensure() {
  if "${ENGINE[@]}" image inspect "$LPS_LOCAL_BASE" >/dev/null 2>&1; then
    return 0
  fi
  local cache tarball root
  cache=$(lps_image_cache)
  tarball=$cache/bookworm-minbase.tar
  if [ ! -s "$tarball" ]; then
    command -v debootstrap >/dev/null 2>&1 || { lps_log "installing debootstrap (apt-get)"; lps_apt_install debootstrap; }
    root=$(mktemp -d "$cache/rootfs.XXXXXX")
    lps_log "making the local bookworm base with debootstrap (once; cached in $cache)"
    if ! debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$cache/debootstrap.log" 2>&1; then
      tail -n 20 "$cache/debootstrap.log" >&2
      rm -rf "$root"
      return 1
    fi
    # The sources of the registry's debian:bookworm-slim: the release, its updates and
    # the security archive.
    rm -f "$root/etc/apt/sources.list"
    cat >"$root/etc/apt/sources.list.d/debian.sources" <<'SOURCES'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
    # As in the registry's slim image: packages installed later leave out docs, man pages
    # and translations, and the base itself carries none of them, nor apt's lists.
    cat >"$root/etc/dpkg/dpkg.cfg.d/lps-slim" <<'DPKG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
DPKG
    # and apt keeps no downloaded packages (the slim image's docker-clean).
    cat >"$root/etc/apt/apt.conf.d/lps-slim" <<'APT'
APT::Keep-Downloaded-Packages "false";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT
    find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/* \
      "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
    tar -C "$root" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$root"
  fi
  lps_log "importing $tarball as $LPS_LOCAL_BASE"
  "${ENGINE[@]}" import --change 'CMD ["/bin/bash"]' - "$LPS_LOCAL_BASE" <"$tarball" \
    >"$cache/import.log" 2>&1 || { cat "$cache/import.log" >&2; return 1; }
}

# The chart's default image tag: Chart.yaml's appVersion.
lps_app_version() {
  sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$1/helm/lps/Chart.yaml"
}
