#!/usr/bin/env bash
# Builds helm once, from the Go module proxy, into $FERRY_TESTBED_CACHE (default $HOME/.cache/ferry-testbed)/
# helm-<version>/helm and prints where it is as a sourceable KEY=VALUE line on stdout (progress on stderr):
#
#   FERRY_TESTBED_HELM   helm-<version>/helm   (helm.sh/helm/v3/cmd/helm)
#
# Used by tests/helm_chart.rs (helm lint/template of deploy/helm/ferry). A second run finds the binary and returns
# at once. The version is part of the directory's name, so bumping HELM_VERSION rebuilds it.
set -euo pipefail
HELM_VERSION="${HELM_VERSION:-v3.21.4}"
cache="${FERRY_TESTBED_CACHE:-$HOME/.cache/ferry-testbed}"
dir="$cache/helm-$HELM_VERSION"

log() { echo "build-helm: $*" >&2; }
built() { [ -x "$dir/helm" ]; }

if ! built; then
  command -v go >/dev/null || { log "Go is required (https://go.dev); none on PATH"; exit 1; }
  mkdir -p "$cache"
  # One build at a time; a second caller waits, then finds the binary.
  if command -v flock >/dev/null; then
    exec 9>"$cache/.build-helm.lock"
    flock 9
  fi
fi
if ! built; then
  # Built next to its final place and renamed into place when complete: an interrupted build never looks cached.
  tmp="$(mktemp -d "$dir.tmp.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  log "helm $HELM_VERSION: go install (first run only, ~3-4 min on 2 cores from cold Go caches)"
  start=$SECONDS
  # The ldflags of helm's Makefile: `helm version` reports the pinned version (not "v3.x+unreleased"), and
  # `helm template`/`lint` assume the Kubernetes version of the client-go helm is built with (1.<minor of
  # k8s.io/client-go v0.<minor>>) instead of the source default v1.20, which the chart's kubeVersion (>=1.27) refuses.
  gomod="$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
  [ -f "$gomod" ] || { log "no go.mod for helm.sh/helm/v3@$HELM_VERSION"; exit 1; }
  client_go="$(awk '$1 == "k8s.io/client-go" { print $2 }' "$gomod")"
  k8s_minor="$(echo "$client_go" | cut -d. -f2)"
  [ -n "$k8s_minor" ] || { log "no k8s.io/client-go version in $gomod"; exit 1; }
  ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
  done
  # -mod=mod: helm's go.mod as published, whatever GOFLAGS the caller has.
  GOBIN="$tmp" GOFLAGS=-mod=mod CGO_ENABLED=0 nice -n 19 go install -trimpath -ldflags "$ldflags" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
  "$tmp/helm" version --short >&2
  rm -rf "$dir" && mv "$tmp" "$dir"
  trap - EXIT
  log "helm $HELM_VERSION: built in $((SECONDS - start)) s"
fi
printf 'FERRY_TESTBED_HELM=%q\n' "$dir/helm"
