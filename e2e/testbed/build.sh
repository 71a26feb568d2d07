#!/usr/bin/env bash
# Builds the parts of the two-cluster test bed once, from the Go module proxy, into
# $FERRY_TESTBED_CACHE (default $HOME/.cache/ferry-testbed)/<part>-<version>/, and prints where they are as
# sourceable KEY=VALUE lines on stdout (progress goes to stderr):
#
#   FERRY_TESTBED_KUBE_APISERVER, FERRY_TESTBED_KUBE_CONTROLLER_MANAGER   kube-<version>/ (k8s.io/kubernetes)
#   FERRY_TESTBED_ETCD                                                      etcd-<version>/ (etcdmain)
#   FERRY_TESTBED_CRDS_DIR (one <crd name>.yaml each), FERRY_TESTBED_CRDS   crds-velero-<version>-<hash>/
#   FERRY_TESTBED_MINIO                                                     minio-<version>/ (e2e/build-minio.sh)
#   FERRY_TESTBED_AZURITE                                                   azurite-<version>/ (e2e/build-azurite.sh;
#                                                                           npm, not Go: tests/location_access_azurite.rs)
#   FERRY_TESTBED_VELERO, FERRY_TESTBED_VELERO_PLUGIN_DIR                   velero-<version>/ (build-velero.sh; the
#                                                                           Velero server, for benches/time_to_visible)
#   FERRY_TESTBED_HELM, FERRY_TESTBED_CHART_CRDS_DIR                        helm-<version>/, chart-crds-.../
#                                                                           (build-helm.sh; tests/helm_chart.rs)
#
# The parts build concurrently, under `nice -n 19`. The first run takes ~10-20 min on 2 cores (see README.md);
# a second run finds everything cached and returns at once. Recipe and pinned versions:
# e2e/testbed/README.md §R1–§R5. A version is part of its directory's name, so bumping one rebuilds it;
# the CRD directory's name also carries a hash of e2e/testbed/crds/{go.mod,go.sum,main.go}.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

KUBE_VERSION="${KUBE_VERSION:-v1.35.4}"
KUBE_STAGING_VERSION="v0.${KUBE_VERSION#v1.}" # k8s.io/api etc. are published as v0.<minor>.<patch>
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
VELERO_VERSION="$(awk '$1 == "github.com/vmware-tanzu/velero" { print $2 }' "$here/crds/go.mod")"
[ -n "$VELERO_VERSION" ] || { echo "build: no github.com/vmware-tanzu/velero in $here/crds/go.mod" >&2; exit 1; }
# MinIO's version is build-minio.sh's (its default, or $MINIO_VERSION as it reads it).
# shellcheck disable=SC2016 # the sed pattern matches a literal ${...}
MINIO_VERSION="${MINIO_VERSION:-$(sed -n 's/^MINIO_VERSION="\${MINIO_VERSION:-\(.*\)}"$/\1/p' "$repo/e2e/build-minio.sh")}"
# Azurite's version is build-azurite.sh's (its default, or $AZURITE_VERSION as it reads it).
# shellcheck disable=SC2016 # the sed pattern matches a literal ${...}
AZURITE_VERSION="${AZURITE_VERSION:-$(sed -n 's/^AZURITE_VERSION="\${AZURITE_VERSION:-\(.*\)}"$/\1/p' "$repo/e2e/build-azurite.sh")}"
# The Velero server's version is build-velero.sh's (its default, or $VELERO_SERVER_VERSION passed to it).
# shellcheck disable=SC2016 # the sed pattern matches a literal ${...}
VELERO_SERVER_VERSION="${VELERO_SERVER_VERSION:-$(sed -n 's/^VELERO_VERSION="\${VELERO_VERSION:-\(.*\)}"$/\1/p' "$here/build-velero.sh")}"
cache="${FERRY_TESTBED_CACHE:-$HOME/.cache/ferry-testbed}"
export FERRY_TESTBED_CACHE="$cache" # build-minio.sh and build-azurite.sh cache there too

kube_dir="$cache/kube-$KUBE_VERSION"
etcd_dir="$cache/etcd-$ETCD_VERSION"
crds_hash="$(cat "$here/crds/go.mod" "$here/crds/go.sum" "$here/crds/main.go" | sha256sum | cut -c1-12)"
crds_dir="$cache/crds-velero-$VELERO_VERSION-$crds_hash"

log() { echo "build: $*" >&2; }
go_() { nice -n 19 go "$@"; }

