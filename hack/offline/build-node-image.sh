#!/usr/bin/env bash
# Builds a kind node image with no image registry and no download other than the Go
# module proxy and the Debian mirror:
#
#   export DOCKER_HOST=unix:///run/evalmeter-docker/docker.sock   # hack/offline/docker.sh start
#   image=$(hack/offline/build-node-image.sh)
#   bin/kind/kind create cluster --config hack/offline/cluster.yaml --image "$image"
#
# prints the image name (evalmeter/kind-node:<k8s version>), the only line on stdout;
# the log goes to stderr. Everything is cached under bin/kind/; a second run only
# checks what is there (FORCE=1 rebuilds the images, not the binaries).
#
# What goes in:
#   - kind CLI           sigs.k8s.io/kind@$KIND_VERSION (its base-image files too)
#   - kubelet, kubeadm, kube-{apiserver,controller-manager,scheduler,proxy}, kubectl
#                        k8s.io/kubernetes from hack/offline/tools/kind/k8s/go.mod (a copy of
#                        hack/offline/tools/envtest/kube-apiserver/go.mod with more tools)
#   - etcd               hack/offline/envtest.sh (bin/k8s/...)
#   - coredns            github.com/coredns/coredns@<kubeadm's CoreDNS version>
#   - pause              hack/offline/tools/kind/pause (a stand-in that waits for SIGTERM)
#   - runc-nosysres      hack/offline/tools/runc-nosysres: the node's containerd runs runc through
#                        it, as this host cannot grant CAP_SYS_RESOURCE (privileged pods)
#   - node rootfs        debootstrap bookworm (systemd, containerd, runc, CNI plugins, ...)
#   - storage            github.com/rancher/local-path-provisioner@$LPP_VERSION and a
#                        helper image (Debian's sh, mkdir, rm), in kind's default storage
#                        manifest (hack/offline/files/kind/manifests/default-storage.yaml)
#   - CNI                bridge + host-local (hack/offline/files/etc/cni/net.d), so use
#                        hack/offline/cluster.yaml (disableDefaultCNI: true): ONE node only.
#   - crictl             a stand-in over ctr (hack/offline/files/usr/local/bin/crictl):
#                        sigs.k8s.io/cri-tools is refused by the module proxy
#
# Component images are `docker import`s of small root filesystems tagged as kubeadm
# lists them (kubeadm config images list), saved under bin/kind/images-<version>/ and
# imported into the node's containerd (ctr images import), as kind's own builder does.
# The node's containerd is Debian's 1.6.20 with kind's config.toml, changed so that
# runc runs through runc-nosysres and restrict_oom_score_adj = true: this host cannot
# grant CAP_SYS_RESOURCE, without which neither privileged pods nor a lowered
# oom_score_adj (every pod sandbox asks for -998) can start.
set -euo pipefail
# shellcheck source=hack/offline/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ $# -eq 0 ] || die "usage: hack/offline/build-node-image.sh   (prints the node image name)"
need_root_and_docker

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here=$root/hack/offline
out=$root/bin/kind
go=${GO:-go}
KIND_VERSION=${KIND_VERSION:-v0.33.0}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$out"

exec 9>"$out/.lock"
flock 9

