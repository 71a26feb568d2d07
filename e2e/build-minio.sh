#!/usr/bin/env bash
# Builds MinIO once from the Go module proxy into $HOME/.cache/ferry-testbed/<version>/ and prints the binary's path.
# A second run finds the cached binary and returns at once. Pinned per e2e/testbed/README.md §R3.
set -euo pipefail
MINIO_VERSION="${MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}"
cache="${FERRY_TESTBED_CACHE:-$HOME/.cache/ferry-testbed}/minio-${MINIO_VERSION}"
bin="$cache/minio"
if [ ! -x "$bin" ]; then
  command -v go >/dev/null || { echo "build-minio: Go is required (https://go.dev); none on PATH" >&2; exit 1; }
  mkdir -p "$cache"
  echo "build-minio: building MinIO ${MINIO_VERSION} (first run only, ~6 min on 2 cores)" >&2
  tmp="$(mktemp -d "$cache/.build.XXXXXX")"
  GOBIN="$tmp" GOFLAGS=-mod=mod go install "github.com/minio/minio@${MINIO_VERSION}" >&2
  mv "$tmp/minio" "$bin"
  rmdir "$tmp"
fi
echo "$bin"