# Each part is built into a temporary directory next to its final place and renamed into place when complete, so
# an interrupted build never leaves a half-made part that looks cached.

build_kube() {
  local work="$cache/.work/kube-$KUBE_VERSION" tmp gomod staging
  rm -rf "$work"
  mkdir -p "$work"
  cd "$work"
  # k8s.io/kubernetes replaces its staging modules (k8s.io/api, k8s.io/apiserver, ...) by ./staging/src/...; a module
  # that requires it must replace each of them by its published version instead (e2e/testbed/README.md §R1).
  gomod="$(go_ mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
  [ -f "$gomod" ] || { echo "no go.mod for k8s.io/kubernetes@$KUBE_VERSION" >&2; return 1; }
  staging="$(sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\) => \./staging/src/.*#\1#p' "$gomod")"
  [ -n "$staging" ] || { echo "no staging replacements in $gomod" >&2; return 1; }
  {
    echo "module ferry.local/testbed/kube"
    echo
    awk '/^go / { print } /^godebug \(/ { b = 1 } b { print } b && /^\)/ { b = 0 } /^godebug [^(]/ { print }' "$gomod"
    echo
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo
    echo "replace ("
    for m in $staging; do printf '\t%s => %s %s\n' "$m" "$m" "$KUBE_STAGING_VERSION"; done
    echo ")"
  } >go.mod
  cat >tools.go <<'EOF'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
EOF
  echo "== go mod tidy"
  go_ mod tidy
  echo "== go build"
  local minor="${KUBE_VERSION#v1.}"
  minor="${minor%%.*}"
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  tmp="$(mktemp -d "$kube_dir.tmp.XXXXXX")"
  CGO_ENABLED=0 go_ build -trimpath -ldflags "$ldflags" -o "$tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
  "$tmp/kube-apiserver" --version
  rm -rf "$kube_dir" && mv "$tmp" "$kube_dir"
}

build_etcd() {
  local work="$cache/.work/etcd-$ETCD_VERSION" tmp
  rm -rf "$work"
  mkdir -p "$work"
  cd "$work"
  printf 'module ferry.local/testbed/etcd\n\ngo 1.25.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >go.mod
  cat >main.go <<'EOF'
// Command etcd is etcd's own main (go.etcd.io/etcd/server/v3/etcdmain) at the version go.mod pins.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
  echo "== go mod tidy"
  go_ mod tidy
  echo "== go build"
  tmp="$(mktemp -d "$etcd_dir.tmp.XXXXXX")"
  CGO_ENABLED=0 go_ build -trimpath -ldflags "-s -w" -o "$tmp/etcd" .
  "$tmp/etcd" --version
  rm -rf "$etcd_dir" && mv "$tmp" "$etcd_dir"
}

build_crds() {
  local tmp
  tmp="$(mktemp -d "$crds_dir.tmp.XXXXXX")"
  cd "$here/crds"
  echo "== go build (e2e/testbed/crds, Velero $VELERO_VERSION)"
  CGO_ENABLED=0 go_ build -mod=readonly -buildvcs=false -trimpath -o "$tmp/dump-crds" .
  "$tmp/dump-crds" -out "$tmp/crds" >"$tmp/all.yaml"
  rm "$tmp/dump-crds"
  ls "$tmp/crds"
  rm -rf "$crds_dir" && mv "$tmp" "$crds_dir"
}

build_minio() {
  "$repo/e2e/build-minio.sh"
}

build_azurite() {
  AZURITE_VERSION="$AZURITE_VERSION" "$repo/e2e/build-azurite.sh"
}

build_velero() {
  VELERO_VERSION="$VELERO_SERVER_VERSION" "$here/build-velero.sh"
}

build_helm() {
  "$here/build-helm.sh"
}

built() {
  case "$1" in
    kube) [ -x "$kube_dir/kube-apiserver" ] && [ -x "$kube_dir/kube-controller-manager" ] ;;
    etcd) [ -x "$etcd_dir/etcd" ] ;;
    crds) [ -s "$crds_dir/all.yaml" ] ;;
    minio) [ -x "$cache/minio-$MINIO_VERSION/minio" ] ;;
    azurite) [ -x "$cache/azurite-$AZURITE_VERSION/node_modules/.bin/azurite-blob" ] ;;
    velero) [ -x "$cache/velero-$VELERO_SERVER_VERSION/velero" ] && [ -x "$cache/velero-$VELERO_SERVER_VERSION/plugins/velero-plugin-for-aws" ] ;;
    helm) "$here/build-helm.sh" --cached >/dev/null ;;
  esac
}