k8s_mod=$root/hack/offline/tools/kind/k8s
k8s_version=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$k8s_mod/go.mod")
[[ $k8s_version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || die "$k8s_mod/go.mod: no k8s.io/kubernetes v1.X.Y"
k8s_minor=${BASH_REMATCH[1]}
image=evalmeter/kind-node:$k8s_version
bins=$out/k8s-$k8s_version
imgdir=$out/images-$k8s_version
build_env=(env GOWORK=off GOFLAGS='-mod=readonly -buildvcs=false' CGO_ENABLED=0 GOOS=linux GOARCH=amd64)

# ---- kind CLI ----
kind=$out/kind
if ! { [ -x "$kind" ] && "$kind" version 2>/dev/null | grep -q "^kind $KIND_VERSION "; }; then
	step "building kind $KIND_VERSION" kind_install "$go" "$KIND_VERSION" "$out"
fi
kind_src=$("$go" env GOMODCACHE)/sigs.k8s.io/kind@$KIND_VERSION
if [ ! -d "$kind_src/images/base/files" ]; then
	(cd "$out" && GOWORK=off GOFLAGS=-mod=mod "$go" mod download "sigs.k8s.io/kind@$KIND_VERSION")
fi
[ -d "$kind_src/images/base/files" ] || die "no $kind_src/images/base/files"

# ---- Kubernetes binaries ----
k8s_cmds=(kubelet kubeadm kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubectl)
build_k8s() {
	local ldflags=(-s -w) pkg pkgs=()
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=(-X "$pkg.gitVersion=$k8s_version" -X "$pkg.gitMajor=1" -X "$pkg.gitMinor=$k8s_minor"
			-X "$pkg.gitCommit=" -X "$pkg.gitTreeState=clean")
	done
	for pkg in "${k8s_cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$pkg"); done
	mkdir -p "$bins.tmp"
	(cd "$k8s_mod" && "${build_env[@]}" "$go" build -trimpath -ldflags "${ldflags[*]}" -o "$bins.tmp/" "${pkgs[@]}")
	mkdir -p "$bins"
	for pkg in "${k8s_cmds[@]}"; do mv -f "$bins.tmp/$pkg" "$bins/$pkg"; done
	rmdir "$bins.tmp"
}
# version_of CMD: the version line CMD reports.
version_of() {
	case ${1##*/} in
	kubectl) "$1" version --client 2>/dev/null | sed -n 1p ;;
	kubeadm) "$1" version -o short 2>/dev/null ;;
	*) "$1" --version 2>/dev/null ;;
	esac
}
k8s_ok=1
for c in "${k8s_cmds[@]}"; do
	[ -x "$bins/$c" ] && [[ "$(version_of "$bins/$c")" == *"$k8s_version" ]] || k8s_ok=0
done
[ "$k8s_ok" = 1 ] || step "building ${k8s_cmds[*]} $k8s_version (minutes the first time)" build_k8s

