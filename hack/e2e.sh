#!/usr/bin/env bash
# make test-e2e: evalmeter installed with Helm on a kind cluster and used as a client
# would, through the cluster network (test/e2e/kind_test.go).
# make test-e2e-ha (E2E_SUITE=ha): the same with a CloudNativePG ledger, failed over
# under load (test/e2e/ha_test.go).
# make test-e2e-upgrade (E2E_SUITE=upgrade): the previous release installed, then
# upgraded to this tree and its image downgraded again, under load
# (test/e2e/upgrade_test.go).
# make test-e2e-dr (E2E_SUITE=dr): a CloudNativePG ledger backed up with the Barman Cloud
# plugin to an S3-compatible store in the cluster (versitygw), then restored under load
# to a point in time after a destructive DELETE (test/e2e/dr_test.go).
#
#   1. A Docker engine: DOCKER_HOST when it answers, else hack/offline/docker.sh's (root).
#   2. Online or offline: online when Docker Hub answers (E2E_OFFLINE=1 or 0 decides).
#      - online:  kind's published node image; the node pulls the chart's PostgreSQL
#                 image, Traefik's (test/e2e/testdata/traefik.yaml) and, for ha,
#                 CloudNativePG's: none of these is built here.
#      - offline: hack/offline/ builds them all here (root, Debian mirror, Go module
#                 proxy; see hack/offline/README.md), loaded with kind load:
#                 build-node-image.sh, postgres-image.sh, traefik-image.sh (run by a copy
#                 of traefik.yaml), ha and dr: cnpg-operator-image.sh, cnpg-postgres-image.sh.
#      dr, online or offline: barman-cloud-image.sh (the plugin and its sidecar) and
#      versitygw-image.sh are built here (root: debootstrap), as no registry publishes
#      the images this pinned plugin version's manifest names.
#      E2E_NODE_IMAGE overrides the node image in either mode: the node image factory
#      does not run.
#   3. evalmeter's image (hack/offline/image.sh: a go build, docker import, nothing
#      pulled), kind and helm (Go module proxy), kubectl (KUBECTL, else
#      hack/offline/envtest.sh's, which make test builds too).
#      upgrade: also the previous release's (go run ./hack/release previous): its
#      commit checked out with git worktree in bin/kind/release-vX.Y.Z, its image
#      built by its own hack/offline/image.sh as evalmeter:X.Y.Z.
#   4. Traefik, the ingress controller the test deploys: test/e2e/testdata/traefik.yaml,
#      offline a copy of it in bin/kind/ that runs the image built here
#      (E2E_TRAEFIK_MANIFEST).
#   5. A new kind cluster $KIND_CLUSTER (default evalmeter-e2e) with one node whose node
#      ports are published on the host: 30080 (the API's Service) on 127.0.0.1:$E2E_PORT
#      (default 38443) and 30443 (Traefik's HTTPS) on 127.0.0.1:$E2E_INGRESS_PORT (38444).
#   6. go test -tags e2e -run '^TestKind' ./test/e2e: helm install, the client flow
#      through the Service, helm upgrade to TLS at the Ingress, the rest through it.
#      ha: CloudNativePG's operator installed from its release manifest
#      (hack/cnpg-manifest.sh), then go test -run '^TestHA' ./test/e2e.
#      dr: the same operator, and the Barman Cloud plugin from its release manifest
#      (hack/barman-cloud-manifest.sh) with the images built here and, instead of its
#      cert-manager Certificates, the TLS Secrets they would make (openssl); then
#      go test -run '^TestDR$' ./test/e2e (E2E_DR_TARGET=after-delete: the mutation check).
#   7. The cluster is deleted, unless E2E_KEEP=1 (then: KUBECONFIG=bin/kind/<name>.kubeconfig).
#
# Caches: bin/ (kind, helm, kubectl, node image inputs) and the Docker engine's store; a
# second run skips every build.
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

go=${GO:-go}
suite=${E2E_SUITE:-kind}
case $suite in
kind)
	cluster=${KIND_CLUSTER:-evalmeter-e2e}
	port=${E2E_PORT:-38443}
	ingress_port=${E2E_INGRESS_PORT:-38444}
	;;
ha)
	cluster=${KIND_CLUSTER:-evalmeter-e2e-ha}
	port=${E2E_PORT:-38453}
	ingress_port=${E2E_INGRESS_PORT:-38454}
	;;
upgrade)
	cluster=${KIND_CLUSTER:-evalmeter-e2e-upgrade}
	port=${E2E_PORT:-38473}
	ingress_port=${E2E_INGRESS_PORT:-38474}
	;;
