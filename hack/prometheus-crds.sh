#!/usr/bin/env bash
# The CustomResourceDefinitions of prometheus-operator (ServiceMonitor, PrometheusRule, ...)
# at a pinned version, for the chart's tests:
#
#   dir=$(hack/prometheus-crds.sh)    # .../prometheus-operator@v0.92.0/example/prometheus-operator-crd
#
# downloads the module github.com/prometheus-operator/prometheus-operator through the Go
# module proxy into the module cache, checked against the checksum database, without
# adding it to go.mod: only its CRD files are used, never its code. It prints the CRD
# directory's absolute path, the only line on stdout. Once cached, no network is used.
set -euo pipefail

# The one place the version is pinned.
version=v0.92.0
module=github.com/prometheus-operator/prometheus-operator

[ $# -eq 0 ] || {
	echo "usage: hack/prometheus-crds.sh   (prints the directory of prometheus-operator $version's CRDs)" >&2
	exit 1
}

go=${GO:-go}
# Outside any module, so that neither go.mod nor go.sum changes.
cd "${TMPDIR:-/tmp}"
json=$(env GOWORK=off GOFLAGS= GO111MODULE=on "$go" mod download -json "$module@$version")
dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
crds=$dir/example/prometheus-operator-crd
if [ -z "$dir" ] || [ ! -f "$crds/monitoring.coreos.com_servicemonitors.yaml" ]; then
	echo "prometheus-crds.sh: go mod download $module@$version gave no CRDs:" >&2
	echo "$json" >&2
	exit 1
fi
printf '%s\n' "$crds"
