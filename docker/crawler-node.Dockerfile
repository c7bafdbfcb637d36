# syntax=docker/dockerfile:1
#
# lps-crawler-node: `crawler-node` with Debian's Chromium and chromedriver.
#
#   docker build -f docker/crawler-node.Dockerfile -t lps-crawler-node .   # from the repo root
#   docker build -f docker/crawler-node.Dockerfile --build-arg BINARIES=host -t lps-crawler-node DIR
#                       # DIR holds `crawler-node` built on a Debian bookworm host
#   docker build ... --build-arg EXTRA_PACKAGES=fonts-noto-cjk   # more CJK glyphs (~90 MB)
#
# scripts/build-images.sh picks the path (and a local debootstrap base when no registry is
# reachable); the runtime stage is the same for both. Chromium runs as the non-root user
# 10001; it needs a large /dev/shm (the chart mounts a Memory emptyDir) and writable HOME,
# /tmp and profile directories (the root filesystem is read-only in the chart).

ARG RUST_IMAGE=rust:1-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim
# `builder` (compile in RUST_IMAGE) or `host` (binaries from the build context).
ARG BINARIES=builder

FROM ${RUST_IMAGE} AS builder
WORKDIR /src
ENV SQLX_OFFLINE=true \
    CARGO_TERM_COLOR=never \
    CARGO_INCREMENTAL=0
COPY . .
# NB: target/ is a cache mount, so the binary is copied out in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked -p lps-crawler-node \
 && install -D -m 0755 target/release/crawler-node /out/crawler-node

# NB: the context is then a directory of binaries only (never the repository: it would
# send target/ along); built on a glibc no newer than bookworm's.
FROM scratch AS host
COPY crawler-node /out/

FROM ${BINARIES} AS binaries

FROM ${RUNTIME_IMAGE}
ARG EXTRA_PACKAGES=""
# What the node runs: chromium + chromium-driver; xvfb for LPS_BROWSER_MODE=headful (the
# node starts /usr/bin/Xvfb itself); procps for kill(1), with which the node's watchdogs
# signal the process groups of chromedriver and Chromium; Korean fonts, because the
# start-up self-check refuses a browser that renders Hangul as boxes (a bot tell) and
# mall titles must render. tini is PID 1: it reaps the Chromium helper processes (zygote,
# renderers, crashpad) that get re-parented to PID 1, and forwards SIGTERM to crawler-node
# only. No `-g`: the node drains on SIGTERM and must keep its browsers alive while running
# jobs finish; it quits them itself.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates tini chromium chromium-driver xvfb procps \
      fontconfig fonts-liberation fonts-nanum ${EXTRA_PACKAGES} \
 && apt-get clean && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 lps \
 && useradd --system --uid 10001 --gid lps --home-dir /home/lps --create-home \
      --shell /usr/sbin/nologin lps \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/lps /var/lib/lps/profiles \
 && test -x /usr/bin/chromium && test -x /usr/bin/chromedriver && test -x /usr/bin/Xvfb \
 && test -x /usr/bin/kill && fc-list :lang=ko | grep -q .
COPY --from=binaries /out/crawler-node /usr/local/bin/crawler-node
# Fails the build on a binary this base cannot run (e.g. host binaries of a newer glibc).
RUN /usr/local/bin/crawler-node --version
ENV LPS_HTTP_ADDR=0.0.0.0:9090 \
    LPS_CHROMIUM_PATH=/usr/bin/chromium \
    LPS_CHROMEDRIVER_PATH=/usr/bin/chromedriver \
    LPS_PROFILE_ROOT=/var/lib/lps/profiles \
    LPS_LOG_FORMAT=json \
    HOME=/home/lps
USER 10001:10001
WORKDIR /home/lps
EXPOSE 9090
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/crawler-node"]
