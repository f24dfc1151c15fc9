# shellcheck shell=bash
# Functions shared by hack/e2e.sh, hack/cnpg-manifest.sh and the offline image
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

# cnpg_version GO_MOD: the CloudNativePG version GO_MOD requires (vX.Y.Z).
cnpg_version() {
	local v
	v=$(awk '$1 == "require" && $2 == "github.com/cloudnative-pg/cloudnative-pg" { print $3; exit }
		$1 == "github.com/cloudnative-pg/cloudnative-pg" { print $2; exit }' "$1")
	[[ $v =~ ^v1\.[0-9]+\.[0-9]+$ ]] || die "$1: no github.com/cloudnative-pg/cloudnative-pg vX.Y.Z"
	echo "$v"
}

# version_ldflags GO: the linker flags that stamp evalmeter's version and commit
# (cmd/evalmeter/main.go): VERSION and COMMIT when set, else the working tree's,
# from hack/releases (go run ./hack/release version) and git.
version_ldflags() {
	local version=${VERSION:-} commit=${COMMIT:-}
	[ -n "$version" ] || version=$("$1" run ./hack/release version 2>/dev/null) || version=dev
	[ -n "$commit" ] || commit=$(git rev-parse HEAD 2>/dev/null) || commit=
	echo "-X main.version=$version -X main.commit=$commit"
}
