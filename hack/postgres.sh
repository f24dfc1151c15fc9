#!/usr/bin/env bash
# Throwaway PostgreSQL clusters for tests and `make run`, run from the machine's
# initdb/pg_ctl: no Docker, no mocks.
#
#   hack/postgres.sh start DIR [PORT]  initdb DIR/data if needed, start it on
#                                      127.0.0.1:PORT (default 55432), create the
#                                      database evalmeter and print its URL
#   hack/postgres.sh stop DIR          stop it; success when it is not running
#   hack/postgres.sh status DIR        print the URL and exit 0 when running, else exit 1
#   hack/postgres.sh install           install the server programs when missing (as root, Debian)
#
# The URL is the only line on stdout, so `url=$(hack/postgres.sh start DIR)` works;
# everything else goes to stderr. start is idempotent: when the cluster in DIR
# already runs, it prints that cluster's URL (with the port it runs on).
#
# The data is thrown away, so fsync, synchronous_commit and full_page_writes are
# off; EVALMETER_PG_DURABLE=1 keeps PostgreSQL's defaults, for honest benchmarks.
set -euo pipefail
shopt -s nullglob

readonly default_port=55432 pg_user=evalmeter pg_database=evalmeter

log() { printf 'postgres.sh: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}
usage() {
	cat >&2 <<'EOF'
usage: hack/postgres.sh install           make sure the PostgreSQL server programs are installed
       hack/postgres.sh start DIR [PORT]   start the cluster in DIR (default port 55432), print its URL
       hack/postgres.sh stop DIR           stop the cluster in DIR
       hack/postgres.sh status DIR         print its URL and exit 0 when running, exit 1 otherwise
EOF
	exit 2
}

is_root() { [ "$(id -u)" -eq 0 ]; }

# find_binaries sets initdb_bin, pg_ctl_bin and psql_bin: from PATH, else from the
# highest version under /usr/lib/postgresql (Debian keeps them off PATH).
find_binaries() {
	initdb_bin="" pg_ctl_bin="" psql_bin=""
	if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
		initdb_bin=$(command -v initdb) pg_ctl_bin=$(command -v pg_ctl)
	else
		local d
		while IFS= read -r d; do
			if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
				initdb_bin=$d/initdb pg_ctl_bin=$d/pg_ctl
				break
			fi
		done < <(printf '%s\n' /usr/lib/postgresql/*/bin | sort -rV)
	fi
	[ -n "$initdb_bin" ] || return 1
	# psql: beside the real initdb first (PATH may only hold symlinks to the server
	# programs, e.g. /usr/local/bin/initdb -> /usr/lib/postgresql/15/bin/initdb).
	local real
	real=$(dirname "$(readlink -f "$initdb_bin")")
	if [ -x "$real/psql" ]; then
		psql_bin=$real/psql
	elif command -v psql >/dev/null; then
		psql_bin=$(command -v psql)
	fi
}

policy_rc_d=""
cleanup() { [ -z "$policy_rc_d" ] || rm -f "$policy_rc_d"; }
trap cleanup EXIT

# install_postgresql installs Debian's postgresql package, when root with apt-get.
install_postgresql() {
	is_root && command -v apt-get >/dev/null || return 1
	log "PostgreSQL not found; installing Debian's postgresql package"
	# A policy-rc.d that exits 101 tells invoke-rc.d and deb-systemd-invoke not to
	# start services, so the package does not start its own cluster on port 5432
	# beside ours. An existing policy-rc.d is the machine's: leave it alone.
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		policy_rc_d=/usr/sbin/policy-rc.d
		printf '#!/bin/sh\nexit 101\n' >"$policy_rc_d"
		chmod 755 "$policy_rc_d"
	fi
	local rc=0
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; } >&2 || rc=$?
	cleanup
	policy_rc_d=""
	return "$rc"
}

# as_pg runs a PostgreSQL program. PostgreSQL refuses to run as root, so as root it
# runs as the postgres system user; from / because it complains when it cannot
# read the caller's working directory (e.g. /root).
as_pg() {
	if is_root; then
		(cd / && runuser -u postgres -- "$@")
	else
		"$@"
	fi
}

url() { printf 'postgres://%s@127.0.0.1:%s/%s?sslmode=disable\n' "$pg_user" "$1" "$pg_database"; }

# running_port prints the port of the cluster running in $data, and fails when none
# runs. postmaster.pid's fourth line is the port.
running_port() {
	[ -f "$data/postmaster.pid" ] || return 1
	as_pg "$pg_ctl_bin" status -D "$data" >/dev/null 2>&1 || return 1
	sed -n 4p "$data/postmaster.pid"
}

# set_dir makes DIR absolute (the programs run from /) and sets dir and data.
set_dir() {
	dir=$1
	[ -n "$dir" ] || usage
	if [ -d "$dir" ]; then dir=$(cd "$dir" && pwd -P); fi
	data=$dir/data
}

# ensure_binaries finds the PostgreSQL programs, installing them when it can.
ensure_binaries() {
	if ! find_binaries; then
		install_postgresql && find_binaries ||
			die "PostgreSQL server programs (initdb, pg_ctl) not found in PATH nor under /usr/lib/postgresql/*/bin; install PostgreSQL (Debian: apt-get install postgresql)"
	fi
	[ -n "$psql_bin" ] || die "psql not found beside $initdb_bin nor in PATH"
}

cmd_start() {
	local port=${1:-$default_port}
	[[ $port =~ ^[0-9]{1,5}$ ]] && ((10#$port >= 1 && 10#$port <= 65535)) || usage
	port=$((10#$port))
	[ -n "$dir" ] || usage
	mkdir -p "$dir"
	set_dir "$dir"

	ensure_binaries

	if is_root; then
		id postgres >/dev/null 2>&1 || die "running as root, but there is no postgres system user to run PostgreSQL as"
		chown -R postgres: "$dir"
		as_pg test -w "$dir" -a -x "$dir" ||
			die "the postgres user cannot use $dir: its parent directories must be traversable by it (chmod o+x)"
	fi

	local p
	if p=$(running_port); then
		[ "$p" = "$port" ] || log "the cluster in $dir already runs, on port $p"
		url "$p"
		return
	fi

	# A Unix socket path holds at most 107 bytes; say so rather than let postgres fail.
	local sock=$dir/.s.PGSQL.$port
	((${#sock} <= 107)) || die "socket path $sock is longer than 107 bytes: use a shorter DIR"

	local durable=${EVALMETER_PG_DURABLE:-}
	if [ ! -f "$data/PG_VERSION" ]; then
		log "initdb $data ($("$initdb_bin" --version))"
		# initdb's progress report on stdout is noise here; its errors go to stderr.
		local nosync=()
		[ "$durable" = 1 ] || nosync=(--no-sync)
		as_pg "$initdb_bin" -D "$data" -U "$pg_user" --auth=trust --encoding=UTF8 --locale=C "${nosync[@]}" >/dev/null
		# Our settings live in evalmeter.conf, rewritten on every start: a file needs
		# no shell quoting of DIR, unlike pg_ctl -o.
		echo "include 'evalmeter.conf'" >>"$data/postgresql.conf"
	fi

	{
		echo "# Written by hack/postgres.sh on every start."
		echo "listen_addresses = '127.0.0.1'"
		echo "port = $port"
		echo "unix_socket_directories = '${dir//\'/\'\'}'"
		echo "max_connections = 200"
		if [ "$durable" != 1 ]; then
			echo "# Throwaway data: trade durability for speed (EVALMETER_PG_DURABLE=1 keeps the defaults)."
			echo "fsync = off"
			echo "synchronous_commit = off"
			echo "full_page_writes = off"
		fi
	} >"$data/evalmeter.conf"
	if is_root; then chown postgres: "$data/evalmeter.conf"; fi

	log "starting PostgreSQL on 127.0.0.1:$port, log $dir/postgres.log"
	if ! as_pg "$pg_ctl_bin" start -D "$data" -l "$dir/postgres.log" -w -t 60 -s >&2; then
		log "PostgreSQL did not start; the end of $dir/postgres.log:"
		tail -n 30 "$dir/postgres.log" >&2 || true
		exit 1
	fi

	local psql=(as_pg "$psql_bin" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U "$pg_user" -d postgres)
	if [ "$("${psql[@]}" -tAc "SELECT 1 FROM pg_database WHERE datname = '$pg_database'")" != 1 ]; then
		"${psql[@]}" -c "CREATE DATABASE $pg_database" >&2
	fi
	url "$port"
}

cmd_stop() {
	set_dir "$dir"
	# Nothing can run without a postmaster.pid; no need for the programs then.
	[ -f "$data/postmaster.pid" ] || return 0
	find_binaries || die "pg_ctl not found, cannot stop the cluster in $dir"
	running_port >/dev/null || return 0
	if ! as_pg "$pg_ctl_bin" stop -D "$data" -m fast -w -t 60 -s >&2; then
		# It may have stopped meanwhile: only a cluster still running is a failure.
		! running_port >/dev/null || die "could not stop the cluster in $dir"
	fi
}

cmd_status() {
	set_dir "$dir"
	[ -f "$data/postmaster.pid" ] || exit 1
	find_binaries || die "pg_ctl not found, cannot tell whether the cluster in $dir runs"
	local p
	p=$(running_port) || exit 1
	url "$p"
}

# install needs no DIR: CI runs it once before the tests, whose packages
# would otherwise race for the dpkg lock.
if [ "${1:-}" = install ] && [ $# -eq 1 ]; then
	ensure_binaries
	log "using $initdb_bin"
	exit 0
fi
[ $# -ge 2 ] || usage
cmd=$1 dir=$2
shift 2
case $cmd in
start)
	[ $# -le 1 ] || usage
	cmd_start "$@"
	;;
stop)
	[ $# -eq 0 ] || usage
	cmd_stop
	;;
status)
	[ $# -eq 0 ] || usage
	cmd_status
	;;
*) usage ;;
esac
