#!/usr/bin/env bash
# Builds a small PostgreSQL 15 image with no image registry, for the chart's optional
# PostgreSQL (postgresql.enabled) on clusters that cannot pull postgres:15:
#
#   image=$(hack/offline/postgres-image.sh)      # evalmeter.local/postgres:15.<minor>
#   helm install ... --set postgresql.image.repository=${image%:*} --set postgresql.image.tag=${image##*:}
#
# prints the image name, the only line on stdout. It takes PostgreSQL from Debian
# bookworm's postgresql-15 (debootstrap, cached in bin/kind/rootfs-postgres) and keeps
# only the server, initdb, pg_isready and psql with their libraries and data files.
#
# Its entrypoint does what the official image's does for the variables the chart sets:
# on an empty PGDATA it runs initdb with superuser POSTGRES_USER and password
# POSTGRES_PASSWORD (scram-sha-256 over TCP), creates POSTGRES_DB, then runs postgres
# listening on all addresses. It runs as any uid that /etc/passwd knows: postgres (999).
#
# Environment: DOCKER_HOST (default: hack/offline/docker.sh's engine), DEBIAN_MIRROR.
set -euo pipefail
# shellcheck source=hack/offline/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ $# -eq 0 ] || die "usage: hack/offline/postgres-image.sh   (prints the image name)"
need_root_and_docker

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here=$root/hack/offline
out=$root/bin/kind
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$out"
postgres_rootfs "$out" "$DEBIAN_MIRROR"
rootfs=$pg_rootfs version=$pg_version
image=evalmeter.local/postgres:15.$pg_minor

stamp=$( (
	echo "$image $version"
	contents "${BASH_SOURCE[0]}" "$here/lib.sh" "$here/files-postgres/entrypoint.sh"
) | sha256sum | cut -d' ' -f1)
if [ "$(cat "$out/postgres-image.stamp" 2>/dev/null)" = "$stamp" ] && docker image inspect "$image" >/dev/null 2>&1; then
	echo "$image"
	exit 0
fi

build() {
	local d=$out/work-postgres bin=/usr/lib/postgresql/15/bin old_id
	mini_rootfs "$d" "$rootfs/etc/ssl/certs/ca-certificates.crt"
	echo 'postgres:x:999:999:PostgreSQL:/var/lib/postgresql:/bin/sh' >>"$d/etc/passwd"
	echo 'postgres:x:999:' >>"$d/etc/group"
	copy_with_libs "$rootfs" "$d" $bin/postgres $bin/initdb $bin/pg_isready $bin/psql \
		/usr/bin/dash /usr/bin/mkdir /usr/bin/chmod /usr/bin/rm /usr/bin/sed
	# modules initdb and evalmeter's schema load (plpgsql, snowball dictionaries), not
	# the LLVM JIT (100 MB of libLLVM)
	local so
	for so in "$rootfs"/usr/lib/postgresql/15/lib/*.so; do
		[[ ${so##*/} == llvmjit* ]] || copy_with_libs "$rootfs" "$d" "/usr/lib/postgresql/15/lib/${so##*/}"
	done
	(cd "$rootfs" && cp -a --parents ./usr/share/postgresql/15 ./usr/share/zoneinfo "$d/")
	ln -s usr/bin "$d/bin"
	ln -s dash "$d/usr/bin/sh"
	mkdir -p "$d/var/lib/postgresql/data" "$d/var/run/postgresql"
	chown -R 999:999 "$d/var/lib/postgresql" "$d/var/run/postgresql"
	chmod 2777 "$d/var/run/postgresql"
	install -m 0755 "$here/files-postgres/entrypoint.sh" "$d/usr/local/bin/docker-entrypoint.sh"

	old_id=$(image_id "$image")
	tar -C "$d" --numeric-owner -c . | docker import \
		--change 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' \
		--change "ENV PATH=/usr/local/bin:$bin:/usr/bin:/bin PGDATA=/var/lib/postgresql/data LANG=C" \
		--change 'USER 999:999' \
		--change 'EXPOSE 5432' \
		- "$image" >/dev/null
	drop_old_image "$old_id" "$image"
	rm -rf "$d"
}
step "building $image" build
echo "$stamp" >"$out/postgres-image.stamp"
echo "$image"
