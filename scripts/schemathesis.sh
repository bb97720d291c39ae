#!/usr/bin/env bash
# Checks the service against its contract: starts the built receiptsd on an empty database
# of the local PostgreSQL (scripts/postgres.sh), creates a tenant, and runs schemathesis
# (every check, scripts/schemathesis.toml) with openapi.yaml, each operation with at most
# MAX_EXAMPLES generated cases (default 50). Any failure fails the script.
# Build first (`swift build`); extra arguments go to `schemathesis run`.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/openapi-tools.sh
ensure_openapi_tools

receiptsd="$(swift build --show-bin-path)/receiptsd"
[[ -x "$receiptsd" ]] || { echo "schemathesis.sh: build receiptsd first (swift build)" >&2; exit 1; }

base_url="$(scripts/postgres.sh url)"
database="receipts_schemathesis"
scripts/postgres.sh psql -q -v ON_ERROR_STOP=1 \
    -c "DROP DATABASE IF EXISTS $database WITH (FORCE)" -c "CREATE DATABASE $database" >/dev/null
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
RECEIPTS_ADMIN_TOKEN="$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')"
export RECEIPTS_ADMIN_TOKEN

log="$(mktemp)"
DATABASE_URL="${base_url%/*}/$database" "$receiptsd" serve --port "$port" >"$log" 2>&1 &
server=$!
cleanup() {
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    scripts/postgres.sh psql -q -c "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null 2>&1 || true
    rm -f "$log"
}
trap cleanup EXIT

url="http://127.0.0.1:$port"
for _ in $(seq 1 120); do
    curl -fs "$url/readyz" >/dev/null 2>&1 && break
    kill -0 "$server" 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.5
done
RECEIPTS_TENANT_KEY="$(curl -fs -X POST "$url/admin/v1/tenants" \
    -H "Authorization: Bearer $RECEIPTS_ADMIN_TOKEN" -H 'Content-Type: application/json' \
    -d '{"name":"schemathesis"}' | python3 -c 'import json, sys; print(json.load(sys.stdin)["apiKey"])')"
export RECEIPTS_TENANT_KEY

started=$SECONDS
status=0
# One worker: with several threads, Python 3.11 before 3.11.8 can fail in hypothesis's
# ast.parse ("AST constructor recursion depth mismatch", a CPython bug).
# The repository's file, which the service serves byte for byte (OperationsTests): loaded
# from the service's URL, schemathesis would leave out the operation that serves it.
# scripts/schemathesis_hooks.py: a serializer for the NDJSON body of POST /v1/imports.
SCHEMATHESIS_HOOKS=scripts/schemathesis_hooks.py \
"$OPENAPI_TOOLS/bin/schemathesis" --config-file scripts/schemathesis.toml run openapi.yaml --url "$url" \
    --checks all --max-examples "${MAX_EXAMPLES:-50}" --seed "${SEED:-17}" --workers 1 \
    --request-timeout 10 --generation-database none --no-color "$@" || status=$?
echo "schemathesis.sh: finished in $((SECONDS - started)) s with status $status" >&2
if [[ $status != 0 ]]; then
    echo "schemathesis.sh: receiptsd's log:" >&2
    tail -n 50 "$log" >&2
fi
exit $status
