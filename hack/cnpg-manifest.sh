#!/usr/bin/env bash
# CloudNativePG's release manifest (its CRDs, RBAC, webhooks and the operator's
# Deployment), at the version hack/offline/tools/kind/cnpg/go.mod pins:
#
#   manifest=$(hack/cnpg-manifest.sh)    # .../cloudnative-pg@v1.30.0/releases/cnpg-1.30.0.yaml
#
# The module carries every release's manifest; go mod download fetches it through the Go
# module proxy into the module cache, checked against hack/offline/tools/kind/cnpg/go.sum. Prints
# the file's absolute path, the only line on stdout. Once cached, no network is used.
# The chart's tests install its CRDs; make test-e2e-ha installs the operator from it.
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ $# -eq 0 ] || die "usage: hack/cnpg-manifest.sh   (prints the path of CloudNativePG's release manifest)"
mod=$(cd "$(dirname "${BASH_SOURCE[0]}")/offline/tools/kind/cnpg" && pwd)
version=$(cnpg_version "$mod/go.mod")
dir=$(module_dir "$mod" github.com/cloudnative-pg/cloudnative-pg "$version")
manifest=$dir/releases/cnpg-${version#v}.yaml
[ -f "$manifest" ] || die "$dir has no ${manifest#"$dir"/}"
printf '%s\n' "$manifest"