dr)
	cluster=${KIND_CLUSTER:-evalmeter-e2e-dr}
	port=${E2E_PORT:-38463}
	ingress_port=${E2E_INGRESS_PORT:-38464}
	;;
*) die "E2E_SUITE=$suite: kind, ha, upgrade or dr" ;;
esac
node_port=30080
ingress_node_port=30443
image=${IMAGE:-evalmeter:dev}
KIND_VERSION=${KIND_VERSION:-v0.33.0}
out=$root/bin/kind
kind=$out/kind
kubeconfig=$out/$cluster.kubeconfig
mkdir -p "$out"
t0=$SECONDS

# barman_install OPERATOR_IMAGE SIDECAR_IMAGE: the Barman Cloud plugin's release manifest
# (stdin) as make test-e2e-dr installs it (stdout): the Deployment runs OPERATOR_IMAGE, the
# Secret it reads SIDECAR_IMAGE from names SIDECAR_IMAGE, and the cert-manager Certificates
# and Issuer are left out (no cert-manager here: barman_tls_secrets makes their Secrets).
barman_install() {
	awk -v operator="$1" -v sidecar="$2" '
		function flush() {
			if (doc != "" && doc !~ /(^|\n)kind: (Certificate|Issuer)\n/) printf "%s", doc
			doc = ""
		}
		/^---$/ { flush(); doc = "---\n"; skip = 0; next }
		# The Secret: its base64 data becomes stringData with the sidecar image.
		/^data:$/ { getline line; if (line ~ /^  SIDECAR_IMAGE: /) { doc = doc "stringData:\n  SIDECAR_IMAGE: " sidecar "\n"; skip = 1; next } doc = doc $0 "\n"; $0 = line }
		skip && /^    / { next }
		{ skip = 0 }
		/^        image: / { sub(/image: .*/, "image: " operator) }
		{ doc = doc $0 "\n" }
		END { flush() }'
}

# barman_tls_secrets KUBECTL DIR: the two Secrets the plugin's manifest has cert-manager
# make, as its self-signed Issuer would: barman-cloud-server-tls (CN and DNS name
# barman-cloud, its Service's name, which CloudNativePG's operator verifies against this very
# certificate) and barman-cloud-client-tls (the certificate CloudNativePG presents, which the
# plugin trusts as it is: its --client-cert). Keys and certificates are kept in DIR.
barman_tls_secrets() {
	local kubectl=$1 dir=$2 name cn usage
	mkdir -p "$dir"
	for name in server client; do
		cn=barman-cloud usage=serverAuth
		[ "$name" = server ] || cn=barman-cloud-client usage=clientAuth
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
			-subj "/CN=$cn" -addext "subjectAltName=DNS:$cn" -addext "extendedKeyUsage=$usage" \
			-keyout "$dir/$name.key" -out "$dir/$name.crt" 2>/dev/null
		$kubectl -n cnpg-system create secret tls "barman-cloud-$name-tls" \
			--cert "$dir/$name.crt" --key "$dir/$name.key" >/dev/null
	done
}

# ---- 1. Docker ----
if ! timeout 10 docker info >/dev/null 2>&1; then
	line=$(hack/offline/docker.sh start) || die "no Docker engine: DOCKER_HOST does not answer and hack/offline/docker.sh start failed"
	export "${line?}"
fi
log "Docker engine: ${DOCKER_HOST:-default}"

# ---- 2. online or offline ----
offline=${E2E_OFFLINE:-}
if [ -z "$offline" ]; then
	offline=1
	# Any HTTP answer (401 here) means the registry is reachable.
	if curl -s -o /dev/null --max-time 10 https://registry-1.docker.io/v2/ 2>/dev/null; then
		offline=0
	fi
fi
node_image=${E2E_NODE_IMAGE:-}
traefik_image=
postgres_image=
cnpg_manifest=
cnpg_operator_image=
cnpg_postgres_image=
barman_manifest=
barman_images=()
versitygw_image=
cnpg=false
case $suite in ha | dr) cnpg=true ;; esac
if $cnpg; then
	cnpg_manifest=$(hack/cnpg-manifest.sh)
	# online: the manifest's own operator image, the chart's default operand image
	cnpg_operator_image=$(grep -om1 'ghcr.io/cloudnative-pg/cloudnative-pg:[^[:space:]]*' "$cnpg_manifest") ||
		die "$cnpg_manifest names no ghcr.io/cloudnative-pg/cloudnative-pg image"
