# shellcheck shell=bash
# What the harness asks the cluster: SQL, patronictl, etcd's health, and the checks that its
# waits poll (each succeeds or fails, and may set variables for the caller).

# ----------------------------------------------------------------- SQL ----

# ha_psql PASSWORD-NAME SECONDS psql-args...: psql tuples only, unaligned ("|" between
# columns), bounded by connect_timeout and an overall timeout.
ha_psql() {
    local password="$1" secs="$2"
    shift 2
    PGPASSWORD="$(ha_password "$password")" PGCONNECT_TIMEOUT=2 PGAPPNAME=ha-cluster.sh \
        timeout "$secs" "$PSQL" -X -q -A -t "$@"
}

# ha_sql_port PORT [SQL [SECONDS]]: as Patroni's superuser on one node; SQL from stdin when
# not given.
ha_sql_port() {
    local args=(-v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -U postgres -d postgres)
    [[ -z "${2:-}" ]] || args+=(-c "$2")
    ha_psql superuser "${3:-15}" "${args[@]}"
}

# A real write through the read-write multi-host URL (database postgres, as the superuser;
# a probe table there keeps "receipts" clean). On success sets WRITABLE_NODE and
# WRITABLE_PORT.
ha_probe_write() {
    local out port node
    out="$(ha_psql superuser 8 -v ON_ERROR_STOP=1 \
        "postgresql://postgres@$(ha_hosts)/postgres?target_session_attrs=read-write" \
        -c "create table if not exists receipts_ha_probe (id int primary key, at timestamptz not null)" \
        -c "insert into receipts_ha_probe values (1, now()) on conflict (id) do update set at = excluded.at" \
        -c "select current_setting('port')" 2>/dev/null)" || return 1
    port="$(printf '%s' "$out" | tail -n 1 | tr -dc '0-9')"
    node="$(ha_port_node "$port")" || return 1
    WRITABLE_NODE="$node"
    WRITABLE_PORT="$port"
}

ha_check_writable_node() { ha_probe_write && [[ "$WRITABLE_NODE" == "$1" ]]; }

# ha_sql_true PORT SQL: the query (on the node on PORT) answers true.
ha_sql_true() { [[ "$(ha_sql_port "$1" "$2" 5 2>/dev/null)" == t ]]; }

# Names of the nodes streaming from the node on PORT (one a line).
ha_streaming_from() {
    ha_sql_port "$1" "select application_name from pg_stat_replication where state = 'streaming' order by 1" 5 2>/dev/null
}

# ---------------------------------------------------------- patronictl ----

ha_ctl() {
    PYTHONWARNINGS=ignore timeout 60 patronictl -c "$CTL_CONF" "$@"
}

# patronictl with its output appended to patronictl.log (patronictl.log.last: this run
# only); the lines that matter are repeated on stderr.
ha_ctl_logged() {
    local rc=0
    ha_ctl "$@" >"$CTL_LOG.last" 2>&1 || rc=$?
    cat "$CTL_LOG.last" >>"$CTL_LOG"
    grep -E 'Success|falling back to DCS|failed, details|^Error' "$CTL_LOG.last" | tail -n 3 |
        sed 's/^/patronictl: /' >&2 || true
    return "$rc"
}

# The members as Patroni (etcd) sees them: rows "member role state host timeline",
# tab-separated.
ha_members() { ha_ctl list -f tsv 2>/dev/null | ha_members_from_tsv; }

# --- Pure, on text (tested by test.sh): `patronictl list -f tsv` on stdin, found by its
# --- header's names (Patroni 3.0 has more columns, e.g. "Lag in MB"); TL may be empty.
ha_members_from_tsv() {
    awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        { print $col["Member"] "\t" $col["Role"] "\t" $col["State"] "\t" $col["Host"] "\t" $col["TL"] }'
}
# The first member with ROLE ("Leader", "Sync Standby"), from ha_members rows on stdin (it
# reads them all: an early exit could SIGPIPE the writer, a failure under pipefail).
ha_member_with_role() { awk -F'\t' -v r="$1" '$2 == r && !found { print $1; found = 1 }'; }
ha_count_role() { awk -F'\t' -v r="$1" '$2 == r { n++ } END { print n + 0 }'; }
# NODE is listed as a running replica on the leader's timeline.
ha_member_follows() {
    awk -F'\t' -v n="$1" '$2 == "Leader" { tl = $5 } $1 == n && $2 != "Leader" && $3 == "running" { mtl = $5 }
        END { exit !(mtl != "" && mtl == tl) }'
}
# NODE is listed as the running Leader, with a timeline (its member key is up to date).
ha_member_leads() {
    awk -F'\t' -v n="$1" '$1 == n && $2 == "Leader" && $3 == "running" && $5 != "" { ok = 1 } END { exit !ok }'
}
# --- End of the pure part.

# Patroni's leader: sets DCS_LEADER and DCS_LEADER_PORT.
ha_dcs_leader() {
    local leader
    leader="$(ha_members | ha_member_with_role Leader)" || return 1
    [[ -n "$leader" ]] || return 1
    DCS_LEADER="$leader"
    DCS_LEADER_PORT="$(ha_node_port "$leader")"
}

ha_require_leader() {
    ha_dcs_leader || ha_die "the cluster has no leader (see: $0 status)"
}

ha_sync_mode_on() {
    ha_ctl show-config 2>/dev/null | grep -qE '^synchronous_mode: *true'
}

# ha_check_sync yes|no: patronictl lists a Sync Standby (yes) or none (no).
ha_check_sync() {
    local n
    n="$(ha_members | ha_count_role "Sync Standby")" || return 1
    if [[ "$1" == yes ]]; then (( n > 0 )); else (( n == 0 )); fi
}

ha_check_listed_leader() { ha_members | ha_member_leads "$1"; }

# ----------------------------------------------------------- streaming ----

# ha_check_streaming LEADER-PORT NODE...: the nodes stream from the node on LEADER-PORT
# (pg_stat_replication) and Patroni lists them as running replicas on the leader's timeline
# (so that `status` agrees right after a wait).
ha_check_streaming() {
    local port="$1" have members n
    shift
    have="$(ha_streaming_from "$port")" || return 1
    for n in "$@"; do grep -qx -- "$n" <<<"$have" || return 1; done
    members="$(ha_members)" || return 1
    for n in "$@"; do ha_member_follows "$n" <<<"$members" || return 1; done
}

# The leader accepts writes and every other node of the cluster streams from it.
ha_check_healthy() {
    ha_probe_write || return 1
    local others
    mapfile -t others < <(ha_node_names "$WRITABLE_NODE")
    (( ${#others[@]} == 0 )) || ha_check_streaming "$WRITABLE_PORT" "${others[@]}"
}

ha_wait_leader() {
    ha_wait "$1" "a leader that accepts writes on $(ha_hosts) (Patroni logs: $STATE_DIR/node*/patroni.log)" \
        ha_probe_write
}

# ---------------------------------------------------------------- etcd ----

ha_etcd_healthy() {
    ha_etcd_pid >/dev/null || { tail -n 20 "$ETCD_LOG" >&2; ha_die "etcd exited (log: $ETCD_LOG)"; }
    /usr/bin/python3 - "http://127.0.0.1:$HA_ETCD_CLIENT_PORT/health" <<'PY' 2>/dev/null | grep -q '"health":"true"'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
    sys.stdout.write(r.read().decode())
PY
}
