#!/usr/bin/env bash
# Builds static evalmeter binaries for customers (linux, darwin and windows on amd64
# and arm64) into dist/, with SHA256SUMS. Plain go build: no cgo, no toolchain
# beyond Go's own cross-compiler.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
PLATFORMS=${PLATFORMS:-"linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64"}

rm -rf dist
mkdir -p dist
for platform in $PLATFORMS; do
  os=${platform%/*} arch=${platform#*/}
  out="dist/evalmeter-$VERSION-$os-$arch"
  [ "$os" = windows ] && out="$out.exe"
  echo "building $out" >&2
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$GO" build -trimpath \
    -ldflags "-s -w -X main.version=$VERSION" -o "$out" ./cmd/evalmeter
done
(cd dist && sha256sum evalmeter-* > SHA256SUMS)
cat dist/SHA256SUMS