# ---- etcd (hack/offline/envtest.sh pins and builds it) ----
# Use envtest's etcd when it is there at the pinned version; else run hack/offline/envtest.sh.
# (hack/offline/envtest.sh's kubectl check, `kubectl version --client | grep -q` under pipefail,
# fails now and then when kubectl gets SIGPIPE: so do not call it when not needed.)
etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2; exit }' "$root/hack/offline/tools/envtest/etcd/go.mod")
etcd=$root/bin/k8s/${k8s_version#v}-linux-amd64/etcd
if ! { [ -x "$etcd" ] && grep -qxF "etcd Version: ${etcd_version#v}" <<<"$("$etcd" --version 2>/dev/null)"; }; then
	etcd=$("$root/hack/offline/envtest.sh")/etcd
fi
[ -x "$etcd" ] || die "no $etcd"

# ---- images kubeadm wants ----
mapfile -t kubeadm_images < <("$bins/kubeadm" config images list --kubernetes-version "$k8s_version" 2>/dev/null)
[ "${#kubeadm_images[@]}" -ge 6 ] || die "kubeadm config images list: ${kubeadm_images[*]}"
log "kubeadm wants: ${kubeadm_images[*]}"
want_tag() { printf '%s\n' "${kubeadm_images[@]}" | grep -E "^registry\.k8s\.io/$1:" | head -1; }
coredns_ref=$(want_tag coredns/coredns)
pause_ref=$(want_tag pause)
etcd_ref=$(want_tag etcd)
coredns_version=${coredns_ref##*:}

# ---- CoreDNS ----
coredns=$out/coredns-$coredns_version/coredns
build_coredns() {
	mkdir -p "$(dirname "$coredns")"
	(cd "$out" && env GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0 GOBIN="$(dirname "$coredns")" \
		"$go" install -trimpath -ldflags '-s -w' "github.com/coredns/coredns@$coredns_version")
}
[ -x "$coredns" ] || step "building coredns $coredns_version" build_coredns

# ---- local-path-provisioner (kind's default StorageClass; hack/offline/files/kind/manifests) ----
LPP_VERSION=v0.0.30
lpp=$out/local-path-provisioner-$LPP_VERSION/local-path-provisioner
lpp_ref=evalmeter.local/local-path-provisioner:$LPP_VERSION
helper_ref=evalmeter.local/local-path-helper:bookworm
build_lpp() {
	mkdir -p "$(dirname "$lpp")"
	(cd "$out" && env GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0 GOBIN="$(dirname "$lpp")" \
		"$go" install -trimpath -ldflags '-s -w' "github.com/rancher/local-path-provisioner@$LPP_VERSION")
}
[ -x "$lpp" ] || step "building local-path-provisioner $LPP_VERSION" build_lpp
grep -qF "$lpp_ref" "$here/files/kind/manifests/default-storage.yaml" &&
	grep -qF "$helper_ref" "$here/files/kind/manifests/default-storage.yaml" ||
	die "hack/offline/files/kind/manifests/default-storage.yaml does not use $lpp_ref and $helper_ref"
all_images=("${kubeadm_images[@]}" "$lpp_ref" "$helper_ref")

# ---- pause and runc-nosysres ----
pause=$out/pause
(cd "$root/hack/offline/tools/kind/pause" && "${build_env[@]}" "$go" build -trimpath -ldflags '-s -w' -o "$pause" .)
runc_wrapper=$out/runc-nosysres
(cd "$root/hack/offline/tools/runc-nosysres" && "${build_env[@]}" "$go" build -trimpath -ldflags '-s -w' -o "$runc_wrapper" .)

# ---- node root filesystem (Debian bookworm) ----
packages=systemd,systemd-sysv,dbus,iproute2,iptables,nftables,containerd,runc,containernetworking-plugins
packages+=,conntrack,kmod,util-linux,mount,ca-certificates,ethtool,socat,ebtables,procps,jq,pigz
packages+=,fuse-overlayfs,e2fsprogs,libseccomp2
base_rootfs=$out/rootfs-bookworm
step "debootstrap bookworm into $base_rootfs" debootstrap_once "$base_rootfs" "$packages" "$DEBIAN_MIRROR"

# ---- component images, built from small root filesystems ----
# import_image DIR REF ENTRYPOINT_JSON: docker import DIR as REF and save it to imgdir.
import_image() {
	local dir=$1 ref=$2 entrypoint=$3 name old_id
	name=$(echo "${ref#*/}" | tr '/:' '__')
	old_id=$(image_id "$ref")
	tar -C "$dir" --owner=0 --group=0 -c . | docker import \
		--change "ENTRYPOINT $entrypoint" \
		--change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin' \
		- "$ref" >/dev/null
	docker save -o "$imgdir/$name.tar.tmp" "$ref"
	mv -f "$imgdir/$name.tar.tmp" "$imgdir/$name.tar"
	drop_old_image "$old_id" "$ref"
	log "image $ref -> $imgdir/$name.tar"
}
build_images() {
	local work=$out/work ref bin d
	rm -rf "$imgdir"
	mkdir -p "$imgdir"
	for ref in "${all_images[@]}"; do
		d=$work/$(echo "$ref" | tr '/:' '__')
		mini_rootfs "$d" "$base_rootfs/etc/ssl/certs/ca-certificates.crt"
		case $ref in
		*/kube-apiserver:* | */kube-controller-manager:* | */kube-scheduler:*)
			bin=${ref##*/}
			bin=${bin%%:*}
			cp "$bins/$bin" "$d/usr/local/bin/"
			import_image "$d" "$ref" "[\"/usr/local/bin/$bin\"]"
			;;
		*/kube-proxy:*)
			cp "$bins/kube-proxy" "$d/usr/local/bin/"
			# kube-proxy runs iptables, ip6tables, iptables-save/-restore and conntrack:
			# Debian's iptables (nf_tables backend, as on this host) with its libraries and
			# extensions.
			copy_with_libs "$base_rootfs" "$d" /usr/sbin/xtables-nft-multi /usr/sbin/xtables-legacy-multi /usr/sbin/conntrack
			for lib in "$base_rootfs"/usr/lib/x86_64-linux-gnu/xtables/*.so; do
				copy_with_libs "$base_rootfs" "$d" "/usr/lib/x86_64-linux-gnu/xtables/${lib##*/}"
			done
			for t in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
				ln -sf xtables-nft-multi "$d/usr/sbin/$t"
				ln -sf xtables-nft-multi "$d/usr/sbin/${t/tables/tables-nft}"
				ln -sf xtables-legacy-multi "$d/usr/sbin/${t/tables/tables-legacy}"
			done
			cp -a "$base_rootfs/etc/ethertypes" "$base_rootfs/etc/protocols" "$d/etc/" 2>/dev/null || true
			import_image "$d" "$ref" '["/usr/local/bin/kube-proxy"]'
			;;
		*/etcd:*)
			cp "$etcd" "$d/usr/local/bin/etcd"
			import_image "$d" "$ref" '["/usr/local/bin/etcd"]'
			;;
		*/coredns:*)
			cp "$coredns" "$d/coredns"
			import_image "$d" "$ref" '["/coredns"]'
			;;
		*/pause:*)
			cp "$pause" "$d/pause"
			import_image "$d" "$ref" '["/pause"]'
			;;
		"$lpp_ref")
			cp "$lpp" "$d/usr/local/bin/local-path-provisioner"
			import_image "$d" "$ref" '["/usr/local/bin/local-path-provisioner"]'
			;;
		"$helper_ref")
			# the provisioner's helper pods run sh scripts with mkdir and rm
			copy_with_libs "$base_rootfs" "$d" /usr/bin/dash /usr/bin/mkdir /usr/bin/rm
			ln -s usr/bin "$d/bin"
			ln -s dash "$d/usr/bin/sh"
			import_image "$d" "$ref" '["/bin/sh"]'
			;;
		*) die "no recipe for image $ref" ;;
		esac
	done
	rm -rf "$work"
	printf '%s\n' "${all_images[@]}" >"$imgdir/.images"
}
if [ "${FORCE:-}" = 1 ] || [ "$(cat "$imgdir/.images" 2>/dev/null)" != "$(printf '%s\n' "${all_images[@]}")" ]; then
	step "building component images" build_images
