#!/usr/bin/env bash
# Builds helm once, from the Go module proxy, into $FERRY_TESTBED_CACHE (default $HOME/.cache/ferry-testbed)/
# helm-<version>/helm, copies the CRDs of the chart's optional kinds out of their upstream modules' zips, and prints
# where they are as sourceable KEY=VALUE lines on stdout (progress on stderr):
#
#   FERRY_TESTBED_HELM             helm-<version>/helm   (helm.sh/helm/v3/cmd/helm)
#   FERRY_TESTBED_CHART_CRDS_DIR   chart-crds-po<version>-cm<version>/: ServiceMonitor and PrometheusRule
#                                  (github.com/prometheus-operator/prometheus-operator, example/prometheus-operator-crd)
#                                  and Certificate (github.com/cert-manager/cert-manager, deploy/crds), as published
#
# Used by tests/helm_chart.rs (helm lint/template of deploy/helm/ferry, then a dry run of every rendered object on
# the bed's kube-apiserver). A second run finds both and returns at once; versions are part of the directories'
# names, so bumping one rebuilds it. `build-helm.sh --cached` builds nothing: it prints the lines if both are
# there and exits 1 if not (tests use it to decide whether they can run without building).
set -euo pipefail
HELM_VERSION="${HELM_VERSION:-v3.21.4}"
PROMETHEUS_OPERATOR_VERSION="${PROMETHEUS_OPERATOR_VERSION:-v0.85.0}"
CERT_MANAGER_VERSION="${CERT_MANAGER_VERSION:-v1.21.2}"
cache="${FERRY_TESTBED_CACHE:-$HOME/.cache/ferry-testbed}"
dir="$cache/helm-$HELM_VERSION"
crds_dir="$cache/chart-crds-po$PROMETHEUS_OPERATOR_VERSION-cm$CERT_MANAGER_VERSION"

log() { echo "build-helm: $*" >&2; }
helm_built() { [ -x "$dir/helm" ]; }
crds_built() { [ -s "$crds_dir/certificates.cert-manager.io.yaml" ]; }
built() { helm_built && crds_built; }
print() {
  printf 'FERRY_TESTBED_HELM=%q\n' "$dir/helm"
  printf 'FERRY_TESTBED_CHART_CRDS_DIR=%q\n' "$crds_dir"
}

if [ "${1:-}" = "--cached" ]; then
  built || exit 1
  print
  exit 0
fi

if ! built; then
  command -v go >/dev/null || { log "Go is required (https://go.dev); none on PATH"; exit 1; }
  mkdir -p "$cache"
  # One build at a time; a second caller waits, then finds the binary.
  if command -v flock >/dev/null; then
    exec 9>"$cache/.build-helm.lock"
    flock 9
  fi
fi
if ! helm_built; then
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
if ! crds_built; then
  tmp="$(mktemp -d "$crds_dir.tmp.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  # module@version, file inside its zip, name of the CRD (the file written is <name>.yaml).
  while read -r module version file name; do
    log "CRD $name from $module@$version"
    mod_dir="$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
    [ -s "$mod_dir/$file" ] || { log "no $file in $module@$version"; exit 1; }
    grep -q "^  name: $name\$" "$mod_dir/$file" || { log "$file of $module@$version does not define $name"; exit 1; }
    # Module cache files are read-only: copy the content, not the mode.
    cat "$mod_dir/$file" >"$tmp/$name.yaml"
  done <<EOT
github.com/prometheus-operator/prometheus-operator $PROMETHEUS_OPERATOR_VERSION example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml servicemonitors.monitoring.coreos.com
github.com/prometheus-operator/prometheus-operator $PROMETHEUS_OPERATOR_VERSION example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml prometheusrules.monitoring.coreos.com
github.com/cert-manager/cert-manager $CERT_MANAGER_VERSION deploy/crds/cert-manager.io_certificates.yaml certificates.cert-manager.io
EOT
  rm -rf "$crds_dir" && mv "$tmp" "$crds_dir"
  trap - EXIT
fi
print