fi
if [ "$offline" = 1 ]; then
	log "offline: building the images here (hack/offline, cached)"
	[ -n "$node_image" ] || node_image=$(step "node image" hack/offline/build-node-image.sh)
	if $cnpg; then
		cnpg_operator_image=$(step "CloudNativePG operator image" env GO="$go" hack/offline/cnpg-operator-image.sh)
		cnpg_postgres_image=$(step "CloudNativePG PostgreSQL image" hack/offline/cnpg-postgres-image.sh)
	else
		postgres_image=$(step "PostgreSQL image" hack/offline/postgres-image.sh)
	fi
	if [ "$suite" = kind ]; then
		traefik_image=$(step "Traefik image" env GO="$go" hack/offline/traefik-image.sh)
	fi
else
	log "online: node image ${node_image:-(kind default)}; the node pulls the PostgreSQL, Traefik and CloudNativePG images"
fi
if [ "$suite" = dr ]; then
	barman_manifest=$(hack/barman-cloud-manifest.sh)
	barman_images=(
		"$(step "Barman Cloud plugin image" env GO="$go" hack/offline/barman-cloud-image.sh operator)"
		"$(step "Barman Cloud plugin sidecar image" env GO="$go" hack/offline/barman-cloud-image.sh sidecar)"
	)
	versitygw_image=$(step "versitygw image" env GO="$go" hack/offline/versitygw-image.sh)
fi

# ---- 3. tools and evalmeter's image ----
if ! { [ -x "$kind" ] && "$kind" version 2>/dev/null | grep -q "^kind $KIND_VERSION "; }; then
	step "building kind $KIND_VERSION" kind_install "$go" "$KIND_VERSION" "$out"
