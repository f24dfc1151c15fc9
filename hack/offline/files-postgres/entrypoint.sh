#!/bin/sh
# PostgreSQL's entrypoint in hack/offline/postgres-image.sh's image: the subset of the
# official postgres image's that evalmeter's chart relies on.
set -eu

: "${PGDATA:=/var/lib/postgresql/data}"
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"

if [ ! -s "$PGDATA/PG_VERSION" ]; then
	mkdir -p "$PGDATA"
	chmod 700 "$PGDATA"
	pwfile=/tmp/pwfile.$$
	(umask 077 && printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile")
	initdb --pgdata="$PGDATA" --username="$POSTGRES_USER" --pwfile="$pwfile" \
		--auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C --no-instructions
	rm -f "$pwfile"
	echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
	printf 'host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
	if [ "$POSTGRES_DB" != postgres ]; then
		# identifiers double-quoted, with embedded quotes doubled
		db=$(printf '%s' "$POSTGRES_DB" | sed 's/"/""/g')
		owner=$(printf '%s' "$POSTGRES_USER" | sed 's/"/""/g')
		echo "CREATE DATABASE \"$db\" OWNER \"$owner\";" | postgres --single -D "$PGDATA" postgres >/dev/null
	fi
	echo "docker-entrypoint.sh: initialized $PGDATA (database $POSTGRES_DB, superuser $POSTGRES_USER)" >&2
fi
exec postgres -D "$PGDATA" "$@"
