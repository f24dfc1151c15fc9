#!/usr/bin/env bash
# Builds CloudNativePG's operator image with no image registry, for the failover test on
# kind (make test-e2e-ha): the operator of hack/offline/tools/kind/cnpg/go.mod's version, compiled
# from the Go module proxy, in a minimal root filesystem, `docker import`ed.
#
#   image=$(hack/offline/cnpg-operator-image.sh)   # evalmeter.local/cloudnative-pg:1.30.0
#
# prints the image name, the only line on stdout. As in CloudNativePG's own image
# (its Dockerfile), the one binary, /operator/manager_amd64 linked from /manager, is the
# operator and, copied into every PostgreSQL pod by an init container, the instance
# manager. The binary is cached in bin/kind/. GOARCH amd64 only.
#
# Environment: DOCKER_HOST (else Docker's default socket), GO.
set -euo pipefail
# shellcheck source=hack/offline/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ $# -eq 0 ] || die "usage: hack/offline/cnpg-operator-image.sh   (prints the image name)"
docker version >/dev/null 2>&1 || die "no Docker engine at ${DOCKER_HOST:-the default socket} (hack/offline/docker.sh start)"

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mod=$root/hack/offline/tools/kind/cnpg
out=$root/bin/kind
go=${GO:-go}
version=$(cnpg_version "$mod/go.mod")
image=evalmeter.local/cloudnative-pg:${version#v}
# keyed on go.sum: the same version with other dependencies is another binary
bin=$out/cnpg-$version-$(sha256sum "$mod/go.sum" | cut -c1-12)/manager
mkdir -p "$out"
exec 9>"$out/.lock-cnpg"
flock 9

build_binary() {
	mkdir -p "$(dirname "$bin")"
	(cd "$mod" && env GOWORK=off GOFLAGS='-mod=readonly -buildvcs=false' CGO_ENABLED=0 GOOS=linux GOARCH=amd64 \
		"$go" build -trimpath -ldflags "-s -w" -o "$bin.tmp" github.com/cloudnative-pg/cloudnative-pg/cmd/manager)
	mv -f "$bin.tmp" "$bin"
}
[ -x "$bin" ] || step "building CloudNativePG $version (minutes the first time)" build_binary

stamp=$(contents "$bin" "${BASH_SOURCE[0]}" "$(dirname "${BASH_SOURCE[0]}")/lib.sh" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$out/cnpg-operator-image.stamp" 2>/dev/null)" != "$stamp" ] || ! docker image inspect "$image" >/dev/null 2>&1; then
	build_image() {
		local d=$out/work-cnpg old_id
		mini_rootfs "$d" /etc/ssl/certs/ca-certificates.crt
		# The operator looks for the instance managers it can hand out as
		# operator/manager_<GOARCH>, relative to its working directory.
		mkdir -p "$d/operator"
		install -m 0755 "$bin" "$d/operator/manager_amd64"
		ln -s operator/manager_amd64 "$d/manager"
		old_id=$(image_id "$image")
		tar -C "$d" --numeric-owner -c . | docker import \
			--change 'WORKDIR /' \
			--change 'ENTRYPOINT ["/manager"]' \
			--change 'USER 65532:65532' \
			- "$image" >/dev/null
		drop_old_image "$old_id" "$image"
		rm -rf "$d"
	}
	step "building $image" build_image
	echo "$stamp" >"$out/cnpg-operator-image.stamp"
fi
echo "$image"
