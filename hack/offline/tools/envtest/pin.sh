#!/usr/bin/env bash
# Pin the kube-apiserver and etcd that hack/offline/envtest.sh builds for envtest:
#
#   hack/offline/tools/envtest/pin.sh v1.36.3 v3.6.16
#
# rewrites kube-apiserver/go.mod (k8s.io/kubernetes) and etcd/go.mod
# (go.etcd.io/etcd/server/v3) here, with their go.sum; commit them. They are the one
# place the versions are pinned: hack/offline/envtest.sh reads them from there.
#
# They are two modules, not one, so that each binary is built with the dependency
# versions its own release pins: in one module, minimal version selection would give
# kube-apiserver etcd's newer gRPC and OpenTelemetry, and etcd Kubernetes' Prometheus.
#
# k8s.io/kubernetes requires its staging modules (k8s.io/api, k8s.io/apiserver, ...)
# at v0.0.0 and replaces them with ./staging/src/... directories; a replace only
# applies in the main module, so kube-apiserver/go.mod replaces each of them with the
# release published for the same Kubernetes version (v1.X.Y -> v0.X.Y). The list is
# read from the k8s.io/kubernetes go.mod, not written by hand.
set -euo pipefail

log() { printf 'pin.sh: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}

[ $# -eq 2 ] || die "usage: hack/offline/tools/envtest/pin.sh K8S_VERSION ETCD_VERSION (e.g. v1.36.3 v3.6.16)"
k8s_version=$1 etcd_version=$2
[[ $k8s_version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || die "K8S_VERSION must look like v1.36.3, got $k8s_version"
staging_version=v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}
[[ $etcd_version =~ ^v3\.[0-9]+\.[0-9]+$ ]] || die "ETCD_VERSION must look like v3.6.16, got $etcd_version"

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export GOWORK=off GOFLAGS=-mod=mod

# drop_replaces removes every replace directive of the go.mod in the current directory.
drop_replaces() {
	local old edits=()
	while IFS= read -r old; do
		[ -n "$old" ] && edits+=("-dropreplace=$old")
	done < <(go mod edit -json | awk -F'"' '/"Old": \{/ { getline; print $4 }')
	[ "${#edits[@]}" -eq 0 ] || go mod edit "${edits[@]}"
}

# kube-apiserver
cd "$here/kube-apiserver"
k8s_mod=$(go mod download -json "k8s.io/kubernetes@$k8s_version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[ -f "$k8s_mod" ] || die "could not download k8s.io/kubernetes@$k8s_version"
# Staging modules: required at v0.0.0 and replaced with a ./staging directory.
mapfile -t staging < <(
	awk '
		/^replace \($/ { in_replace = 1; next }
		in_replace && /^\)$/ { in_replace = 0; next }
		in_replace && $2 == "=>" && $3 ~ /^\.\/staging\// { replaced[$1] = 1 }
		/^require \($/ { in_require = 1; next }
		in_require && /^\)$/ { in_require = 0; next }
		in_require && $2 == "v0.0.0" { required[$1] = 1 }
		END { for (m in required) if (m in replaced) print m }
	' "$k8s_mod" | sort
)
[ "${#staging[@]}" -gt 0 ] || die "found no staging modules in $k8s_mod"
drop_replaces
go mod edit "-require=k8s.io/kubernetes@$k8s_version"
{
	printf '\nreplace (\n'
	for m in "${staging[@]}"; do
		printf '\t%s => %s %s\n' "$m" "$m" "$staging_version"
	done
	printf ')\n'
} >>go.mod
go mod edit -fmt
go mod tidy
log "kube-apiserver: k8s.io/kubernetes $k8s_version, ${#staging[@]} staging modules replaced with $staging_version"

# etcd
cd "$here/etcd"
drop_replaces
go mod edit "-require=go.etcd.io/etcd/server/v3@$etcd_version"
go mod tidy
log "etcd: go.etcd.io/etcd/server/v3 $etcd_version"
