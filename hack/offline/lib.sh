# shellcheck shell=bash
# Functions shared by the scripts that build images with no registry
# (build-node-image.sh, postgres-image.sh, ...), beside ../lib.sh's (log, die, step),
# which it sources. Source it; it sets nothing else.

# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

# need_root_and_docker: the scripts that debootstrap and chroot run as root, on
# DOCKER_HOST or else hack/offline/docker.sh's engine (exported for their docker calls).
need_root_and_docker() {
	[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot)"
	export DOCKER_HOST=${DOCKER_HOST:-unix:///run/evalmeter-docker/docker.sock}
	docker version >/dev/null 2>&1 || die "no Docker engine at $DOCKER_HOST (hack/offline/docker.sh start)"
}

# debootstrap_once DIR PACKAGES MIRROR [SUITE]: a minbase Debian SUITE (default bookworm)
# root filesystem in DIR with the comma-separated PACKAGES, made unless DIR was made with
# the same suite and list. The stamp of a bookworm one is the list alone, as it was before
# SUITE, so that the root filesystems cached in bin/ stay valid.
debootstrap_once() {
	local dir=$1 packages=$2 mirror=$3 suite=${4:-bookworm} stamp=$2
	[ "$suite" = bookworm ] || stamp="$suite:$packages"
	[ -d "$dir" ] && [ "$(cat "$dir.packages" 2>/dev/null)" = "$stamp" ] && return 0
	if ! command -v debootstrap >/dev/null; then
		# the package lists may be missing or stale on a fresh machine
		apt-get -o DPkg::Lock::Timeout=300 install -y debootstrap >&2 ||
			{ apt-get update >&2 && apt-get -o DPkg::Lock::Timeout=300 install -y debootstrap >&2; } ||
			die "debootstrap is missing and apt-get could not install it"
	fi
	rm -rf "$dir" "$dir.tmp"
	debootstrap --variant=minbase --include="$packages" "$suite" "$dir.tmp" "$mirror" >&2
	chroot "$dir.tmp" apt-get clean
	mv "$dir.tmp" "$dir"
	echo "$stamp" >"$dir.packages"
}

# postgres_rootfs OUT MIRROR: Debian bookworm's postgresql-15 in the root filesystem
# OUT/rootfs-postgres (debootstrap_once), which postgres-image.sh and cnpg-postgres-image.sh
# share, holding OUT/.lock-postgres (fd 9) for as long as the caller runs. Sets
# pg_rootfs, pg_version (Debian's package version) and pg_minor (15.N's N).
postgres_rootfs() {
	exec 9>"$1/.lock-postgres"
	flock 9
	pg_rootfs=$1/rootfs-postgres
	step "debootstrap bookworm with postgresql-15 into $pg_rootfs" \
		debootstrap_once "$pg_rootfs" postgresql-15,ca-certificates "$2"
	pg_version=$(chroot "$pg_rootfs" dpkg-query -W -f '${Version}' postgresql-15)
	[[ $pg_version =~ ^15\.([0-9]+) ]] || die "postgresql-15 version $pg_version is not 15.N"
	pg_minor=${BASH_REMATCH[1]}
}

# mini_rootfs DIR CA_BUNDLE: the files every small image gets: distroless's users,
# /tmp, the CA bundle, nsswitch.conf.
mini_rootfs() {
	local d=$1
	rm -rf "$d"
	mkdir -p "$d"/{etc/ssl/certs,tmp,usr/local/bin,var/run,root}
	chmod 1777 "$d/tmp"
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$d/etc/passwd"
	printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$d/etc/group"
	echo 'hosts: files dns' >"$d/etc/nsswitch.conf"
	cp "$2" "$d/etc/ssl/certs/ca-certificates.crt"
}

# copy_with_libs ROOTFS DIR FILE...: copies FILEs (paths in ROOTFS) and the shared
# libraries they need into DIR.
copy_with_libs() {
	local src=$1 dst=$2 f lib
	shift 2
	for f in "$@"; do
		(cd "$src" && cp -a --parents ".$f" "$dst/")
		for lib in $(chroot "$src" ldd "$f" 2>/dev/null | awk '/=> \// { print $3 } /^\t\// { print $1 }'); do
			(cd "$src" && cp -L --parents ".$lib" "$dst/")
		done
	done
}

# contents FILE...: the SHA-256 of each FILE's contents, a line each, without its path: a
# cache stamp made of them stays valid when the checkout moves (another worktree).
contents() {
	local f
	for f; do sha256sum <"$f"; done
}

# image_id REF: the ID of the image REF names, if any.
image_id() { docker image inspect -f '{{.Id}}' "$1" 2>/dev/null || true; }

# drop_old_image OLD_ID REF: removes the image REF named before it was rebuilt (kept if a
# container, e.g. a kind node, still uses it).
drop_old_image() {
	[ -n "$1" ] && [ "$1" != "$(image_id "$2")" ] || return 0
	docker rmi "$1" >/dev/null 2>&1 || log "kept the previous $2 ($1): in use"
}

# go_build_tool MOD_DIR PACKAGE OUT: a static linux/amd64 build of PACKAGE, at the version
# MOD_DIR/go.mod pins (its tool), into OUT (written whole or not at all).
go_build_tool() {
	mkdir -p "$(dirname "$3")"
	(cd "$1" && env GOWORK=off GOFLAGS='-mod=readonly -buildvcs=false' CGO_ENABLED=0 GOOS=linux GOARCH=amd64 \
		"${GO:-go}" build -trimpath -ldflags "-s -w" -o "$3.tmp" "$2")
	mv -f "$3.tmp" "$3"
}

# import_rootfs DIR IMAGE CHANGE...: DIR's files as the image IMAGE (docker import, with a
# --change for each CHANGE, e.g. 'USER 65532:65532'); the image it replaces is removed.
import_rootfs() {
	local dir=$1 image=$2 old_id c
	local -a changes=()
	shift 2
	for c; do changes+=(--change "$c"); done
	old_id=$(image_id "$image")
	tar -C "$dir" --numeric-owner -c . | docker import "${changes[@]}" - "$image" >/dev/null
	drop_old_image "$old_id" "$image"
}
