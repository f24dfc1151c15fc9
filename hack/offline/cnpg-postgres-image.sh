#!/usr/bin/env bash
# Builds a PostgreSQL 15 operand image for CloudNativePG with no image registry, for the
# failover test on kind (make test-e2e-ha):
#
#   image=$(hack/offline/cnpg-postgres-image.sh)  # evalmeter.local/cnpg-postgresql:15.<minor>
#
# prints the image name, the only line on stdout. It takes PostgreSQL from Debian
# bookworm's postgresql-15, the root filesystem hack/offline/postgres-image.sh makes (cached
# in bin/kind/rootfs-postgres), and keeps what CloudNativePG's operand images must have
# (docs/src/container_images.md of its module):
#
#   - initdb, postgres, pg_ctl, pg_controldata, pg_basebackup, pg_rewind and pg_isready on
#     PATH, psql for the test's checks, du for `kubectl cnpg status`;
#   - a working locale: C.UTF-8 (LANG);
#   - the user CloudNativePG runs PostgreSQL as by default, postgres with uid and gid 26
#     (initdb refuses a uid with no /etc/passwd entry);
#   - a tag that starts with the major version, from which the operator learns it.
#
# There is no entrypoint: the operator runs its instance manager in the pod.
#
# Environment: DOCKER_HOST (default: hack/offline/docker.sh's engine), DEBIAN_MIRROR.
set -euo pipefail
# shellcheck source=hack/offline/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ $# -eq 0 ] || die "usage: hack/offline/cnpg-postgres-image.sh   (prints the image name)"
need_root_and_docker

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$root/bin/kind
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$out"
postgres_rootfs "$out" "$DEBIAN_MIRROR"
rootfs=$pg_rootfs version=$pg_version
image=evalmeter.local/cnpg-postgresql:15.$pg_minor

stamp=$( (
	echo "$image $version"
	contents "${BASH_SOURCE[0]}" "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
) | sha256sum | cut -d' ' -f1)
if [ "$(cat "$out/cnpg-postgres-image.stamp" 2>/dev/null)" = "$stamp" ] && docker image inspect "$image" >/dev/null 2>&1; then
	echo "$image"
	exit 0
fi

build() {
	local d=$out/work-cnpg-postgres bin=/usr/lib/postgresql/15/bin old_id so
	mini_rootfs "$d" "$rootfs/etc/ssl/certs/ca-certificates.crt"
	echo 'postgres:x:26:26:PostgreSQL:/var/lib/postgresql:/bin/sh' >>"$d/etc/passwd"
	echo 'postgres:x:26:' >>"$d/etc/group"
	copy_with_libs "$rootfs" "$d" $bin/postgres $bin/initdb $bin/pg_ctl $bin/pg_controldata \
		$bin/pg_basebackup $bin/pg_rewind $bin/pg_isready $bin/psql \
		/usr/bin/dash /usr/bin/du /usr/bin/cat /usr/bin/ls /usr/bin/mkdir /usr/bin/rm /usr/bin/sleep
	# every module but the LLVM JIT (100 MB of libLLVM)
	for so in "$rootfs"/usr/lib/postgresql/15/lib/*.so; do
		[[ ${so##*/} == llvmjit* ]] || copy_with_libs "$rootfs" "$d" "/usr/lib/postgresql/15/lib/${so##*/}"
	done
	(cd "$rootfs" && cp -a --parents ./usr/share/postgresql/15 ./usr/share/zoneinfo ./usr/lib/locale/C.utf8 "$d/")
	ln -s usr/bin "$d/bin"
	ln -s dash "$d/usr/bin/sh"
	mkdir -p "$d/var/lib/postgresql" "$d/var/run/postgresql"
	chown -R 26:26 "$d/var/lib/postgresql" "$d/var/run/postgresql"
	chmod 2777 "$d/var/run/postgresql"

	old_id=$(image_id "$image")
	tar -C "$d" --numeric-owner -c . | docker import \
		--change "ENV PATH=$bin:/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8" \
		--change 'USER 26:26' \
		- "$image" >/dev/null
	drop_old_image "$old_id" "$image"
	rm -rf "$d"
}
step "building $image" build
echo "$stamp" >"$out/cnpg-postgres-image.stamp"
echo "$image"
