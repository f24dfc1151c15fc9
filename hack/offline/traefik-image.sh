#!/usr/bin/env bash
# Builds an image of Traefik, the ingress controller of the kind end-to-end test, with no
# image registry: Traefik v3.6.12 compiled from the Go module proxy
# (hack/offline/tools/kind/traefik/go.mod), in a minimal root filesystem, `docker import`ed.
#
#   image=$(hack/offline/traefik-image.sh)     # evalmeter.local/traefik:v3.6.12
#
# prints the image name, the only line on stdout. The binary is cached in bin/kind/
# (the first build takes 5 to 8 minutes on 2 cores); test/e2e/testdata/traefik.yaml runs it.
#
# Environment: DOCKER_HOST (else Docker's default socket), GO.
set -euo pipefail
# shellcheck source=hack/offline/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ $# -eq 0 ] || die "usage: hack/offline/traefik-image.sh   (prints the image name)"
docker version >/dev/null 2>&1 || die "no Docker engine at ${DOCKER_HOST:-the default socket} (hack/offline/docker.sh start)"

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mod=$root/hack/offline/tools/kind/traefik
out=$root/bin/kind
go=${GO:-go}
version=$(awk '$1 == "require" && $2 == "github.com/traefik/traefik/v3" { print $3; exit }' "$mod/go.mod")
[[ $version =~ ^v3\.[0-9]+\.[0-9]+$ ]] || die "$mod/go.mod: no github.com/traefik/traefik/v3 vX.Y.Z"
image=evalmeter.local/traefik:$version
bin=$out/traefik-$version/traefik
mkdir -p "$out"
exec 9>"$out/.lock-traefik"
flock 9

build_binary() {
	mkdir -p "$(dirname "$bin")"
	(cd "$mod" && env GOWORK=off GOFLAGS='-mod=readonly -buildvcs=false' CGO_ENABLED=0 GOOS=linux GOARCH=amd64 \
		"$go" build -trimpath -ldflags "-s -w -X github.com/traefik/traefik/v3/pkg/version.Version=$version" \
		-o "$bin.tmp" github.com/traefik/traefik/v3/cmd/traefik)
	mv -f "$bin.tmp" "$bin"
}
# (the output read whole: grep -q stopping at the first line, traefik dies of SIGPIPE
# writing the next ones, and pipefail took that for a stale binary)
[ -x "$bin" ] && grep -q "$version" <<<"$("$bin" version 2>/dev/null)" ||
	step "building traefik $version (minutes the first time)" build_binary

stamp=$(contents "$bin" "${BASH_SOURCE[0]}" "$(dirname "${BASH_SOURCE[0]}")/lib.sh" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$out/traefik-image.stamp" 2>/dev/null)" != "$stamp" ] || ! docker image inspect "$image" >/dev/null 2>&1; then
	build_image() {
		local d=$out/work-traefik old_id
		mini_rootfs "$d" /etc/ssl/certs/ca-certificates.crt
		install -m 0755 "$bin" "$d/usr/local/bin/traefik"
		# Traefik looks for a configuration file under $HOME and stops when it cannot.
		mkdir -p "$d/home/nonroot"
		chown 65532:65532 "$d/home/nonroot"
		old_id=$(image_id "$image")
		tar -C "$d" --numeric-owner -c . | docker import \
			--change 'ENTRYPOINT ["/usr/local/bin/traefik"]' \
			--change 'ENV HOME=/home/nonroot' \
			--change 'USER 65532:65532' \
			- "$image" >/dev/null
		drop_old_image "$old_id" "$image"
		rm -rf "$d"
	}
	step "building $image" build_image
	echo "$stamp" >"$out/traefik-image.stamp"
fi
echo "$image"
