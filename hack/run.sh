#!/usr/bin/env bash
# make run: the API on localhost:8080 with a throwaway PostgreSQL, a dev client
# with 10 hours of credit, and a working curl example. Ctrl-C stops everything.
#
# With DATABASE_URL set, that database is used and no PostgreSQL is started.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=bin/evalmeter
pgdir=${EVALMETER_DEV_PGDIR:-$PWD/bin/dev-postgres}
addr=${EVALMETER_ADDR:-localhost:8080}
ops_addr=${EVALMETER_OPS_ADDR:-localhost:9090}

started_pg=
cleanup() {
	if [ -n "$started_pg" ]; then
		hack/postgres.sh stop "$pgdir" >/dev/null 2>&1 || true
		rm -rf "$pgdir"
	fi
}
trap cleanup EXIT

if [ -z "${DATABASE_URL:-}" ]; then
	mkdir -p "$pgdir"
	chmod 755 "$pgdir"
	started_pg=1
	DATABASE_URL=$(hack/postgres.sh start "$pgdir" "${EVALMETER_DEV_PGPORT:-55432}")
fi
export DATABASE_URL
# A new session-token secret each run: tokens of earlier runs stop working.
EVALMETER_TOKEN_SECRET=$(head -c 32 /dev/urandom | base64)
export EVALMETER_TOKEN_SECRET

# The key that signs metrics responses (receipts), kept across runs so that
# receipts of earlier runs still verify.
receipt_key=${EVALMETER_RECEIPT_KEY_FILE:-bin/dev-receipt-key.pem}
if [ ! -f "$receipt_key" ] && command -v openssl >/dev/null; then
	(umask 077 && openssl genpkey -algorithm ed25519 -out "$receipt_key")
fi
if [ -f "$receipt_key" ]; then
	export EVALMETER_RECEIPT_KEY_FILE=$receipt_key
	receipts="Metrics responses are signed; the keys: http://$addr/.well-known/evalmeter/receipt-keys.json"
else
	receipts="Metrics responses are not signed: install openssl, or set EVALMETER_RECEIPT_KEY_FILE"
fi

"$bin" migrate
key=$("$bin" clients grant --client-id dev --hours 10 --rotate-key 2>/dev/null)

cat <<MSG

evalmeter API on http://$addr (operations: http://$ops_addr/metrics, /healthz, /readyz)
Client "dev" has 10 evaluation-hour credits. Its API key (new on every run), in the
variables the evalmeter CLI reads:

  export EVALMETER_URL=http://$addr EVALMETER_API_KEY=$key

Try, with the CLI (the example request, through a session of one credit):

  $bin submit --receipt receipt.json api/examples/metrics-request.json
  $bin usage

or with curl:

  curl -s -H "Authorization: Bearer \$EVALMETER_API_KEY" http://$addr/api/svc/v1/usage
  TOKEN=\$(curl -s -X POST -H "Authorization: Bearer \$EVALMETER_API_KEY" -H "Idempotency-Key: example-session-0001" \\
      http://$addr/api/svc/v1/sessions | sed -E 's/.*"token":"([^"]+)".*/\1/')
  curl -s -X POST -H "Authorization: Bearer \$TOKEN" -H "Idempotency-Key: example-metrics-0001" \\
      -H "Content-Type: application/json" --data-binary @api/examples/metrics-request.json \\
      http://$addr/api/svc/v1/metrics

Rerun a command with the same Idempotency-Key: you get the same answer, with
"idempotent_replay": true, and no second credit. Ctrl-C stops the API and removes the database.

$receipts
Check a receipt: $bin verify --service http://$addr receipt.json

MSG
# Not exec: the trap must run after the API stops.
"$bin" api --addr "$addr" --ops-addr "$ops_addr" &
api_pid=$!
trap 'kill -TERM $api_pid 2>/dev/null || true' INT TERM
wait "$api_pid" || true
wait "$api_pid" 2>/dev/null || true