# Internal: `build.sh --part NAME` builds one part (run by the main invocation, one process group per part).
if [ "${1:-}" = "--part" ]; then
  "build_$2"
  exit
fi

parts=(kube etcd crds minio azurite velero helm)
missing=()
for p in "${parts[@]}"; do built "$p" || missing+=("$p"); done

if [ "${#missing[@]}" -gt 0 ]; then
  command -v go >/dev/null || { log "Go is required (https://go.dev); none on PATH"; exit 1; }
  mkdir -p "$cache/.work" "$cache/.logs"
  # One build at a time per cache; a second caller waits, then finds the parts built.
  if command -v flock >/dev/null; then
    exec 9>"$cache/.build.lock"
    if ! flock -n 9; then
      log "waiting for another build.sh to finish (lock $cache/.build.lock)"
      flock 9
    fi
  fi
  missing=()
  for p in "${parts[@]}"; do built "$p" || missing+=("$p"); done
fi

if [ "${#missing[@]}" -gt 0 ]; then
  log "building: ${missing[*]} (concurrently, under nice -n 19; all seven from cold caches take ~10-25 min on 2 cores)"
  declare -A pid start
  stop_parts() {
    local p
    for p in "${!pid[@]}"; do kill -TERM -- "-${pid[$p]}" 2>/dev/null || true; done
  }
  trap 'stop_parts; exit 130' INT
  trap 'stop_parts; exit 143' TERM
  for p in "${missing[@]}"; do
    # setsid: each part is its own process group, so an interrupted build.sh stops its go commands too.
    setsid "$0" --part "$p" >"$cache/.logs/$p.log" 2>&1 </dev/null &
    pid[$p]=$!
    start[$p]=$SECONDS
    log "$p: started (log: $cache/.logs/$p.log)"
  done
  failed=()
  last_report=$SECONDS
  while [ "${#pid[@]}" -gt 0 ]; do
    sleep 1
    for p in "${!pid[@]}"; do
      if ! kill -0 "${pid[$p]}" 2>/dev/null; then
        rc=0
        wait "${pid[$p]}" || rc=$?
        unset "pid[$p]"
        if [ "$rc" -eq 0 ]; then
          log "$p: done in $((SECONDS - start[$p])) s"
        else
          log "$p: FAILED (exit $rc) after $((SECONDS - start[$p])) s; last lines of $cache/.logs/$p.log:"
          tail -n 30 "$cache/.logs/$p.log" | sed 's/^/    /' >&2
          failed+=("$p")
        fi
      fi
    done
    if [ "${#pid[@]}" -gt 0 ] && [ $((SECONDS - last_report)) -ge 60 ]; then
      last_report=$SECONDS
      for p in "${!pid[@]}"; do
        log "$p: still building ($((SECONDS - start[$p])) s): $(tail -n 1 "$cache/.logs/$p.log" 2>/dev/null | cut -c1-120)"
      done
    fi
  done
  trap - INT TERM
  if [ "${#failed[@]}" -gt 0 ]; then
    log "failed: ${failed[*]}"
    exit 1
  fi
fi

minio_bin="$("$repo/e2e/build-minio.sh")" # cached: prints the path at once
azurite_bin="$(AZURITE_VERSION="$AZURITE_VERSION" "$repo/e2e/build-azurite.sh")" # cached: prints the path at once
printf 'FERRY_TESTBED_KUBE_APISERVER=%q\n' "$kube_dir/kube-apiserver"
printf 'FERRY_TESTBED_KUBE_CONTROLLER_MANAGER=%q\n' "$kube_dir/kube-controller-manager"
printf 'FERRY_TESTBED_ETCD=%q\n' "$etcd_dir/etcd"
printf 'FERRY_TESTBED_MINIO=%q\n' "$minio_bin"
printf 'FERRY_TESTBED_AZURITE=%q\n' "$azurite_bin"
printf 'FERRY_TESTBED_CRDS_DIR=%q\n' "$crds_dir/crds"
printf 'FERRY_TESTBED_CRDS=%q\n' "$crds_dir/all.yaml"
VELERO_VERSION="$VELERO_SERVER_VERSION" "$here/build-velero.sh" # cached: prints its two lines at once
"$here/build-helm.sh" --cached                                     # prints its two lines
