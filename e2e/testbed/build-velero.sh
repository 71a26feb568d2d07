#!/usr/bin/env bash
# Builds the real Velero server and its AWS object-store plugin once, from the Go module proxy, into
# $FERRY_TESTBED_CACHE (default $HOME/.cache/ferry-testbed)/velero-<version>/ and prints where they are as sourceable
# KEY=VALUE lines on stdout (progress on stderr):
#
#   FERRY_TESTBED_VELERO             velero-<version>/velero            (github.com/vmware-tanzu/velero/cmd/velero)
#   FERRY_TESTBED_VELERO_PLUGIN_DIR  velero-<version>/plugins/ (only velero-plugin-for-aws, as `--plugin-dir` wants)
#
# Used as the baseline of benches/time_to_visible.rs. A second run finds both binaries and returns at once. Recipe:
# e2e/testbed/README.md §R4 and §R7 (~2.5 min + ~2 min on 2 cores from cold Go caches).
set -euo pipefail
VELERO_VERSION="${VELERO_VERSION:-v1.18.3}"
VELERO_AWS_PLUGIN_VERSION="${VELERO_AWS_PLUGIN_VERSION:-v1.14.3}"
# Velero's own go.mod replaces kopia by its fork; a module building Velero's binaries must repeat that. Velero asks
# for k8s.io/cli-runtime v0.33.12, which the proxy does not serve: v0.33.10 builds.
KOPIA_REPLACE="github.com/project-velero/kopia v0.0.0-20251230033609-d946b1e75197"
CLI_RUNTIME_REPLACE="k8s.io/cli-runtime v0.33.10"
cache="${FERRY_TESTBED_CACHE:-$HOME/.cache/ferry-testbed}"
dir="$cache/velero-$VELERO_VERSION"

log() { echo "build-velero: $*" >&2; }
go_() { nice -n 19 go "$@"; }
built() { [ -x "$dir/velero" ] && [ -x "$dir/plugins/velero-plugin-for-aws" ]; }

if ! built; then
  command -v go >/dev/null || { log "Go is required (https://go.dev); none on PATH"; exit 1; }
  mkdir -p "$cache/.work"
  # One build at a time; a second caller waits, then finds the binaries.
  if command -v flock >/dev/null; then
    exec 9>"$cache/.build-velero.lock"
    flock 9
  fi
fi
if ! built; then
  work="$cache/.work/velero-$VELERO_VERSION"
  rm -rf "$work"
  mkdir -p "$work"
  # Built next to its final place and renamed into place when complete: an interrupted build never looks cached.
  tmp="$(mktemp -d "$dir.tmp.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  mkdir "$tmp/plugins"
  (
    cd "$work"
    cat >go.mod <<EOF
module ferry.local/testbed/velero

go 1.25.0

require github.com/vmware-tanzu/velero $VELERO_VERSION

replace github.com/kopia/kopia => $KOPIA_REPLACE

replace $(echo "$CLI_RUNTIME_REPLACE" | cut -d' ' -f1) => $CLI_RUNTIME_REPLACE
EOF
    cat >tools.go <<'EOF'
//go:build tools

package tools

import _ "github.com/vmware-tanzu/velero/cmd/velero"
EOF
    log "velero $VELERO_VERSION: go mod tidy"
    go_ mod tidy >&2
    log "velero $VELERO_VERSION: go build"
    CGO_ENABLED=0 go_ build -trimpath -ldflags "-s -w" -o "$tmp/velero" github.com/vmware-tanzu/velero/cmd/velero >&2
  ) &
  velero_pid=$!
  # The plugin is its own module (no replace directives): a plain `go install`, concurrently with the server.
  log "velero-plugin-for-aws $VELERO_AWS_PLUGIN_VERSION: go install"
  GOBIN="$tmp/plugins" GOFLAGS=-mod=mod CGO_ENABLED=0 go_ install -trimpath -ldflags "-s -w" \
    "github.com/vmware-tanzu/velero-plugin-for-aws/velero-plugin-for-aws@$VELERO_AWS_PLUGIN_VERSION" >&2
  wait "$velero_pid"
  rm -rf "$dir" && mv "$tmp" "$dir"
  trap - EXIT
  rm -rf "$work"
  log "built into $dir"
fi
printf 'FERRY_TESTBED_VELERO=%q\n' "$dir/velero"
printf 'FERRY_TESTBED_VELERO_PLUGIN_DIR=%q\n' "$dir/plugins"
