# syntax=docker/dockerfile:1
#
# lps-crawler-node: `crawler-node` with Debian's Chromium and chromedriver.
#
#   docker build -f docker/crawler-node.Dockerfile -t lps-crawler-node .   # from the repo root
#   docker build ... --build-arg EXTRA_PACKAGES=   # drop the CJK fonts (~90 MB smaller image)
#
# Chromium runs as the non-root user 10001; in Kubernetes it needs a large /dev/shm
# (the chart mounts a Memory emptyDir) and writable HOME, /tmp and profile directories.

ARG RUST_IMAGE=rust:1-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

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

FROM ${RUNTIME_IMAGE}
# Korean mall pages render (and fingerprint) with CJK fonts present; set empty to skip.
ARG EXTRA_PACKAGES="fonts-noto-cjk"
# tini is PID 1: it reaps the Chromium helper processes (zygote, renderers, crashpad)
# that get re-parented to PID 1, and forwards SIGTERM to crawler-node only. No `-g`:
# the node drains on SIGTERM and must keep its browsers alive while running jobs finish;
# it quits them itself.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates tini chromium chromium-driver fonts-liberation ${EXTRA_PACKAGES} \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 lps \
 && useradd --system --uid 10001 --gid lps --home-dir /home/lps --create-home \
      --shell /usr/sbin/nologin lps \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/lps /var/lib/lps/profiles \
 && test -x /usr/bin/chromium && test -x /usr/bin/chromedriver
COPY --from=builder /out/crawler-node /usr/local/bin/crawler-node
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
