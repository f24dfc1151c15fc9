#!/usr/bin/env bash
# Builds the images of CloudNativePG's Barman Cloud plugin with no image registry, for the
# restore drill on kind (make test-e2e-dr):
#
#   image=$(hack/offline/barman-cloud-image.sh operator)  # evalmeter.local/plugin-barman-cloud:0.14.0
#   image=$(hack/offline/barman-cloud-image.sh sidecar)   # evalmeter.local/plugin-barman-cloud-sidecar:0.14.0
#
# prints the image name, the only line on stdout. The plugin is one Go binary
# (cmd/manager, at hack/offline/tools/kind/barman-cloud/go.mod's version) with
# subcommands, as in the plugin's own images (containers/ in its module):
#
#   - operator: /manager in a minimal root filesystem, run as `manager operator` by the
#     plugin's Deployment (its release manifest, hack/barman-cloud-manifest.sh);
#   - sidecar: /manager, which the plugin injects into every PostgreSQL pod (`manager
#     instance`: WAL archiving and backups) and into recovery jobs (`manager restore`),
#     beside Barman's cloud tools (barman-cloud-backup, -wal-archive, -wal-restore,
#     -restore, -backup-list/-show/-delete, -check-wal-archive), which it runs from PATH.
#     The plugin's image installs Barman 3.19 with pip; here they are Debian trixie's
#     barman-cli-cloud (3.13: bookworm's 3.4 is too old) with python3-boto3 for S3, in
#     a minbase trixie root filesystem (debootstrap, cached in
#     bin/kind/rootfs-barman-cloud). As upstream it runs as uid 26 (postgres, CloudNativePG's
#     default PostgreSQL user), with a read-only root filesystem (the plugin sets it): Debian's
#     Python packages come compiled. It needs no PostgreSQL binary: barman-cloud-backup reads
#     the data directory through the pod's shared volume and talks to PostgreSQL with
#     psycopg2; the restores only download and unpack.
#
# The binary is cached in bin/kind/. GOARCH amd64 only.
#
# Environment: DOCKER_HOST (default: hack/offline/docker.sh's engine), GO, DEBIAN_MIRROR.
set -euo pipefail
# shellcheck source=hack/offline/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

kind=${1:-}
[ $# -eq 1 ] && { [ "$kind" = operator ] || [ "$kind" = sidecar ]; } ||
	die "usage: hack/offline/barman-cloud-image.sh operator|sidecar   (prints the image name)"
need_root_and_docker

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mod=$root/hack/offline/tools/kind/barman-cloud
out=$root/bin/kind
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
version=$(module_version "$mod/go.mod" github.com/cloudnative-pg/plugin-barman-cloud)
# keyed on go.sum: the same version with other dependencies is another binary
bin=$out/barman-cloud-$version-$(sha256sum "$mod/go.sum" | cut -c1-12)/manager
mkdir -p "$out"
exec 9>"$out/.lock-barman-cloud"
flock 9

[ -x "$bin" ] || step "building the Barman Cloud plugin $version (minutes the first time)" \
	go_build_tool "$mod" github.com/cloudnative-pg/plugin-barman-cloud/cmd/manager "$bin"

if [ "$kind" = operator ]; then
	image=evalmeter.local/plugin-barman-cloud:${version#v}
	inputs=("$bin")
else
	image=evalmeter.local/plugin-barman-cloud-sidecar:${version#v}
	rootfs=$out/rootfs-barman-cloud
	step "debootstrap trixie with barman-cli-cloud into $rootfs" \
		debootstrap_once "$rootfs" barman-cli-cloud,python3-boto3,ca-certificates "$DEBIAN_MIRROR" trixie
	barman=$(chroot "$rootfs" dpkg-query -W -f '${Version}' barman-cli-cloud)
	inputs=("$bin" "$rootfs.packages")
fi
stamp=$( (
	echo "$image ${barman:-}"
	contents "${inputs[@]}" "${BASH_SOURCE[0]}" "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
) | sha256sum | cut -d' ' -f1)
stampfile=$out/barman-cloud-$kind-image.stamp
if [ "$(cat "$stampfile" 2>/dev/null)" = "$stamp" ] && docker image inspect "$image" >/dev/null 2>&1; then
	echo "$image"
	exit 0
fi

build_operator() {
	local d=$out/work-barman-cloud
	mini_rootfs "$d" /etc/ssl/certs/ca-certificates.crt
	install -m 0755 "$bin" "$d/manager"
	import_rootfs "$d" "$image" 'WORKDIR /' 'ENTRYPOINT ["/manager"]' 'USER 65532:65532'
	rm -rf "$d"
}

build_sidecar() {
	local d=$out/work-barman-cloud-sidecar
	# The root filesystem as debootstrap left it, less what a container never reads
	# (documentation, apt's and dpkg's caches), plus the plugin and its user.
	rm -rf "$d"
	cp -a "$rootfs" "$d"
	rm -rf "$d"/usr/share/{doc,man,info,locale} "$d"/var/cache/apt/* "$d"/var/lib/apt/lists/*
	# botocore's models of every AWS service but S3's and STS's (about 100 MB): Barman's S3
	# client loads no other.
	find "$d/usr/lib/python3/dist-packages/botocore/data" -mindepth 1 -maxdepth 1 -type d \
		! -name s3 ! -name sts -exec rm -rf {} +
	# postgres, with CloudNativePG's default uid and gid (26): Python and boto3 look the
	# user's home up.
	echo 'postgres:x:26:26:PostgreSQL:/var/lib/postgresql:/usr/sbin/nologin' >>"$d/etc/passwd"
	echo 'postgres:x:26:' >>"$d/etc/group"
	mkdir -p "$d/var/lib/postgresql"
	chown 26:26 "$d/var/lib/postgresql"
	install -m 0755 "$bin" "$d/manager"
	import_rootfs "$d" "$image" 'ENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8' 'WORKDIR /' \
		'ENTRYPOINT ["/manager"]' 'USER 26:26'
	rm -rf "$d"
}
step "building $image" "build_$kind"
echo "$stamp" >"$stampfile"
echo "$image"
