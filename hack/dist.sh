#!/usr/bin/env bash
# Builds static evalmeter binaries for customers (linux, darwin and windows on amd64
# and arm64) into dist/, with the CI script (ci/evalmeter-ci.sh) and SHA256SUMS.
# Plain go build: no cgo, no toolchain beyond Go's own cross-compiler. The build
# tag customer leaves out the server's roles and the operator's commands: the
# customer's binary carries no server, ledger or Kubernetes code. The image
# (Dockerfile, hack/offline/image.sh) holds the full binary.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
# shellcheck source=hack/lib.sh
. hack/lib.sh
VERSION=${VERSION:-$("$GO" run ./hack/release version 2>/dev/null || echo dev)}
ldflags=$(VERSION=$VERSION version_ldflags "$GO")
PLATFORMS=${PLATFORMS:-"linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64"}
DIST_DIR=${DIST_DIR:-dist}

mkdir -p "$DIST_DIR"
rm -f "$DIST_DIR"/evalmeter-* "$DIST_DIR/SHA256SUMS"
for platform in $PLATFORMS; do
  os=${platform%/*} arch=${platform#*/}
  out="$DIST_DIR/evalmeter-$VERSION-$os-$arch"
  [ "$os" = windows ] && out="$out.exe"
  echo "building $out" >&2
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$GO" build -trimpath -tags customer \
    -ldflags "-s -w $ldflags" -o "$out" ./cmd/evalmeter
done
# The CI script beside the binaries: the GitLab template downloads it and checks it
# against SHA256SUMS, as the script checks the binary.
cp ci/evalmeter-ci.sh "$DIST_DIR/evalmeter-ci.sh"
(cd "$DIST_DIR" && sha256sum evalmeter-* > SHA256SUMS)
cat "$DIST_DIR/SHA256SUMS"
