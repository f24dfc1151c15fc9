#!/usr/bin/env bash
# The kube-apiserver and etcd that controller-runtime's envtest runs, built from source
# with the Go toolchain and the Go module proxy (setup-envtest's download is not
# reachable here):
#
#   export KUBEBUILDER_ASSETS=$(hack/offline/envtest.sh)
#
# builds, unless they are already there and report the pinned versions,
#
#   bin/k8s/<k8s version>-<goos>-<goarch>/kube-apiserver    e.g. bin/k8s/1.36.3-linux-amd64
#   bin/k8s/<k8s version>-<goos>-<goarch>/etcd
#   bin/k8s/<k8s version>-<goos>-<goarch>/kubectl           (for the operator's flow test)
#
# (setup-envtest's layout) and prints that directory's absolute path: the only line on
# stdout; everything else goes to stderr. The first build takes minutes; later runs only
# check the versions.
#
# The versions are pinned in one place, the tools modules' go.mod files:
# hack/offline/tools/envtest/kube-apiserver/go.mod (k8s.io/kubernetes) and
# hack/offline/tools/envtest/etcd/go.mod (go.etcd.io/etcd/server/v3); change them with
# hack/offline/tools/envtest/pin.sh. The builds use the committed go.sum files (-mod=readonly),
# CGO_ENABLED=0, -trimpath and -buildvcs=false, so the binaries depend only on the
# pinned sources and the Go toolchain.
set -euo pipefail

log() { printf 'envtest.sh: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}

[ $# -eq 0 ] || die "usage: hack/offline/envtest.sh   (builds the envtest binaries if needed, prints their directory)"

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tools=$root/hack/offline/tools/envtest
go=${GO:-go}

# required_version MODFILE MODULE prints the version MODFILE requires of MODULE.
required_version() {
	awk -v mod="$2" '
		/^require \($/ { in_require = 1; next }
		in_require && /^\)$/ { in_require = 0; next }
		in_require && $1 == mod { print $2; exit }
		/^require / && $2 == mod { print $3; exit }
	' "$1"
}

k8s_version=$(required_version "$tools/kube-apiserver/go.mod" k8s.io/kubernetes)
etcd_version=$(required_version "$tools/etcd/go.mod" go.etcd.io/etcd/server/v3)
[[ $k8s_version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] ||
	die "hack/offline/tools/envtest/kube-apiserver/go.mod: want k8s.io/kubernetes v1.X.Y, got '$k8s_version'"
k8s_minor=${BASH_REMATCH[1]}
staging_version=v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}
[[ $etcd_version =~ ^v3\.[0-9]+\.[0-9]+$ ]] ||
	die "hack/offline/tools/envtest/etcd/go.mod: want go.etcd.io/etcd/server/v3 v3.X.Y, got '$etcd_version'"

# Every staging replace must follow k8s.io/kubernetes (v1.X.Y -> v0.X.Y): a go.mod
# edited by hand instead of with pin.sh would otherwise mix Kubernetes versions.
stale=$(awk -v want="$staging_version" '
	/^replace \($/ { in_replace = 1; next }
	in_replace && /^\)$/ { in_replace = 0; next }
	in_replace && $2 == "=>" && $1 ~ /^k8s\.io\// && $4 != want { print $1 " => " $3 " " $4 }
	/^replace / && $3 == "=>" && $2 ~ /^k8s\.io\// && $5 != want { print $2 " => " $4 " " $5 }
' "$tools/kube-apiserver/go.mod")
[ -z "$stale" ] ||
	die "hack/offline/tools/envtest/kube-apiserver/go.mod: staging replaces not at $staging_version (run hack/offline/tools/envtest/pin.sh): $stale"

goos=$("$go" env GOOS) goarch=$("$go" env GOARCH)
dir=$root/bin/k8s/${k8s_version#v}-$goos-$goarch
apiserver_want="Kubernetes $k8s_version"
etcd_want="etcd Version: ${etcd_version#v}"

# current NAME WANT: whether dir/NAME exists and its --version output has the line WANT.
# The output is read whole first: with pipefail, grep -q stopping early would kill
# the program with SIGPIPE and fail the check at random.
current() {
	[ -x "$dir/$1" ] || return 1
	local out
	out=$("$dir/$1" --version 2>/dev/null) || return 1
	grep -qxF "$2" <<<"$out"
}

# kubectl_current: whether dir/kubectl reports the pinned version.
kubectl_current() {
	[ -x "$dir/kubectl" ] || return 1
	local out
	out=$("$dir/kubectl" version --client 2>/dev/null) || return 1
	grep -qxF "Client Version: $k8s_version" <<<"$out"
}

mkdir -p "$dir"
# One build at a time per directory (parallel test packages may all call this script).
if command -v flock >/dev/null; then
	exec 9>"$dir/.lock"
	flock 9
fi

build_env=(env GOWORK=off GOFLAGS='-mod=readonly -buildvcs=false' CGO_ENABLED=0 GOOS="$goos" GOARCH="$goarch")

# As Kubernetes' hack/lib/version.sh does, for both version packages; without it
# /version and --version report v0.0.0.
k8s_ldflags=(-s -w)
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	k8s_ldflags+=(
		-X "$pkg.gitVersion=$k8s_version" -X "$pkg.gitMajor=1" -X "$pkg.gitMinor=$k8s_minor"
		-X "$pkg.gitCommit=" -X "$pkg.gitTreeState=clean"
	)
done

# build_k8s NAME: builds k8s.io/kubernetes/cmd/NAME into dir.
build_k8s() {
	(cd "$tools/kube-apiserver" && "${build_env[@]}" "$go" build -trimpath -ldflags "${k8s_ldflags[*]}" \
		-o "$dir/.$1.tmp" "k8s.io/kubernetes/cmd/$1")
	mv -f "$dir/.$1.tmp" "$dir/$1"
}

if ! current kube-apiserver "$apiserver_want"; then
	log "building kube-apiserver $k8s_version into $dir (a few minutes the first time)"
	start=$SECONDS
	build_k8s kube-apiserver
	log "built kube-apiserver in $((SECONDS - start))s"
	current kube-apiserver "$apiserver_want" ||
		die "$dir/kube-apiserver --version does not report '$apiserver_want'"
fi

# kubectl of the same version, for the operator's flow test: no machine needs one.
if ! kubectl_current; then
	log "building kubectl $k8s_version into $dir"
	start=$SECONDS
	build_k8s kubectl
	log "built kubectl in $((SECONDS - start))s"
	kubectl_current || die "$dir/kubectl version --client does not report $k8s_version"
fi

if ! current etcd "$etcd_want"; then
	log "building etcd $etcd_version into $dir"
	start=$SECONDS
	(cd "$tools/etcd" && "${build_env[@]}" "$go" build -trimpath -ldflags "-s -w" \
		-o "$dir/.etcd.tmp" go.etcd.io/etcd/server/v3)
	mv -f "$dir/.etcd.tmp" "$dir/etcd"
	log "built etcd in $((SECONDS - start))s"
	current etcd "$etcd_want" || die "$dir/etcd --version does not report '$etcd_want'"
fi

printf '%s\n' "$dir"
