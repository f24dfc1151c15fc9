#!/usr/bin/env bash
# make image: build evalmeter's container image without pulling anything, for
# machines with no image registry. The result matches the Dockerfile's:
#
#   /evalmeter                          CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=..."
#   /etc/passwd, /etc/group             root, nobody, nonroot (65532)
#   /etc/ssl/certs/ca-certificates.crt  the host's CA bundle
#   /tmp (1777), /home/nonroot (65532)
#   USER 65532:65532, WORKDIR /, ENTRYPOINT ["/evalmeter"]
#
# The root filesystem is made in a temporary folder and imported with
# `docker import`: no base image, no registry.
#
# Environment: IMAGE (default evalmeter:dev), GO (default go), DOCKER_HOST.
# When no engine answers (DOCKER_HOST, or Docker's default socket), the
# project's own engine is started with hack/offline/docker.sh start (root). The image name is the only line on
# stdout.
set -euo pipefail
cd "$(dirname "$0")/../.."

readonly image=${IMAGE:-evalmeter:dev}
readonly go=${GO:-go}

# shellcheck source=hack/lib.sh
. hack/lib.sh

answers() { timeout 10 docker info >/dev/null 2>&1; }

t0=$SECONDS
if ! answers; then
	log "DOCKER_HOST ${DOCKER_HOST:-(unset)} does not answer: starting the project's engine (hack/offline/docker.sh start)"
	line=$(hack/offline/docker.sh start) || die "could not start a Docker engine"
	export "${line?}"
	answers || die "the engine at $DOCKER_HOST does not answer"
fi
log "engine: ${DOCKER_HOST:-the default}"

ca=/etc/ssl/certs/ca-certificates.crt
[ -r "$ca" ] || die "$ca is missing: install Debian's ca-certificates (apt-get install ca-certificates)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/evalmeter-image.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
rootfs=$tmp/rootfs
mkdir -p "$rootfs"/{etc/ssl/certs,tmp,home/nonroot}

t1=$SECONDS
CGO_ENABLED=0 GOOS=linux "$go" build -trimpath -ldflags "-s -w $(version_ldflags "$go")" -o "$rootfs/evalmeter" ./cmd/evalmeter
log "built the static binary in $((SECONDS - t1))s"

# The users and groups of distroless's static-debian12 image.
cat >"$rootfs/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOF
cat >"$rootfs/etc/group" <<'EOF'
root:x:0:
nobody:x:65534:
nonroot:x:65532:
EOF
cp -L "$ca" "$rootfs/etc/ssl/certs/ca-certificates.crt"
chmod 0755 "$rootfs" "$rootfs/etc" "$rootfs/etc/ssl" "$rootfs/etc/ssl/certs" "$rootfs/home"
chmod 0644 "$rootfs/etc/passwd" "$rootfs/etc/group" "$rootfs/etc/ssl/certs/ca-certificates.crt"
chmod 0755 "$rootfs/evalmeter"
chmod 1777 "$rootfs/tmp"
chmod 0700 "$rootfs/home/nonroot"

# Everything belongs to root but nonroot's home.
owner=(--numeric-owner --owner=0 --group=0)
tar -C "$rootfs" -c "${owner[@]}" --exclude=./home/nonroot . >"$tmp/rootfs.tar"
tar -C "$rootfs" -r "${owner[@]}" -f "$tmp/rootfs.tar" --owner=65532 --group=65532 --no-recursion ./home/nonroot

old=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
t1=$SECONDS
docker import \
	--change 'USER 65532:65532' \
	--change 'WORKDIR /' \
	--change 'ENTRYPOINT ["/evalmeter"]' \
	--message "evalmeter $(git rev-parse --short HEAD 2>/dev/null || echo unknown) (hack/offline/image.sh)" \
	- "$image" <"$tmp/rootfs.tar" >/dev/null
id=$(docker image inspect --format '{{.Id}}' "$image")
log "imported in $((SECONDS - t1))s"
# The image this replaces, when nothing uses it any more.
if [ -n "$old" ] && [ "$old" != "$id" ]; then
	docker rmi "$old" >/dev/null 2>&1 || true
fi

size=$(docker image inspect --format '{{.Size}}' "$image")
log "$image ($id, $((size / 1000000)) MB) in $((SECONDS - t0))s"
echo "$image"