fi

# ---- node image ----
node_rootfs=$out/node-rootfs
make_node_rootfs() {
	local f files=$kind_src/images/base/files
	rm -rf "$node_rootfs"
	cp -a "$base_rootfs" "$node_rootfs"
	local r=$node_rootfs
	# kind's base image files (module cache files are read-only, no x bits)
	mkdir -p "$r/kind/bin" "$r/etc/containerd" "$r/etc/systemd/system/kubelet.service.d" "$r/etc/kubernetes/manifests"
	install -m 0755 "$files"/usr/local/bin/* "$r/usr/local/bin/"
	install -m 0644 "$files"/kind/README.txt "$r/kind/"
	install -m 0755 "$files"/kind/bin/* "$r/kind/bin/"
	install -m 0644 "$files"/etc/crictl.yaml "$r/etc/"
	install -m 0644 "$files"/etc/containerd/* "$r/etc/containerd/"
	install -m 0644 "$files"/etc/default/* "$r/etc/default/"
	install -m 0644 "$files"/etc/sysctl.d/* "$r/etc/sysctl.d/"
	for f in "$files"/etc/systemd/system/*; do
		[ -f "$f" ] && install -m 0644 "$f" "$r/etc/systemd/system/"
	done
	install -m 0644 "$files"/etc/systemd/system/kubelet.service.d/* "$r/etc/systemd/system/kubelet.service.d/"
	# as kind's base Dockerfile does
	find "$r/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
	rm -f "$r"/lib/systemd/system/multi-user.target.wants/* "$r"/etc/systemd/system/*.wants/* \
		"$r"/lib/systemd/system/local-fs.target.wants/* "$r"/lib/systemd/system/sockets.target.wants/*udev* \
		"$r"/lib/systemd/system/sockets.target.wants/*initctl* "$r"/lib/systemd/system/basic.target.wants/*
	echo "ReadKMsg=no" >>"$r/etc/systemd/journald.conf"
	ln -sf /usr/lib/systemd/systemd "$r/sbin/init"
	chroot "$r" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >&2
	chroot "$r" systemctl mask systemd-binfmt.service >&2
	# kind's units run /usr/local/bin/containerd; Debian installs /usr/bin/containerd.
	for f in containerd containerd-shim-runc-v2 ctr; do
		[ -e "$r/usr/local/bin/$f" ] || ln -s "/usr/bin/$f" "$r/usr/local/bin/$f"
	done
	# CNI plugins: Debian puts them in /usr/lib/cni; containerd looks in /opt/cni/bin.
	mkdir -p "$r/opt/cni"
	ln -sfn /usr/lib/cni "$r/opt/cni/bin"
	# containerd: runc through the CAP_SYS_RESOURCE wrapper; kubeadm's pause image;
	# restrict_oom_score_adj, as without CAP_SYS_RESOURCE no one can lower an
	# oom_score_adj (pod sandboxes ask for -998; runc init then dies with "can't get
	# final child's PID from pipe: EOF").
	install -m 0755 "$runc_wrapper" "$r/usr/local/bin/runc-nosysres"
	sed -i \
		-e '/^ *\[plugins\."io\.containerd\.grpc\.v1\.cri"\.containerd\.runtimes\.[a-z-]*\.options\]$/a\    BinaryName = "/usr/local/bin/runc-nosysres"' \
		-e "s#^\(\s*sandbox_image = \).*#\1\"$pause_ref\"#" \
		-e 's#^\(\s*restrict_oom_score_adj = \).*#\1true#' \
		"$r/etc/containerd/config.toml"
	grep -q 'BinaryName = "/usr/local/bin/runc-nosysres"' "$r/etc/containerd/config.toml" || die "could not set BinaryName"
	grep -q 'restrict_oom_score_adj = true' "$r/etc/containerd/config.toml" || die "could not set restrict_oom_score_adj"
	# cri-base.json: "ctr oci spec" + kind's createContainer hook, without rlimits
	chroot "$r" ctr oci spec | chroot "$r" jq \
		'.hooks.createContainer[.hooks.createContainer| length] |= . + {"path": "/kind/bin/mount-product-files.sh"} | del(.process.rlimits)' \
		>"$r/etc/containerd/cri-base.json"
	# the project's files: CNI config, storage manifest, crictl stand-in
	cp -a "$here/files/." "$r/"
	# Kubernetes binaries, as kind's node image builder places them
	for f in "${k8s_cmds[@]}"; do
		install -m 0755 "$bins/$f" "$r/usr/bin/$f"
	done
	echo -n "$k8s_version" >"$r/kind/version"
	rm -rf "$r"/var/lib/apt/lists/* "$r"/var/cache/apt/*.bin
}
build_container=
cleanup() {
	[ -z "$build_container" ] || docker rm -f -v "$build_container" >/dev/null 2>&1 || true
}
trap cleanup EXIT
import_node_image() {
	local tmp=$image-rootfs container old_id
	old_id=$(image_id "$image")
	tar -C "$node_rootfs" --numeric-owner -c . | docker import \
		--change 'ENV container=docker' \
		--change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
		- "$tmp" >/dev/null
	# load the component images into the node's containerd, as kind's builder does
	container=$(docker run -d --entrypoint=sleep --security-opt seccomp=unconfined "$tmp" infinity)
	build_container=$container
	docker exec "$container" bash -c 'nohup containerd >/tmp/containerd.log 2>&1 &'
	docker exec "$container" bash -c 'for i in $(seq 1 30); do [ -S /run/containerd/containerd.sock ] && ctr version >/dev/null 2>&1 && exit 0; sleep 1; done; cat /tmp/containerd.log; exit 1'
	local t
	for t in "$imgdir"/*.tar; do
		docker exec -i "$container" ctr --namespace=k8s.io images import --all-platforms --no-unpack --digests - <"$t" >&2
	done
	docker exec "$container" bash -c 'ctr --namespace=k8s.io images list -q | grep "^import-" | xargs -r ctr --namespace=k8s.io images rm >/dev/null'
	docker exec "$container" ctr --namespace=k8s.io images list -q >&2
	# (sleep, PID 1 here, reaps no one: a stopped containerd stays a zombie)
	docker exec "$container" bash -c 'pkill -x containerd; for i in $(seq 1 20); do ps -C containerd -o stat= | grep -qv Z || exit 0; sleep 0.5; done; exit 1'
	docker exec "$container" rm -rf /tmp/containerd.log /run/containerd
	# (docker 20.10 takes no STOPSIGNAL change: kind removes nodes with docker rm -f)
	docker commit \
		--change 'ENV container=docker' \
		--change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
		"$container" "$image" >/dev/null
	docker rm -f -v "$container" >/dev/null
	build_container=
	docker rmi "$tmp" >/dev/null
	drop_old_image "$old_id" "$image"
}
# stamp: what the image was made from
stamp=$( (
	echo "$KIND_VERSION $k8s_version $packages"
	contents "${BASH_SOURCE[0]}" "$here/lib.sh"
	# paths relative to bin/kind and hack/offline: the same in every checkout
	cd "$out" && sha256sum "${bins#"$out/"}"/* "${pause#"$out/"}" "${runc_wrapper#"$out/"}" "${imgdir#"$out/"}"/*.tar
	cd "$here" && find files -type f -exec sha256sum {} + | sort
) | sha256sum | cut -d' ' -f1)
if [ "${FORCE:-}" = 1 ] || [ "$(cat "$out/node-image.stamp" 2>/dev/null)" != "$stamp $image" ] ||
	! docker image inspect "$image" >/dev/null 2>&1; then
	step "assembling node rootfs in $node_rootfs" make_node_rootfs
	step "importing node image $image" import_node_image
	rm -rf "$node_rootfs"
	echo "$stamp $image" >"$out/node-image.stamp"
fi
echo "$image"
