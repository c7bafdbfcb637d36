# syntax=docker/dockerfile:1
#
# lps-coordinator: `coordinator` (serve | migrate) and the `lpsctl` CLI.
#
#   docker build -f docker/coordinator.Dockerfile -t lps-coordinator .     # from the repo root
#   docker build -f docker/coordinator.Dockerfile --build-arg BINARIES=host -t lps-coordinator DIR
#                       # DIR holds `coordinator` and `lpsctl` built on a Debian bookworm host
#
# scripts/build-images.sh picks the path (and a local debootstrap base when no registry is
# reachable). Either way the runtime stage below is the same: only where /out comes from
# differs. The builder compiles with the committed sqlx offline data (.sqlx/), so no
# database is needed at build time; crates come from crates.io, runtime packages from Debian.

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
# NB: target/ is a cache mount, so the binaries are copied out in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked -p lps-coordinator -p lps-cli \
 && install -D -m 0755 target/release/coordinator /out/coordinator \
 && install -D -m 0755 target/release/lpsctl /out/lpsctl

# NB: the context is then a directory of binaries only (never the repository: it would
# send target/ along); built on a glibc no newer than bookworm's.
FROM scratch AS host
COPY coordinator lpsctl /out/

FROM ${BINARIES} AS binaries

FROM ${RUNTIME_IMAGE}
# ca-certificates: OTLP/webhook/Postgres TLS. tini: PID 1 that forwards SIGTERM to the
# coordinator and gives it the default action when no handler is installed yet (e.g. a
# `migrate` Job being deleted), instead of PID 1's "ignore".
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tini \
 && apt-get clean && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 lps \
 && useradd --system --uid 10001 --gid lps --home-dir /home/lps --create-home \
      --shell /usr/sbin/nologin lps
COPY --from=binaries /out/coordinator /out/lpsctl /usr/local/bin/
# Fails the build on a binary this base cannot run (e.g. host binaries of a newer glibc).
RUN /usr/local/bin/coordinator --version && /usr/local/bin/lpsctl --version
ENV LPS_GRPC_ADDR=0.0.0.0:50051 \
    LPS_HTTP_ADDR=0.0.0.0:8080 \
    LPS_LOG_FORMAT=json
USER 10001:10001
WORKDIR /home/lps
EXPOSE 50051 8080
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/coordinator"]
CMD ["serve"]
