#!/usr/bin/env bash
# Tests of the harness's pure parts, without a cluster (a second or two): how the waits read
# `patronictl list` (rows recorded from Patroni 3.0), that every wait ends at its deadline
# naming what it waited for, the URL that `start` and `url` print, patroni.yml, and the
# command line's refusals. scripts/test.sh runs it; so can anyone: scripts/ha-cluster/test.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/postgres.sh
source "$here/../postgres.sh"
for f in common packages processes config queries lifecycle faults; do
    # shellcheck source=/dev/null
    source "$here/$f.sh"
done

failed=0 passed=0
check() { # name command...: the command succeeds
    local name="$1"
    shift
    if "$@"; then passed=$(( passed + 1 )); else failed=$(( failed + 1 )); echo "FAIL: $name" >&2; fi
}
fails() { ! "$@"; }
equals() { [[ "$1" == "$2" ]] || { printf 'expected: %s\n  actual: %s\n' "$2" "$1" >&2; return 1; }; }
members() { ha_members_from_tsv <<<"$1"; }
tsv() { printf 'Cluster\tMember\tHost\tRole\tState\tTL\tLag in MB\n'; printf '%s\n' "$@" | tr '|' '\t'; }

# --- patronictl list -f tsv (Patroni 3.0), as the waits read it.
healthy="$(members "$(tsv 'receipts-ha|node1|127.0.0.1:55431|Leader|running|1|' \
    'receipts-ha|node2|127.0.0.1:55432|Replica|running|1|0')")"
check "rows: member role state host timeline" equals "$(head -n 1 <<<"$healthy")" "$(printf 'node1\tLeader\trunning\t127.0.0.1:55431\t1')"
check "the leader" equals "$(ha_member_with_role Leader <<<"$healthy")" node1
check "no Sync Standby" equals "$(ha_count_role "Sync Standby" <<<"$healthy")" 0
check "a running replica on the leader's timeline follows" ha_member_follows node2 <<<"$healthy"
check "the leader does not follow" fails ha_member_follows node1 <<<"$healthy"
check "the leader leads" ha_member_leads node1 <<<"$healthy"
check "a replica does not lead" fails ha_member_leads node2 <<<"$healthy"

sync="$(members "$(tsv 'receipts-ha|node1|127.0.0.1:55431|Leader|running|1|' \
    'receipts-ha|node2|127.0.0.1:55432|Sync Standby|running|1|0')")"
check "the Sync Standby" equals "$(ha_member_with_role "Sync Standby" <<<"$sync")" node2
check "one Sync Standby" equals "$(ha_count_role "Sync Standby" <<<"$sync")" 1
check "a Sync Standby follows" ha_member_follows node2 <<<"$sync"

# A revived old primary: stopped (no timeline), then running on the old timeline before it
# rewinds, then a replica on the new one.
for row in 'node1|127.0.0.1:55431|Replica|stopped||unknown' 'node1|127.0.0.1:55431|Replica|starting||unknown' \
    'node1|127.0.0.1:55431|Replica|running|1|0'; do
    reviving="$(members "$(tsv "receipts-ha|$row" 'receipts-ha|node2|127.0.0.1:55432|Leader|running|2|')")"
    check "not yet following: $row" fails ha_member_follows node1 <<<"$reviving"
done
check "a replica on the new timeline follows" ha_member_follows node1 <<<"$(members "$(tsv \
    'receipts-ha|node1|127.0.0.1:55431|Sync Standby|running|2|0' 'receipts-ha|node2|127.0.0.1:55432|Leader|running|2|')")"
check "a leader without a timeline does not lead yet" fails ha_member_leads node2 <<<"$(members "$(tsv \
    'receipts-ha|node2|127.0.0.1:55432|Leader|starting||')")"
# Columns are found by name: another Patroni's order or extra columns read the same.
reordered="$(printf 'Member\tTL\tRole\tPending restart\tState\tHost\tCluster\nnode2\t1\tReplica\t*\trunning\t127.0.0.1:55432\treceipts-ha\n' |
    ha_members_from_tsv)"
check "columns by name" equals "$reordered" "$(printf 'node2\tReplica\trunning\t127.0.0.1:55432\t1')"

