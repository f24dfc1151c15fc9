#!/usr/bin/env bash
# A Docker engine of the project's own, from Debian's docker.io, for building and
# running evalmeter's image on machines with no image registry (hack/offline/image.sh).
#
#   hack/offline/docker.sh start    install docker.io and runc when missing (root,
#                                   Debian), build the runtime wrapper bin/runc-nosysres,
#                                   start dockerd in the background unless it already
#                                   runs, wait until it answers, print DOCKER_HOST=unix://...
#   hack/offline/docker.sh stop     stop it; success when it is not running
#   hack/offline/docker.sh status   print DOCKER_HOST=... and exit 0 when it answers, else 1
#   hack/offline/docker.sh install  only install docker.io and runc when missing
#
# The DOCKER_HOST=... line is the only line on stdout, so
# `export "$(hack/offline/docker.sh start)"` works; everything else goes to stderr.
#
# The engine keeps to its own data root, exec root and socket, so it neither
# uses nor disturbs a system Docker. Its default OCI runtime is
# bin/runc-nosysres (hack/offline/tools/runc-nosysres), which drops CAP_SYS_RESOURCE
# before running runc: these machines' capability bounding set lacks it, and
# without the wrapper `docker run --privileged` (kind's nodes) fails with
# "unable to apply caps: operation not permitted".
#
# Environment: EVALMETER_DOCKER_DATA (default /var/lib/evalmeter-docker),
# EVALMETER_DOCKER_RUN (default /run/evalmeter-docker: exec root, socket, pid
# file), EVALMETER_DOCKER_LOG (default /var/log/evalmeter-dockerd.log),
# EVALMETER_DOCKER_WAIT (seconds start waits for the engine, default 60).
set -euo pipefail
cd "$(dirname "$0")/../.."

readonly data_root=${EVALMETER_DOCKER_DATA:-/var/lib/evalmeter-docker}
readonly exec_root=${EVALMETER_DOCKER_RUN:-/run/evalmeter-docker}
readonly log_file=${EVALMETER_DOCKER_LOG:-/var/log/evalmeter-dockerd.log}
readonly wait_s=${EVALMETER_DOCKER_WAIT:-60}
readonly host=unix://$exec_root/docker.sock
readonly pid_file=$exec_root/dockerd.pid
readonly runtime=evalmeter-runc
readonly wrapper=$PWD/bin/runc-nosysres

log() { printf 'docker.sh: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}
usage() {
	sed -n '5,14p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

need_root() {
	[ "$(id -u)" -eq 0 ] || die "$1 needs root (dockerd and apt-get do)"
}

install() {
	if command -v dockerd >/dev/null && command -v runc >/dev/null && command -v docker >/dev/null; then
		return
	fi
	need_root "installing docker.io"
	command -v apt-get >/dev/null || die "dockerd or runc is missing and there is no apt-get to install docker.io and runc"
	local t0=$SECONDS
	log "installing docker.io and runc (apt-get)"
	local apt=(apt-get -o DPkg::Lock::Timeout=300 -q)
	export DEBIAN_FRONTEND=noninteractive
	# The package lists may be missing or stale on a fresh machine.
	if ! timeout 600 "${apt[@]}" install -y --no-install-recommends docker.io runc >&2; then
		timeout 300 "${apt[@]}" update >&2 || die "apt-get update failed"
		timeout 600 "${apt[@]}" install -y --no-install-recommends docker.io runc >&2 ||
			die "apt-get install docker.io runc failed"
	fi
	command -v dockerd >/dev/null || die "docker.io installed but dockerd is not in PATH ($PATH)"
	log "installed docker.io and runc in $((SECONDS - t0))s"
}

# pid of our dockerd when it runs, else nothing (and a failure status).
running_pid() {
	local pid
	[ -r "$pid_file" ] || return 1
	pid=$(cat "$pid_file")
	[ -n "$pid" ] && [ -d "/proc/$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ] || return 1
	echo "$pid"
}

answers() { DOCKER_HOST=$host timeout 10 docker info >/dev/null 2>&1; }

start() {
	install
	need_root "starting dockerd"
	local t0=$SECONDS
	# Always rebuilt (cheap when cached) so that a running engine uses the
	# wrapper of this tree; dockerd runs it afresh for every container.
	mkdir -p bin
	CGO_ENABLED=0 "${GO:-go}" build -o "$wrapper" ./hack/offline/tools/runc-nosysres ||
		die "building the runtime wrapper failed"

	local pid
	if pid=$(running_pid); then
		log "dockerd already runs (pid $pid)"
	else
		mkdir -p "$data_root" "$exec_root" "$(dirname "$log_file")"
		local runc
		runc=$(command -v runc) || die "runc is not in PATH"
		log "starting dockerd (data root $data_root, exec root $exec_root, log $log_file)"
		printf '\n=== %s docker.sh start\n' "$(date -Is)" >>"$log_file"
		# setsid: the engine outlives this script and its caller's process group.
		EVALMETER_RUNC=$runc setsid dockerd \
			--data-root "$data_root" \
			--exec-root "$exec_root" \
			--pidfile "$pid_file" \
			--host "$host" \
			--add-runtime "$runtime=$wrapper" \
			--default-runtime "$runtime" \
			</dev/null >>"$log_file" 2>&1 &
		pid=$!
	fi

	local deadline=$((SECONDS + wait_s))
	until answers; do
		if ! [ -d "/proc/$pid" ]; then
			log "dockerd exited; the end of $log_file:"
			tail -n 20 "$log_file" >&2
			exit 1
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			log "dockerd (pid $pid) did not answer on $host within ${wait_s}s; the end of $log_file:"
			tail -n 20 "$log_file" >&2
			exit 1
		fi
		sleep 0.5
	done
	log "dockerd answers on $host (pid $pid; ready in $((SECONDS - t0))s)"
	echo "DOCKER_HOST=$host"
}

stop() {
	local pid
	if ! pid=$(running_pid); then
		log "dockerd is not running"
		return
	fi
	need_root "stopping dockerd"
	log "stopping dockerd (pid $pid)"
	kill -TERM "$pid"
	# dockerd gives running containers 15 s to stop, then stops its containerd.
	local deadline=$((SECONDS + 60))
	while [ -d "/proc/$pid" ]; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			log "dockerd did not stop within 60s; killing it"
			kill -KILL "$pid" 2>/dev/null || true
			break
		fi
		sleep 0.5
	done
	log "dockerd stopped"
}

status() {
	local pid
	if pid=$(running_pid) && answers; then
		log "dockerd runs (pid $pid), data root $data_root, log $log_file"
		echo "DOCKER_HOST=$host"
		return
	fi
	if [ -n "${pid:-}" ]; then
		log "dockerd runs (pid $pid) but does not answer on $host"
	else
		log "dockerd is not running"
	fi
	exit 1
}

[ $# -eq 1 ] || usage
case $1 in
start) start ;;
stop) stop ;;
status) status ;;
install) install ;;
*) usage ;;
esac
