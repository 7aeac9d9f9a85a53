# syntax=docker/dockerfile:1
#
# The codesweep binary (CPU inference, S3-protocol stores) on a slim Debian runtime.
#
#   docker build -t codesweep:0.1.0 .
#   docker build --build-arg FEATURES=aws,gcp,azure -t codesweep:0.1.0 .    # more stores
#
# The image's entrypoint is `codesweep`: `docker run --rm codesweep:0.1.0 worker --help`.
# GPU workers use Dockerfile.cuda.

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

FROM rust:${RUST_VERSION}-${DEBIAN_RELEASE} AS builder
# Cargo features of the `codesweep` package: aws (s3://, on by default), gcp (gs://), azure (az://).
ARG FEATURES=aws
WORKDIR /src
COPY . .
# The registry and target caches survive between builds (BuildKit); the binary is copied out
# of the cached target folder because cache mounts are not part of the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p codesweep --features "${FEATURES}" \
    && install -m 0755 target/release/codesweep /usr/local/bin/codesweep

# The tree-sitter grammars the official RepoQA scorer uses (PyPI tree-sitter-languages
# 1.10.2, checksummed by the script), so workers score RepoQA exactly as it does.
FROM python:3.11-slim-bookworm AS grammars
COPY scripts/fetch-repoqa-grammars.sh /fetch/fetch-repoqa-grammars.sh
COPY scripts/lib/wheel.sh /fetch/lib/wheel.sh
RUN bash /fetch/fetch-repoqa-grammars.sh /grammars

FROM debian:${DEBIAN_RELEASE}-slim
# ca-certificates: TLS to object stores and OpenAI-compatible endpoints.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 codesweep \
    && useradd --system --uid 10001 --gid 10001 --create-home --home-dir /home/codesweep \
       --shell /usr/sbin/nologin codesweep
COPY --from=builder /usr/local/bin/codesweep /usr/local/bin/codesweep
COPY --from=grammars /grammars /usr/local/share/codesweep/grammars
USER 10001:10001
WORKDIR /home/codesweep
ENV HOME=/home/codesweep \
    CODESWEEP_GRAMMARS_DIR=/usr/local/share/codesweep/grammars
# The coordinator's gRPC port (`codesweep coordinator --listen 0.0.0.0:50051`).
EXPOSE 50051
ENTRYPOINT ["/usr/local/bin/codesweep"]
CMD ["--help"]