# --- Every wait ends at its deadline and says what it waited for (in a subshell: it exits).
started=${EPOCHREALTIME//[!0-9]/}
out="$( (ha_wait 1 "the impossible" false) 2>&1 )" && rc=0 || rc=$?
elapsed_ms=$(( (${EPOCHREALTIME//[!0-9]/} - started) / 1000 ))
check "a wait fails" equals "$rc" 1
check "a wait names what it waited for" equals "$out" "ha-cluster.sh: error: timed out after 1s waiting for the impossible"
check "a wait ends at its deadline (1 s: took ${elapsed_ms} ms)" test "$elapsed_ms" -ge 1000 -a "$elapsed_ms" -lt 3000
n=0
third() { n=$(( n + 1 )); (( n == 3 )); }
check "a wait returns once its check succeeds" ha_poll 0.01 5 third
check "... having run it until then" equals "$n" 3

# --- The URL, nodes and ports (a state directory with only a password and a node count).
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
RECEIPTS_HA_DIR="$tmp/state" ha_init_paths
mkdir -p "$STATE_DIR"
printf 'pw\n' >"$STATE_DIR/receipts.password"
printf '3\n' >"$NODES_FILE"
check "the URL" equals "$(ha_url)" \
    "postgresql://receipts:pw@127.0.0.1:55431,127.0.0.1:55432,127.0.0.1:55433/receipts?target_session_attrs=read-write"
check "nodes but some" equals "$(ha_node_names node2 | tr '\n' ' ')" "node1 node3 "
check "ports and nodes" equals "$(ha_node_port node3) $(ha_node_rest_port node3) $(ha_port_node 55432)" "55433 28010 node2"
check "no node outside 55431..55435" fails ha_port_node 55436

# --- patroni.yml: YAML that Patroni reads, with the settings README.md documents.
if /usr/bin/python3 -c 'import yaml' 2>/dev/null; then
    printf 's3cret\n' >"$STATE_DIR/superuser.password"
    printf 'r3pl\n' >"$STATE_DIR/replication.password"
    PG_BIN=/usr/lib/postgresql/15/bin
    check "patroni.yml" /usr/bin/python3 -c '
import sys, yaml
c = yaml.safe_load(sys.stdin)
d = c["bootstrap"]["dcs"]
assert c["name"] == "node2" and c["postgresql"]["listen"] == "127.0.0.1:55432", c
assert c["restapi"]["listen"] == "127.0.0.1:28009" and c["etcd3"]["hosts"] == "127.0.0.1:23790"
assert (d["ttl"], d["loop_wait"], d["retry_timeout"]) == (10, 1, 4), d
# Patroni: loop_wait + 2 * retry_timeout <= ttl, or the leader key may expire while it retries.
assert d["loop_wait"] + 2 * d["retry_timeout"] <= d["ttl"]
assert d["postgresql"]["use_pg_rewind"] and d["postgresql"]["use_slots"] and not d["synchronous_mode"]
auth = c["postgresql"]["authentication"]
assert auth["superuser"]["password"] == "s3cret" and auth["replication"]["password"] == "r3pl"
assert c["postgresql"]["parameters"]["unix_socket_directories"] == "" and c["watchdog"]["mode"] == "off"
' < <(ha_patroni_yml node2 "$STATE_DIR/node2")
else
    echo "ha-cluster/test.sh: no python3-yaml (comes with patroni): patroni.yml not checked" >&2
fi

# --- The command line refuses before it touches anything; stdout stays empty.
cli() { RECEIPTS_HA_DIR="$tmp/none" "$here/../ha-cluster.sh" "$@" 2>/dev/null; }
check "usage: exit 2" equals "$(cli bogus; echo "rc=$?")" "rc=2"
check "start --nodes 9: exit 1" equals "$(cli start --nodes 9; echo "rc=$?")" "rc=1"
check "url without a cluster: exit 1" equals "$(cli url; echo "rc=$?")" "rc=1"
check "... and nothing made" test ! -e "$tmp/none"

echo "ha-cluster/test.sh: $passed passed, $failed failed" >&2
(( failed == 0 ))
