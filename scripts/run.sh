#!/usr/bin/env bash
# Runs receiptsd on 127.0.0.1:8080 (RECEIPTS_HOST / RECEIPTS_PORT to change) against a
# local PostgreSQL under .receipts/, installing PostgreSQL, libpq-dev and pkg-config when
# missing. It applies pending migrations, prints the id and a fresh API key of the demo
# tenant "demo" (each run replaces the key), and serves until Ctrl-C, with the live demo
# page at /demo (RECEIPTS_DEMO=true for the tenant "demo"; RECEIPTS_DEMO=false turns it off).
# Set DATABASE_URL to use your own PostgreSQL instead. Extra arguments go to `receiptsd serve`.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/postgres.sh
ensure_packages
if [[ -z "${DATABASE_URL:-}" ]]; then
    DATABASE_URL="$(scripts/postgres.sh url)"
    export DATABASE_URL
fi

swift build --product receiptsd
receiptsd="$(swift build --show-bin-path)/receiptsd"
"$receiptsd" migrate
echo "Demo tenant (use the API key as: Authorization: Bearer <key>):"
"$receiptsd" tenant create "Demo" --id demo --replace-key
export RECEIPTS_DEMO="${RECEIPTS_DEMO:-true}"
export RECEIPTS_DEMO_TENANT=demo
if [[ "$RECEIPTS_DEMO" == true ]]; then
    echo "Live demo: http://${RECEIPTS_HOST:-127.0.0.1}:${RECEIPTS_PORT:-8080}/demo (open it in a browser)"
fi
exec "$receiptsd" serve "$@"
