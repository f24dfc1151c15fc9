# shellcheck shell=bash
# Functions shared by hack/e2e.sh, hack/*-manifest.sh and the offline image
# factory (hack/offline/lib.sh sources it). Source it; it sets nothing else.

log() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }
die() {
	log "$*"
	exit 1
}
# step NAME CMD...: runs CMD, logs how long it took.
step() {
	local name=$1 start=$SECONDS
	shift
	log "$name ..."
	"$@"
	log "$name: done in $((SECONDS - start))s"
}

# kind_install GO VERSION DIR: builds the kind CLI at VERSION into DIR/kind.
kind_install() {
	(cd "$3" && env GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0 GOBIN="$3" \
		"$1" install -trimpath "sigs.k8s.io/kind@$2")
}

# module_version GO_MOD MODULE: the version of MODULE that GO_MOD requires (vX.Y.Z).
module_version() {
	local v
	v=$(awk -v m="$2" '$1 == "require" && $2 == m { print $3; exit } $1 == m { print $2; exit }' "$1")
	[[ $v =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "$1: no $2 vX.Y.Z"
	echo "$v"
}

# module_dir MOD_DIR MODULE VERSION: the directory of MODULE@VERSION in the Go module
# cache, downloaded through the Go module proxy if need be and checked against
# MOD_DIR/go.sum.
module_dir() {
	local json dir
	json=$(cd "$1" && env GOWORK=off GOFLAGS=-mod=readonly "${GO:-go}" mod download -json "$2@$3")
	dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
	[ -n "$dir" ] && [ -d "$dir" ] || die "go mod download $2@$3 gave no directory: $json"
	echo "$dir"
}

# cnpg_version GO_MOD: the CloudNativePG version GO_MOD requires (vX.Y.Z).
cnpg_version() { module_version "$1" github.com/cloudnative-pg/cloudnative-pg; }

# version_ldflags GO: the linker flags that stamp evalmeter's version and commit
# (cmd/evalmeter/main.go): VERSION and COMMIT when set, else the working tree's,
# from hack/releases (go run ./hack/release version) and git.
version_ldflags() {
	local version=${VERSION:-} commit=${COMMIT:-}
	[ -n "$version" ] || version=$("$1" run ./hack/release version 2>/dev/null) || version=dev
	[ -n "$commit" ] || commit=$(git rev-parse HEAD 2>/dev/null) || commit=
	echo "-X main.version=$version -X main.commit=$commit"
}
