#!/usr/bin/env bash
# Builds versitygw, an S3-compatible object storage gateway (Versity's, maintained,
# Apache 2.0), as an image with no image registry: the object storage of the restore
# drill on kind (make test-e2e-dr), where the Barman Cloud plugin archives WAL and base
# backups and restores from them.
#
#   image=$(hack/offline/versitygw-image.sh)   # evalmeter.local/versitygw:1.8.0
#
# prints the image name, the only line on stdout. The binary is versitygw's cmd/versitygw
# at hack/offline/tools/kind/versitygw/go.mod's version, compiled from the Go module proxy
# (about a minute) and cached in bin/kind/; the image is a minimal root filesystem with
# it, `docker import`ed, run as 65532. Run it as `versitygw posix DIR` (objects are files
# under DIR) with ROOT_ACCESS_KEY_ID and ROOT_SECRET_ACCESS_KEY; it listens on :7070.
# GOARCH amd64 only.
#
# Environment: DOCKER_HOST (else Docker's default socket), GO.
set -euo pipefail
# shellcheck source=hack/offline/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ $# -eq 0 ] || die "usage: hack/offline/versitygw-image.sh   (prints the image name)"
docker version >/dev/null 2>&1 || die "no Docker engine at ${DOCKER_HOST:-the default socket} (hack/offline/docker.sh start)"

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mod=$root/hack/offline/tools/kind/versitygw
out=$root/bin/kind
version=$(module_version "$mod/go.mod" github.com/versity/versitygw)
image=evalmeter.local/versitygw:${version#v}
# keyed on go.sum: the same version with other dependencies is another binary
bin=$out/versitygw-$version-$(sha256sum "$mod/go.sum" | cut -c1-12)/versitygw
mkdir -p "$out"
exec 9>"$out/.lock-versitygw"
flock 9

[ -x "$bin" ] || step "building versitygw $version" go_build_tool "$mod" github.com/versity/versitygw/cmd/versitygw "$bin"

stamp=$(contents "$bin" "${BASH_SOURCE[0]}" "$(dirname "${BASH_SOURCE[0]}")/lib.sh" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$out/versitygw-image.stamp" 2>/dev/null)" != "$stamp" ] || ! docker image inspect "$image" >/dev/null 2>&1; then
	build_image() {
		local d=$out/work-versitygw
		mini_rootfs "$d" /etc/ssl/certs/ca-certificates.crt
		install -m 0755 "$bin" "$d/usr/local/bin/versitygw"
		import_rootfs "$d" "$image" 'ENTRYPOINT ["/usr/local/bin/versitygw"]' 'USER 65532:65532' 'EXPOSE 7070'
		rm -rf "$d"
	}
	step "building $image" build_image
	echo "$stamp" >"$out/versitygw-image.stamp"
fi
echo "$image"