fi
step "helm" make --no-print-directory helm >&2
helm=$root/bin/helm
kubectl=${KUBECTL:-}
[ -n "$kubectl" ] || kubectl=$(hack/offline/envtest.sh)/kubectl
step "evalmeter image" env IMAGE="$image" GO="$go" hack/offline/image.sh >/dev/null
previous_version= previous_image= previous_chart=
if [ "$suite" = upgrade ]; then
	previous=$("$go" run ./hack/release previous) || die "no release to upgrade from (hack/releases)"
	read -r previous_version previous_commit <<<"$previous"
	worktree=$out/release-$previous_version
	if [ "$(git -C "$worktree" rev-parse HEAD 2>/dev/null)" != "$previous_commit" ]; then
		rm -rf "$worktree"
		git worktree prune
		step "checking out $previous_version ($previous_commit)" git worktree add --detach "$worktree" "$previous_commit" >&2
	fi
	previous_image=evalmeter:${previous_version#v}
	previous_chart=$worktree/charts/evalmeter
	# The release's own script, as the release built it.
	step "evalmeter $previous_version image" env -C "$worktree" IMAGE="$previous_image" GO="$go" \
		VERSION="$previous_version" COMMIT="$previous_commit" hack/offline/image.sh >/dev/null
fi

# ---- 4. Traefik's manifest: offline, a copy that runs the image built here ----
traefik_manifest=
if [ "$suite" = kind ]; then
	traefik_manifest=$out/$cluster-traefik.yaml
	published=$(sed -n 's|^ *image: *\(docker\.io/library/traefik:.*\)$|\1|p' test/e2e/testdata/traefik.yaml)
	[ -n "$published" ] || die "test/e2e/testdata/traefik.yaml runs no docker.io/library/traefik image"
	if [ -n "$traefik_image" ]; then
		[ "${traefik_image##*:}" = "${published##*:}" ] ||
			die "hack/offline/traefik-image.sh built $traefik_image, test/e2e/testdata/traefik.yaml runs $published"
		sed "s|image: $published\$|image: $traefik_image|" test/e2e/testdata/traefik.yaml >"$traefik_manifest"
	else
		cp test/e2e/testdata/traefik.yaml "$traefik_manifest"
	fi
fi

# ---- 5. cluster ----
cleanup() {
	if [ "${E2E_KEEP:-}" = 1 ]; then
		log "kept cluster $cluster: export KUBECONFIG=$kubeconfig; delete with: $kind delete cluster --name $cluster"
	else
		"$kind" delete cluster --name "$cluster" --kubeconfig "$kubeconfig" >&2 || true
		rm -f "$kubeconfig"
	fi
}
if "$kind" get clusters 2>/dev/null | grep -qx "$cluster"; then
	log "deleting the previous cluster $cluster"
	"$kind" delete cluster --name "$cluster" --kubeconfig "$kubeconfig" >&2
fi
config=$out/$cluster.yaml
{
	echo 'kind: Cluster'
	echo 'apiVersion: kind.x-k8s.io/v1alpha4'
	if [ "$offline" = 1 ]; then
		# the offline node image's CNI is a one-node bridge (hack/offline/cluster.yaml)
		printf 'networking:\n  disableDefaultCNI: true\n  podSubnet: 10.244.0.0/16\n'
	fi
	echo 'nodes:'
	echo '  - role: control-plane'
	echo '    extraPortMappings:'
	echo "      - {containerPort: $node_port, hostPort: $port, listenAddress: 127.0.0.1, protocol: TCP}"
	echo "      - {containerPort: $ingress_node_port, hostPort: $ingress_port, listenAddress: 127.0.0.1, protocol: TCP}"
	# cgroup v1 hosts (like CI's); harmless on cgroup v2
	printf 'kubeadmConfigPatches:\n  - |\n    kind: KubeletConfiguration\n    failCgroupV1: false\n'
} >"$config"
trap cleanup EXIT
step "creating cluster $cluster" "$kind" create cluster --name "$cluster" --config "$config" \
	--kubeconfig "$kubeconfig" --wait 3m ${node_image:+--image "$node_image"} >&2
for i in "$image" $previous_image $traefik_image $postgres_image $cnpg_postgres_image "${barman_images[@]}" $versitygw_image; do
	step "loading $i" "$kind" load docker-image "$i" --name "$cluster" >&2
done
if $cnpg; then
	cp "$cnpg_manifest" "$out/$cluster-cnpg.yaml"
	if [ "$offline" = 1 ]; then
		step "loading $cnpg_operator_image" "$kind" load docker-image "$cnpg_operator_image" --name "$cluster" >&2
		# The manifest's image, pulled Always: the one loaded above instead.
		sed -e "s|ghcr.io/cloudnative-pg/cloudnative-pg:[^[:space:]]*|$cnpg_operator_image|" \
			-e 's|imagePullPolicy: Always|imagePullPolicy: IfNotPresent|' "$cnpg_manifest" >"$out/$cluster-cnpg.yaml"
	fi
	step "installing CloudNativePG's operator" "$kubectl" --kubeconfig "$kubeconfig" apply --server-side \
		-f "$out/$cluster-cnpg.yaml" >/dev/null
	step "waiting for the operator" "$kubectl" --kubeconfig "$kubeconfig" -n cnpg-system rollout status \
		deployment/cnpg-controller-manager --timeout=5m >&2
fi
if [ "$suite" = dr ]; then
	# The plugin's manifest, with the images built here (its Deployment's and, in a Secret,
	# the sidecar's) and without its cert-manager Certificates and Issuer: their Secrets
	# are made below instead.
	barman_install "${barman_images[0]}" "${barman_images[1]}" <"$barman_manifest" >"$out/$cluster-barman-cloud.yaml"
	step "making the plugin's TLS Secrets" barman_tls_secrets "$kubectl --kubeconfig=$kubeconfig" "$out/$cluster-barman-tls"
	step "installing the Barman Cloud plugin" "$kubectl" --kubeconfig "$kubeconfig" apply --server-side \
		-f "$out/$cluster-barman-cloud.yaml" >/dev/null
	step "waiting for the plugin" "$kubectl" --kubeconfig "$kubeconfig" -n cnpg-system rollout status \
		deployment/barman-cloud --timeout=5m >&2
fi

# ---- 6. the test ----
case $suite in
ha) tests='^TestHA' ;;
upgrade) tests='^TestUpgrade' ;;
dr) tests='^TestDR$' ;;
*) tests='^TestKind' ;;
esac
log "ready in $((SECONDS - t0))s; running test/e2e $tests"
KUBECONFIG=$kubeconfig KUBECTL=$kubectl HELM=$helm \
	E2E_API_URL=https://127.0.0.1:$port E2E_NODE_PORT=$node_port E2E_INGRESS_ADDR=127.0.0.1:$ingress_port \
	E2E_IMAGE=$image E2E_POSTGRES_IMAGE=$postgres_image E2E_CNPG_POSTGRES_IMAGE=$cnpg_postgres_image \
	E2E_TRAEFIK_MANIFEST=$traefik_manifest E2E_VERSITYGW_IMAGE=$versitygw_image \
	E2E_PREVIOUS_VERSION=$previous_version E2E_PREVIOUS_IMAGE=$previous_image E2E_PREVIOUS_CHART=$previous_chart \
	"$go" test -tags e2e -count=1 -v -timeout 30m -run "$tests" ./test/e2e
log "passed in $((SECONDS - t0))s"
