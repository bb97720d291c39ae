#!/usr/bin/env bash
# Builds the tiny package in Examples/ (a backend of its own that depends on Receipts by
# path and imports ReceiptsClient) and runs the README's example with it against the built
# receiptsd, started here on an empty database of the local PostgreSQL (scripts/postgres.sh).
# Build receiptsd first (`swift build`, or scripts/test.sh). Fails when the example does.
#
# The example builds in the main package's .build (--scratch-path): its dependencies are the
# main package's, at the same versions (Package.resolved is copied), so SwiftPM reuses what
# the main build compiled instead of compiling AsyncHTTPClient and SwiftNIO again.
set -euo pipefail
cd "$(dirname "$0")/.."

receiptsd="$(swift build --show-bin-path)/receiptsd"
[[ -x "$receiptsd" ]] || { echo "example.sh: build receiptsd first (swift build)" >&2; exit 1; }
# Copy the binary: building the example rewrites .build's workspace state.
work="$(mktemp -d)"
cp "$receiptsd" "$work/receiptsd"

started=$SECONDS
[[ -f Package.resolved ]] && cp Package.resolved Examples/Package.resolved
swift build --package-path Examples --scratch-path "$PWD/.build" --product ReceiptsExample
example="$(swift build --package-path Examples --scratch-path "$PWD/.build" --show-bin-path)/ReceiptsExample"
echo "example.sh: built the example in $((SECONDS - started)) s" >&2

base_url="$(scripts/postgres.sh url)"
database="receipts_example"
scripts/postgres.sh psql -q -v ON_ERROR_STOP=1 \
    -c "DROP DATABASE IF EXISTS $database WITH (FORCE)" -c "CREATE DATABASE $database" >/dev/null
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
RECEIPTS_ADMIN_TOKEN="$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')"
export RECEIPTS_ADMIN_TOKEN

DATABASE_URL="${base_url%/*}/$database" "$work/receiptsd" serve --port "$port" >"$work/log" 2>&1 &
server=$!
cleanup() {
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    scripts/postgres.sh psql -q -c "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

url="http://127.0.0.1:$port"
for _ in $(seq 1 120); do
    curl -fs "$url/readyz" >/dev/null 2>&1 && break
    kill -0 "$server" 2>/dev/null || { cat "$work/log" >&2; exit 1; }
    sleep 0.5
done

status=0
RECEIPTS_URL="$url" timeout 60 "$example" || status=$?
if [[ $status != 0 ]]; then
    echo "example.sh: the example failed ($status); receiptsd's log:" >&2
    tail -n 50 "$work/log" >&2
fi
exit $status
