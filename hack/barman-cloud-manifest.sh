#!/usr/bin/env bash
# The Barman Cloud plugin's release manifest (the ObjectStore CRD, RBAC, the plugin's
# Service and Deployment, cert-manager Certificates), at the version
# hack/offline/tools/kind/barman-cloud/go.mod pins:
#
#   manifest=$(hack/barman-cloud-manifest.sh)   # .../plugin-barman-cloud@v0.14.0/manifest.yaml
#
# As hack/cnpg-manifest.sh does for CloudNativePG: the module carries its manifest; go mod
# download fetches it through the Go module proxy into the module cache, checked against
# that go.sum. Prints the file's absolute path, the only line on stdout. Once cached, no
# network is used. The chart's tests install its ObjectStore CRD; make test-e2e-dr installs
# the plugin from it (hack/e2e.sh).
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ $# -eq 0 ] || die "usage: hack/barman-cloud-manifest.sh   (prints the path of the Barman Cloud plugin's release manifest)"
mod=$(cd "$(dirname "${BASH_SOURCE[0]}")/offline/tools/kind/barman-cloud" && pwd)
module=github.com/cloudnative-pg/plugin-barman-cloud
version=$(module_version "$mod/go.mod" "$module")
dir=$(module_dir "$mod" "$module" "$version")
manifest=$dir/manifest.yaml
[ -f "$manifest" ] || die "$dir has no ${manifest#"$dir"/}"
printf '%s\n' "$manifest"
