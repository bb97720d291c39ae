#!/usr/bin/env bash
# Patroni-managed PostgreSQL cluster on loopback, for Receipts' high-availability
# tests: one etcd (Patroni's etcd3 store) and N Patroni nodes (node1..nodeN).
#
# Usage: scripts/ha-cluster.sh COMMAND [args]
#
#   start [--nodes N]  Install missing packages (Debian/apt: patroni, etcd-server,
#                      postgresql), start etcd and N nodes (default 2, or as many
#                      as the existing cluster has), bootstrap the cluster on first
#                      use (role "receipts", LOGIN SUPERUSER, random password; database
#                      "receipts" owned by it) and wait until a leader accepts writes
#                      and every other node is a streaming replica. Prints one line:
#                        DATABASE_URL=postgresql://receipts:<pw>@127.0.0.1:55431,127.0.0.1:55432/receipts?target_session_attrs=read-write
#                      Running it again starts whatever is not running; a larger
#                      --nodes adds nodes.
#   url                Print just the URL (the cluster must be running).
#   status             `patronictl list`.
#   leader             Print the leader as Patroni (etcd) sees it: "node1 55431".
#                      Right after crash-primary that is still the dead node until
#                      its key expires; use wait-leader to know when a new one works.
#   wait-leader [S]    Wait up to S seconds (default 60) until a leader accepts a
#                      write through the read-write URL (CREATE TABLE IF NOT EXISTS
#                      + INSERT into receipts_ha_probe in database "postgres", so
#                      "receipts" stays clean); print "node port".
#   switchover         Planned switchover: patronictl switchover --force to the
#                      first streaming replica (the Sync Standby in synchronous
#                      mode); waits until the new leader accepts writes and the old
#                      one (and every other running node) streams from it on the new
#                      timeline; prints the new leader "node port".
#   crash-primary      kill -9 the leader's Patroni and all of its PostgreSQL
#                      processes (SIGSTOP all, then SIGKILL all); prints
#                      "node <date +%s.%N of the kill>" and returns at once. Patroni
#                      fails over by itself once the leader key's TTL expires;
#                      `wait-leader` tells when the new leader accepts writes.
#   revive NODE        Start NODE's Patroni again and wait until it is a streaming
#                      replica (Patroni recovers a crashed data directory in
#                      single-user mode and runs pg_rewind when it diverged).
#   sync on|off        Set Patroni's synchronous_mode (patronictl edit-config
#                      --force -s synchronous_mode=true|false); waits until
#                      `patronictl list` shows a Sync Standby (on) or none (off).
#   cut-replication    From now on the replicas receive no WAL from the primary,
#                      which keeps running and accepting (asynchronous) commits.
#                      How: wait until every replica has replayed the primary's
#                      current WAL position; prepend "host replication all all
#                      reject" to the primary's pg_hba.conf and reload; wait until
#                      a replication connection is refused (so the postmaster has
#                      the rule); pg_terminate_backend() the walsenders and wait
#                      until they are gone. Walreceivers retry every 5 s and are
#                      refused, so nothing written after the cut reaches a replica:
#                      no process is paused, nothing is left in a socket buffer, no
#                      catalog changes (pg_hba.conf is a local file, and Patroni
#                      writes it anew whenever it starts PostgreSQL). Use it with
#                      synchronous_mode off. start, switchover and revive heal a
#                      cut that lossy-failover did not consume.
#   lossy-failover     After cut-replication: kill -9 the primary (as crash-primary),
#                      then `patronictl failover --candidate <first replica> --force`.
#                      The dead leader's REST API refuses, so patronictl writes the
#                      failover key into etcd ("falling back to DCS"); Patroni
#                      promotes the candidate once the old leader key expires (a
#                      named candidate skips the maximum_lag_on_failover check).
#                      Waits until it accepts writes and is listed as leader, and
#                      for other running replicas to follow it; prints "node port".
#                      Commits made on the old primary after the cut are lost;
#                      `revive` brings the old primary back (pg_rewind).
#                      Sequences: PostgreSQL WAL-logs 32 values ahead, so a sequence
#                      goes back (hands out a value again) only if it advanced by
#                      more than 32 after the cut.
#   stop               Stop every daemon (replicas first, then the leader, then
#                      etcd), keep the data.
#   destroy            SIGKILL every daemon of the cluster and delete the state
#                      directory (no clean shutdown: the data goes anyway).
#
# stdout carries only the output documented above; progress goes to stderr.
# Every wait has a deadline and fails naming what it waited for.
#
# Environment:
#   RECEIPTS_HA_DIR   state directory (default /var/tmp/receipts-ha)
#
# Ports (127.0.0.1 only): etcd client 23790, peer 23800; nodeN: PostgreSQL
# 55430+N (55431, 55432, 55433), Patroni REST API 28007+N (28008, 28009, 28010).
# No Unix sockets.
#
# Processes run as the "postgres" user when the script runs as root (PostgreSQL
# refuses root), as the caller otherwise; each in its own session, detached,
# pid in a file. No systemd: Debian's patroni/etcd services are not used.
#
# State layout (owned by the server user):
#   .receipts-ha (marker: destroy deletes only such a directory), .lock,
#   etcd/ (data), etcd.log, etcd.pid, nodes (node count), patronictl.yml,
#   patronictl.log (switchover/failover output), receipts.password,
#   superuser.password (Patroni's superuser "postgres"), replication.password
#   (role "replicator") (mode 600), nodeN/{patroni.yml, patroni.log (Patroni
#   and PostgreSQL), patroni.pid, data/, pgpass}, cut (leader and LSNs) and
#   cut.pg_hba.conf (the primary's own) from cut-replication until
#   lossy-failover or a heal.
#
# Patroni settings (Patroni 3.0; dynamic ones are bootstrap.dcs, then live in etcd):
#   ttl: 10                  leader key lease (s). A crashed leader's key expires
#                            <= 10 s after its last renewal; failover follows at once.
#   loop_wait: 1             HA loop period (s): key renewal, reaction to changes.
#   retry_timeout: 4         DCS and PostgreSQL retry budget (s); Patroni's rule of
#                            thumb loop_wait + 2 * retry_timeout <= ttl holds (9 <= 10).
#   maximum_lag_on_failover: 1048576 (default, 1 MB): a replica further behind the
#                            last primary position known in etcd does not promote.
#   synchronous_mode: false  (`sync on` switches it on; synchronous_node_count 1)
#   postgresql.use_pg_rewind: true  a crashed or cut-off old primary rejoins as a
#                            replica (needs wal_log_hints: on, which Patroni forces).
#   postgresql.use_slots: true      a physical replication slot per replica.
#   postgresql.parameters: max_connections 200, shared_buffers 64MB,
#                            wal_log_hints on, fsync on, synchronous_commit on,
#                            full_page_writes on, max_wal_size 256MB,
#                            wal_keep_size 128MB, unix_socket_directories '' (TCP only)
#   basebackup: checkpoint fast (replicas clone without waiting for a checkpoint)
#   watchdog: off; no remove_data_directory_on_* (a failed pg_rewind shows, it is
#   not papered over by a fresh clone).
# Measured on a 2-core Debian 12 machine (2 nodes unless said): start from
# nothing 17-18 s (apt-get update + install 13 packages + bootstrap), 6-6.5 s
# after destroy (3 nodes: 6-8 s), about 1 s when already running; switchover
# 6-6.5 s; crash-primary to a new leader accepting writes 9.7-10.7 s (ttl 10);
# lossy-failover 10-11 s (3 nodes 18 s); revive with pg_rewind 6-8 s; stop ~10 s
# (Patroni takes ~3 s to exit after PostgreSQL is down); destroy < 1 s.

set -euo pipefail

# The local cluster's helpers (sourcing it only defines functions): its password maker.
# shellcheck source=scripts/postgres.sh
source "$(dirname "${BASH_SOURCE[0]}")/postgres.sh"

HA_SCOPE=receipts-ha
HA_NAMESPACE=/receipts/
HA_ETCD_CLIENT_PORT=23790
HA_ETCD_PEER_PORT=23800
HA_PG_BASE_PORT=55430     # nodeN listens on HA_PG_BASE_PORT + N
HA_REST_BASE_PORT=28007   # nodeN's REST API on HA_REST_BASE_PORT + N
HA_MAX_NODES=5
HA_DEFAULT_NODES=2

ha_log() { printf 'ha-cluster.sh: %s\n' "$*" >&2; }
ha_die() { ha_log "error: $*"; exit 1; }

ha_now_ms() { local t; t="$(date +%s%N)"; printf '%s' "$(( t / 1000000 ))"; }

# ----------------------------------------------------------- packages ----

ha_have_packages() {
    command -v patroni >/dev/null 2>&1 && command -v patronictl >/dev/null 2>&1 &&
        command -v etcd >/dev/null 2>&1 &&
        compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null &&
        /usr/bin/python3 -c 'import etcd' >/dev/null 2>&1
}

# Install patroni, etcd-server (and postgresql when no server is installed)
# with apt-get; sudo when not root. Debian's postinst scripts would start a
# system-wide etcd (and try a patroni service): while installing, a temporary
# /usr/sbin/policy-rc.d (when there is none) forbids that.
ha_ensure_packages() {
    ha_have_packages && return 0
    local pkgs=(patroni python3-etcd etcd-server) sudo=()
    compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || pkgs+=(postgresql)
    if [[ "$(id -u)" != 0 ]]; then
        command -v sudo >/dev/null 2>&1 ||
            ha_die "not root and sudo is not available; install ${pkgs[*]} manually"
        sudo=(sudo)
    fi
    command -v apt-get >/dev/null 2>&1 || ha_die "apt-get not found; install ${pkgs[*]} manually"
    ha_log "installing ${pkgs[*]} via apt"
    local policy=/usr/sbin/policy-rc.d made_policy=0 rc=0
    if [[ ! -e "$policy" ]]; then
        printf '#!/bin/sh\n# temporary, scripts/ha-cluster.sh\nexit 101\n' |
            "${sudo[@]}" tee "$policy" >/dev/null && "${sudo[@]}" chmod 755 "$policy" && made_policy=1
    fi
    local install=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive
        apt-get install -y -q --no-install-recommends "${pkgs[@]}")
    # Try without `apt-get update` first (fresh lists save time); update on failure.
    if ! "${install[@]}" >&2 2>/dev/null; then
        "${sudo[@]}" apt-get update -q >&2 && "${install[@]}" >&2 || rc=$?
    fi
    (( made_policy )) && "${sudo[@]}" rm -f "$policy"
    (( rc == 0 )) || ha_die "apt-get install ${pkgs[*]} failed"
    ha_have_packages || ha_die "packages installed but patroni/etcd/PostgreSQL/python3-etcd still missing"
}

# -------------------------------------------------------------- paths ----

ha_init_paths() {
    local state="${RECEIPTS_HA_DIR:-/var/tmp/receipts-ha}"
    [[ "$state" == /* ]] || state="$PWD/$state"
    state="${state%/}"
    [[ -n "$state" && "$state" != / ]] || ha_die "RECEIPTS_HA_DIR must not be /"
    STATE_DIR="$state"
    MARKER="$STATE_DIR/.receipts-ha"
    LOCK_FILE="$STATE_DIR/.lock"
    ETCD_DIR="$STATE_DIR/etcd"
    ETCD_PID="$STATE_DIR/etcd.pid"
    ETCD_LOG="$STATE_DIR/etcd.log"
    CTL_CONF="$STATE_DIR/patronictl.yml"
    NODES_FILE="$STATE_DIR/nodes"
    CUT_FILE="$STATE_DIR/cut"
    IS_ROOT=0
    [[ "$(id -u)" == 0 ]] && IS_ROOT=1
    if (( IS_ROOT )); then SERVER_USER=postgres; else SERVER_USER="$(id -un)"; fi
}

ha_node_dir() { printf '%s/%s' "$STATE_DIR" "$1"; }
ha_node_index() {
    [[ "$1" =~ ^node([1-9][0-9]*)$ ]] || ha_die "not a node name: $1 (node1..node$HA_MAX_NODES)"
    printf '%s' "${BASH_REMATCH[1]}"
}
ha_node_port() { printf '%s' "$(( HA_PG_BASE_PORT + $(ha_node_index "$1") ))"; }
ha_node_rest_port() { printf '%s' "$(( HA_REST_BASE_PORT + $(ha_node_index "$1") ))"; }
ha_port_node() {
    local i=$(( $1 - HA_PG_BASE_PORT ))
    (( i >= 1 && i <= HA_MAX_NODES )) || return 1
    printf 'node%s' "$i"
}

ha_node_count() {
    [[ -f "$NODES_FILE" ]] || { printf '0'; return; }
    tr -dc '0-9' <"$NODES_FILE"
}
ha_node_names() {
    local n i
    n="$(ha_node_count)"
    for (( i = 1; i <= n; i++ )); do printf 'node%s\n' "$i"; done
}

# Newest /usr/lib/postgresql/*/bin, preferring the version of an existing cluster.
ha_find_bin() {
    PG_BIN=""
    local ver
    ver="$(cat "$STATE_DIR"/node*/data/PG_VERSION 2>/dev/null | head -n 1 || true)"
    if [[ -n "$ver" && -x "/usr/lib/postgresql/$ver/bin/pg_ctl" ]]; then
        PG_BIN="/usr/lib/postgresql/$ver/bin"
    else
        PG_BIN="$(compgen -G '/usr/lib/postgresql/*/bin' | sort -V | tail -n 1 || true)"
    fi
    [[ -n "$PG_BIN" && -x "$PG_BIN/pg_ctl" && -x "$PG_BIN/psql" ]] ||
        ha_die "PostgreSQL server binaries not found under /usr/lib/postgresql"
    PSQL="$PG_BIN/psql"
}

ha_require_state() {
    [[ -f "$MARKER" ]] || ha_die "no cluster in $STATE_DIR (run: $0 start)"
}

# ------------------------------------------------------------- run as ----

# Run a command as the server user (postgres when root), from "/".
ha_as_server() {
    if (( ! IS_ROOT )); then
        (cd / && "$@")
    else
        (cd / && runuser -u "$SERVER_USER" -- "$@")
    fi
}

# Start a daemon as the server user in its own session, detached: stdin
# /dev/null, stdout+stderr appended to LOG, inherited descriptors above 2
# closed (callers may hold a pipe or our lock). The daemon's own pid (it
# execs) goes to PIDFILE.
ha_spawn() {
    local log="$1" pidfile="$2"
    shift 2
    local lang=C
    locale -a 2>/dev/null | grep -qiE '^c\.utf-?8$' && lang=C.UTF-8
    local envv=(env -i "PATH=$PG_BIN:/usr/local/bin:/usr/bin:/bin" "HOME=$STATE_DIR"
        "LANG=$lang" "LC_ALL=$lang" "TZ=UTC")
    # shellcheck disable=SC2016 # $$, $0 and $@ are the inner sh's
    local run=(sh -c 'echo $$ >"$0" && exec "$@"' "$pidfile" "$@")
    rm -f "$pidfile"
    (
        fds=()
        for fd in /proc/self/fd/*; do
            fd="${fd##*/}"
            [[ "$fd" =~ ^[0-9]+$ ]] && (( fd > 2 )) && fds+=("$fd")
        done
        for fd in "${fds[@]}"; do
            eval "exec ${fd}>&-" 2>/dev/null || true
        done
        cd /
        if (( ! IS_ROOT )); then
            exec setsid "${envv[@]}" "${run[@]}" </dev/null >>"$log" 2>&1
        elif command -v setpriv >/dev/null 2>&1; then
            exec setsid setpriv --reuid="$SERVER_USER" --regid="$SERVER_USER" --init-groups \
                "${envv[@]}" "${run[@]}" </dev/null >>"$log" 2>&1
        else
            exec setsid runuser -u "$SERVER_USER" -- "${envv[@]}" "${run[@]}" </dev/null >>"$log" 2>&1
        fi
    ) &
    local deadline=$(( $(ha_now_ms) + 10000 ))
    until [[ -s "$pidfile" ]]; do
        (( $(ha_now_ms) < deadline )) || ha_die "timed out after 10s waiting for $pidfile (see $log)"
        sleep 0.05
    done
    # The pid is the wrapper sh's until it execs the daemon; while the exec runs, the
    # process's cmdline may read empty. Wait for the daemon's own, so that the liveness checks
    # that follow (which match the cmdline) never see the wrapper or the exec half done.
    local pid first
    pid="$(tr -dc '0-9' <"$pidfile")"
    while kill -0 "$pid" 2>/dev/null; do
        first="$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -n 1)"
        [[ -n "$first" && "$first" != sh ]] && break
        (( $(ha_now_ms) < deadline )) || ha_die "timed out after 10s waiting for $pid to start $1 (see $log)"
        sleep 0.02
    done
}

# Pid from PIDFILE when that process is alive and its command line has PATTERN.
ha_pid_alive() {
    local pidfile="$1" pattern="$2" pid
    [[ -f "$pidfile" ]] || return 1
    pid="$(tr -dc '0-9' <"$pidfile")"
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$pattern" || return 1
    # A stopped-for-good (zombie) process does not count.
    [[ "$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$pid/stat" 2>/dev/null)" != Z ]] || return 1
    printf '%s' "$pid"
}

ha_etcd_pid() { ha_pid_alive "$ETCD_PID" "--data-dir $ETCD_DIR"; }
ha_patroni_pid() {
    local d
    d="$(ha_node_dir "$1")"
    ha_pid_alive "$d/patroni.pid" "$d/patroni.yml"
}

# Postmaster pid of a node's data directory, when it is running.
ha_postmaster_pid() {
    local d pid
    d="$(ha_node_dir "$1")/data"
    [[ -f "$d/postmaster.pid" ]] || return 1
    pid="$(head -n 1 "$d/postmaster.pid" | tr -dc '0-9')"
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$d" || return 1
    printf '%s' "$pid"
}

# Direct children of a pid (from /proc; comm may contain spaces).
ha_children() {
    local parent="$1" f line state ppid pid
    for f in /proc/[0-9]*/stat; do
        { read -r line <"$f"; } 2>/dev/null || continue
        # "pid (comm) state ppid ...": fields after the last ") ".
        read -r state ppid _ <<<"${line##*) }"
        if [[ "$ppid" == "$parent" && "$state" != Z ]]; then
            pid="${f#/proc/}"
            printf '%s\n' "${pid%/stat}"
        fi
    done
    return 0
}

ha_port_in_use() {
    timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

# GET http://127.0.0.1:PORT/PATH; body on stdout.
ha_http_get() {
    /usr/bin/python3 - "$1" <<'PY' 2>/dev/null
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
    sys.stdout.write(r.read().decode())
PY
}

# ---------------------------------------------------------- passwords ----

ha_ensure_password() {
    local f="$STATE_DIR/$1.password"
    if [[ ! -s "$f" ]]; then
        (umask 077 && receipts_pg_random_password >"$f.tmp" && mv "$f.tmp" "$f")
    fi
    chmod 600 "$f"
    (( IS_ROOT )) && chown "$SERVER_USER:" "$f"
    return 0
}

ha_password() {
    local f="$STATE_DIR/$1.password"
    [[ -r "$f" ]] || ha_die "cannot read $f (run: $0 destroy; $0 start)"
    tr -d '\n' <"$f"
}

ha_hosts() {
    local hosts="" node
    while read -r node; do
        hosts+="${hosts:+,}127.0.0.1:$(ha_node_port "$node")"
    done < <(ha_node_names)
    printf '%s' "$hosts"
}

ha_url() {
    printf 'postgresql://receipts:%s@%s/receipts?target_session_attrs=read-write' \
        "$(ha_password receipts)" "$(ha_hosts)"
}

# ---------------------------------------------------------------- SQL ----

# psql as Patroni's superuser on one node (by port); SQL from $2 or stdin.
# Tuples only, unaligned, "|" between columns. Bounded by connect_timeout and
# an overall timeout.
ha_sql_port() {
    local port="$1" sql="${2:-}" secs="${3:-15}"
    local args=(-X -q -A -t -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d postgres)
    if [[ -n "$sql" ]]; then
        PGPASSWORD="$(ha_password superuser)" PGCONNECT_TIMEOUT=2 PGAPPNAME=ha-cluster.sh \
            timeout "$secs" "$PSQL" "${args[@]}" -c "$sql"
    else
        PGPASSWORD="$(ha_password superuser)" PGCONNECT_TIMEOUT=2 PGAPPNAME=ha-cluster.sh \
            timeout "$secs" "$PSQL" "${args[@]}"
    fi
}

# A real write through the read-write multi-host URL (database postgres, as
# the superuser; a probe table there keeps "receipts" clean). On success sets
# WRITABLE_NODE and WRITABLE_PORT.
ha_probe_write() {
    local out port node
    out="$(PGPASSWORD="$(ha_password superuser)" PGCONNECT_TIMEOUT=2 PGAPPNAME=ha-cluster.sh \
        timeout 8 "$PSQL" -X -q -A -t -v ON_ERROR_STOP=1 \
        "postgresql://postgres@$(ha_hosts)/postgres?target_session_attrs=read-write" \
        -c "create table if not exists receipts_ha_probe (id int primary key, at timestamptz not null)" \
        -c "insert into receipts_ha_probe values (1, now()) on conflict (id) do update set at = excluded.at" \
        -c "select current_setting('port')" 2>/dev/null)" || return 1
    port="$(printf '%s' "$out" | tail -n 1 | tr -dc '0-9')"
    node="$(ha_port_node "$port")" || return 1
    WRITABLE_NODE="$node"
    WRITABLE_PORT="$port"
}

# Names of the nodes streaming from the node on PORT (one a line).
ha_streaming_from() {
    ha_sql_port "$1" "select application_name from pg_stat_replication where state = 'streaming' order by 1" 5 2>/dev/null
}

# ---------------------------------------------------------- patronictl ----

ha_ctl() {
    PYTHONWARNINGS=ignore timeout 60 patronictl -c "$CTL_CONF" "$@"
}

# patronictl with its output appended to LOG (LOG.last: this run only); the
# lines that matter are repeated on stderr.
ha_ctl_logged() {
    local log="$1" rc=0
    shift
    ha_ctl "$@" >"$log.last" 2>&1 || rc=$?
    cat "$log.last" >>"$log"
    grep -E 'Success|falling back to DCS|failed, details|^Error' "$log.last" | tail -n 3 |
        sed 's/^/patronictl: /' >&2 || true
    return "$rc"
}

# `patronictl list` as TSV rows: member role state host timeline (host is
# 127.0.0.1:port; timeline may be empty).
ha_members() {
    ha_ctl list -f tsv 2>/dev/null | awk -F'\t' '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        { print $col["Member"] "\t" $col["Role"] "\t" $col["State"] "\t" $col["Host"] "\t" $col["TL"] }'
}

# Patroni's leader (from etcd): sets DCS_LEADER / DCS_LEADER_PORT.
ha_dcs_leader() {
    local line
    line="$(ha_members | awk -F'\t' '$2 == "Leader" { print $1; exit }')" || return 1
    [[ -n "$line" ]] || return 1
    DCS_LEADER="$line"
    DCS_LEADER_PORT="$(ha_node_port "$line")"
}

# ------------------------------------------------------------- waiting ----

# ha_wait SECONDS "what" command...: run command until it succeeds; on timeout
# die naming what we waited for.
ha_wait() {
    local secs="$1" what="$2"
    shift 2
    local deadline=$(( $(ha_now_ms) + secs * 1000 ))
    while :; do
        "$@" && return 0
        if (( $(ha_now_ms) >= deadline )); then
            ha_die "timed out after ${secs}s waiting for $what"
        fi
        sleep 0.2
    done
}

# The nodes stream from the node on PORT (pg_stat_replication) and Patroni
# lists them as running replicas (so `status` agrees right after a wait).
ha_check_streaming() { # leader_port node...
    local port="$1" have n members
    shift
    have="$(ha_streaming_from "$port")" || return 1
    for n in "$@"; do
        grep -qx -- "$n" <<<"$have" || return 1
    done
    members="$(ha_members)" || return 1
    for n in "$@"; do
        awk -F'\t' -v n="$n" '$2 == "Leader" { tl = $5 } $1 == n && $2 != "Leader" && $3 == "running" { mtl = $5 }
            END { exit !(mtl != "" && mtl == tl) }' <<<"$members" || return 1
    done
}

# Leader accepts writes and every other node of the cluster streams from it.
ha_check_healthy() {
    ha_probe_write || return 1
    local others=() n
    while read -r n; do
        [[ "$n" != "$WRITABLE_NODE" ]] && others+=("$n")
    done < <(ha_node_names)
    (( ${#others[@]} == 0 )) || ha_check_streaming "$WRITABLE_PORT" "${others[@]}"
}

ha_wait_leader() {
    ha_wait "$1" "a leader that accepts writes on $(ha_hosts) (Patroni logs: $STATE_DIR/node*/patroni.log)" \
        ha_probe_write
}

# ---------------------------------------------------------------- lock ----

ha_lock() {
    exec {HA_LOCK_FD}>>"$LOCK_FILE"
    flock -w 300 "$HA_LOCK_FD" || ha_die "timed out after 300s waiting for the lock $LOCK_FILE"
}

# ---------------------------------------------------------- configure ----

ha_prepare_state() {
    if [[ -d "$STATE_DIR" && ! -f "$MARKER" ]] && [[ -n "$(ls -A "$STATE_DIR" 2>/dev/null)" ]]; then
        ha_die "$STATE_DIR exists, is not empty and is not a receipts HA state directory"
    fi
    if (( IS_ROOT )) && ! id -u "$SERVER_USER" >/dev/null 2>&1; then
        ha_log "creating system user $SERVER_USER"
        useradd --system --home /var/lib/postgresql "$SERVER_USER" >&2
    fi
    mkdir -p "$STATE_DIR"
    chmod 700 "$STATE_DIR"
    (( IS_ROOT )) && chown "$SERVER_USER:" "$STATE_DIR"
    if (( IS_ROOT )) && ! ha_as_server test -w "$STATE_DIR"; then
        ha_die "user $SERVER_USER cannot write to $STATE_DIR (choose another RECEIPTS_HA_DIR)"
    fi
    touch "$MARKER"
    local p
    for p in receipts superuser replication; do ha_ensure_password "$p"; done
    mkdir -p "$ETCD_DIR"
    chmod 700 "$ETCD_DIR"
    (( IS_ROOT )) && chown -R "$SERVER_USER:" "$ETCD_DIR" "$MARKER"
    return 0
}

ha_write_file() { # path (content on stdin), mode 600, owned by the server user
    local path="$1"
    (umask 077 && cat >"$path.tmp")
    (( IS_ROOT )) && chown "$SERVER_USER:" "$path.tmp"
    mv "$path.tmp" "$path"
}

ha_write_ctl_conf() {
    ha_write_file "$CTL_CONF" <<EOF
scope: $HA_SCOPE
namespace: $HA_NAMESPACE
etcd3:
  hosts: 127.0.0.1:$HA_ETCD_CLIENT_PORT
EOF
}

ha_write_node_conf() {
    local node="$1" d port rest locale=C
    d="$(ha_node_dir "$node")"
    port="$(ha_node_port "$node")"
    rest="$(ha_node_rest_port "$node")"
    locale -a 2>/dev/null | grep -qiE '^c\.utf-?8$' && locale=C.UTF-8
    mkdir -p "$d"
    chmod 700 "$d"
    (( IS_ROOT )) && chown "$SERVER_USER:" "$d"
    ha_write_file "$d/patroni.yml" <<EOF
# Written by scripts/ha-cluster.sh; rewritten on every start.
scope: $HA_SCOPE
namespace: $HA_NAMESPACE
name: $node

log:
  level: INFO
  format: '%(asctime)s %(levelname)s: %(message)s'

restapi:
  listen: 127.0.0.1:$rest
  connect_address: 127.0.0.1:$rest

etcd3:
  hosts: 127.0.0.1:$HA_ETCD_CLIENT_PORT

bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    maximum_lag_on_failover: 1048576
    synchronous_mode: false
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        max_connections: 200
        shared_buffers: 64MB
        wal_log_hints: 'on'
        fsync: 'on'
        synchronous_commit: 'on'
        full_page_writes: 'on'
        max_wal_size: 256MB
        wal_keep_size: 128MB
        max_wal_senders: 10
        max_replication_slots: 10
  initdb:
    - encoding: UTF8
    - locale: $locale

postgresql:
  listen: 127.0.0.1:$port
  connect_address: 127.0.0.1:$port
  data_dir: $d/data
  bin_dir: $PG_BIN
  pgpass: $d/pgpass
  authentication:
    superuser:
      username: postgres
      password: '$(ha_password superuser)'
    replication:
      username: replicator
      password: '$(ha_password replication)'
  parameters:
    unix_socket_directories: ''
    password_encryption: scram-sha-256
  pg_hba:
    - host replication replicator 127.0.0.1/32 scram-sha-256
    - host all all 127.0.0.1/32 scram-sha-256
  basebackup:
    - checkpoint: fast

watchdog:
  mode: 'off'

tags:
  nofailover: false
  noloadbalance: false
  clonefrom: false
  nosync: false
EOF
}

# ------------------------------------------------------------- daemons ----

ha_start_etcd() {
    if ha_etcd_pid >/dev/null; then
        return 0
    fi
    local p
    for p in "$HA_ETCD_CLIENT_PORT" "$HA_ETCD_PEER_PORT"; do
        ha_port_in_use "$p" && ha_die "port $p is in use by another process (etcd of this cluster is not running)"
    done
    ha_log "starting etcd on 127.0.0.1:$HA_ETCD_CLIENT_PORT (log: $ETCD_LOG)"
    touch "$ETCD_LOG"
    (( IS_ROOT )) && chown "$SERVER_USER:" "$ETCD_LOG"
    ha_spawn "$ETCD_LOG" "$ETCD_PID" "$(command -v etcd)" \
        --name receipts-ha --data-dir "$ETCD_DIR" \
        --listen-client-urls "http://127.0.0.1:$HA_ETCD_CLIENT_PORT" \
        --advertise-client-urls "http://127.0.0.1:$HA_ETCD_CLIENT_PORT" \
        --listen-peer-urls "http://127.0.0.1:$HA_ETCD_PEER_PORT" \
        --initial-advertise-peer-urls "http://127.0.0.1:$HA_ETCD_PEER_PORT" \
        --initial-cluster "receipts-ha=http://127.0.0.1:$HA_ETCD_PEER_PORT" \
        --initial-cluster-token receipts-ha --initial-cluster-state new \
        --auto-compaction-mode periodic --auto-compaction-retention 1h \
        --logger zap --log-outputs stderr
    ha_wait 30 "etcd to report healthy on 127.0.0.1:$HA_ETCD_CLIENT_PORT (log: $ETCD_LOG)" ha_etcd_healthy
}

ha_etcd_healthy() {
    ha_etcd_pid >/dev/null || { tail -n 20 "$ETCD_LOG" >&2; ha_die "etcd exited (log: $ETCD_LOG)"; }
    ha_http_get "http://127.0.0.1:$HA_ETCD_CLIENT_PORT/health" | grep -q '"health":"true"'
}

ha_require_etcd() {
    ha_etcd_pid >/dev/null || ha_die "the cluster is not running: etcd is down (run: $0 start)"
}

ha_start_node() {
    local node="$1" d
    d="$(ha_node_dir "$node")"
    ha_patroni_pid "$node" >/dev/null && return 0
    if ! ha_postmaster_pid "$node" >/dev/null; then
        local p
        for p in "$(ha_node_port "$node")" "$(ha_node_rest_port "$node")"; do
            ha_port_in_use "$p" && ha_die "port $p (for $node) is in use by another process"
        done
    fi
    ha_log "starting Patroni $node (PostgreSQL 127.0.0.1:$(ha_node_port "$node"), log: $d/patroni.log)"
    touch "$d/patroni.log"
    (( IS_ROOT )) && chown "$SERVER_USER:" "$d/patroni.log"
    ha_spawn "$d/patroni.log" "$d/patroni.pid" "$(command -v patroni)" "$d/patroni.yml"
}

# Wait for a daemon to exit; SIGKILL after the deadline.
ha_stop_pid() { # pid what seconds
    local pid="$1" what="$2" secs="$3"
    local deadline=$(( $(ha_now_ms) + secs * 1000 ))
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || return 0
    while kill -0 "$pid" 2>/dev/null; do
        if (( $(ha_now_ms) >= deadline )); then
            ha_log "$what (pid $pid) did not stop within ${secs}s; killing it"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.2
            return 0
        fi
        sleep 0.1
    done
}

ha_stop_node() {
    local node="$1" pid d
    d="$(ha_node_dir "$node")"
    if pid="$(ha_patroni_pid "$node")"; then
        ha_log "stopping Patroni $node"
        ha_stop_pid "$pid" "Patroni $node" 60
    fi
    # A postmaster left without its Patroni (e.g. Patroni was killed alone).
    if pid="$(ha_postmaster_pid "$node")"; then
        ha_log "stopping PostgreSQL of $node (no Patroni)"
        ha_as_server "$PG_BIN/pg_ctl" -D "$d/data" -m fast -w -t 60 stop >&2 ||
            kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$d/patroni.pid"
}

ha_do_stop() {
    local node leader=""
    [[ -f "$MARKER" ]] || return 0
    ha_find_bin
    if ha_etcd_pid >/dev/null && ha_dcs_leader 2>/dev/null; then
        leader="$DCS_LEADER"
    fi
    # Replicas first (together), the leader last: no failover while stopping.
    local pid replicas=()
    while read -r node; do
        [[ "$node" == "$leader" ]] && continue
        replicas+=("$node")
        if pid="$(ha_patroni_pid "$node")"; then
            kill -CONT "$pid" 2>/dev/null || true
            kill -TERM "$pid" 2>/dev/null || true
        fi
    done < <(ha_node_names)
    for node in "${replicas[@]}"; do ha_stop_node "$node"; done
    if [[ -n "$leader" ]]; then ha_stop_node "$leader"; fi
    if pid="$(ha_etcd_pid)"; then
        ha_log "stopping etcd"
        ha_stop_pid "$pid" etcd 30
    fi
    rm -f "$ETCD_PID"
}

# ------------------------------------------------------- bootstrapping ----

# Role receipts (+ password) and database receipts.
ha_ensure_roles() {
    local port="$1" pw
    pw="$(ha_password receipts)"
    ha_sql_port "$port" <<EOF >/dev/null
SET synchronous_commit = local;
DO \$\$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'receipts') THEN
        ALTER ROLE receipts WITH LOGIN SUPERUSER PASSWORD '$pw';
    ELSE
        CREATE ROLE receipts WITH LOGIN SUPERUSER PASSWORD '$pw';
    END IF;
END
\$\$;
SELECT 'CREATE DATABASE receipts OWNER receipts'
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'receipts') \gexec
EOF
}

# Undo a cut-replication that lossy-failover did not consume: give the cut
# primary its pg_hba.conf back (and reload it when it runs). Replicas'
# walreceivers reconnect within wal_retrieve_retry_interval (5 s).
ha_heal_cut() {
    [[ -f "$CUT_FILE" ]] || return 0
    local node port
    node="$(sed -n 's/^leader=//p' "$CUT_FILE")"
    if [[ -f "$STATE_DIR/cut.pg_hba.conf" ]]; then
        ha_log "healing cut-replication: restoring $node's pg_hba.conf"
        ha_restore_hba "$node"
        if ha_postmaster_pid "$node" >/dev/null; then
            port="$(ha_node_port "$node")"
            ha_sql_port "$port" "select pg_reload_conf()" >/dev/null ||
                ha_die "cannot reload the configuration of $node"
        fi
    fi
    rm -f "$CUT_FILE" "$STATE_DIR/cut.pg_hba.conf"
}

ha_restore_hba() {
    local hba
    hba="$(ha_node_dir "$1")/data/pg_hba.conf"
    [[ -f "$STATE_DIR/cut.pg_hba.conf" && -f "$hba" ]] || return 0
    ha_write_file "$hba" <"$STATE_DIR/cut.pg_hba.conf"
}

ha_do_start() {
    local want="$1"
    ha_ensure_packages
    ha_init_paths
    ha_prepare_state
    ha_lock
    ha_find_bin
    local have
    have="$(ha_node_count)"
    if [[ -z "$want" ]]; then
        want="${have:-0}"
        (( want > 0 )) || want="$HA_DEFAULT_NODES"
    fi
    if (( have > want )); then
        ha_die "the cluster has $have nodes; to run $want, run: $0 destroy; $0 start --nodes $want"
    fi
    printf '%s\n' "$want" >"$NODES_FILE"

    ha_write_ctl_conf
    local node
    while read -r node; do ha_write_node_conf "$node"; done < <(ha_node_names)

    ha_start_etcd

    local initialized=0
    ha_ctl list -f tsv 2>/dev/null | awk -F'\t' 'NR > 1' | grep -q . && initialized=1
    [[ -f "$(ha_node_dir node1)/data/PG_VERSION" ]] && initialized=1
    if (( ! initialized )); then
        # First start: node1 bootstraps alone, so it is the first leader.
        ha_start_node node1
        ha_wait 120 "node1 to bootstrap the cluster and accept writes (log: $(ha_node_dir node1)/patroni.log)" \
            ha_probe_write
    fi
    while read -r node; do ha_start_node "$node"; done < <(ha_node_names)

    ha_wait 120 "a leader that accepts writes (logs: $STATE_DIR/node*/patroni.log)" ha_probe_write
    ha_heal_cut
    ha_ensure_roles "$WRITABLE_PORT"
    ha_wait 180 "every node to be a streaming replica of the leader (logs: $STATE_DIR/node*/patroni.log)" \
        ha_check_healthy
    ha_log "leader $WRITABLE_NODE ($WRITABLE_PORT); $(( want - 1 )) streaming replica(s)"
}

# --------------------------------------------------------------- crash ----

# SIGKILL a node's Patroni and every process of its PostgreSQL (all stopped
# first, so none of them acts in between). Sets KILL_TIME.
ha_kill_node() {
    local node="$1" pids=() pid pm c
    if pid="$(ha_patroni_pid "$node")"; then
        pids+=("$pid")
        while read -r c; do [[ -n "$c" ]] && pids+=("$c"); done < <(ha_children "$pid")
    fi
    if pm="$(ha_postmaster_pid "$node")"; then
        pids+=("$pm")
        while read -r c; do [[ -n "$c" ]] && pids+=("$c"); done < <(ha_children "$pm")
    fi
    (( ${#pids[@]} > 0 )) || ha_die "$node has no running Patroni or PostgreSQL to kill"
    kill -STOP "${pids[@]}" 2>/dev/null || true
    KILL_TIME="$(date +%s.%N)"
    kill -KILL "${pids[@]}" 2>/dev/null || true
    local deadline=$(( $(ha_now_ms) + 10000 ))
    for pid in "${pids[@]}"; do
        while kill -0 "$pid" 2>/dev/null && [[ "$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$pid/stat" 2>/dev/null)" != Z ]]; do
            (( $(ha_now_ms) < deadline )) || ha_die "timed out after 10s waiting for pid $pid of $node to die"
            sleep 0.02
        done
    done
    rm -f "$(ha_node_dir "$node")/patroni.pid"
    ha_log "killed $node (${#pids[@]} processes: Patroni and PostgreSQL)"
}

# Pick the current leader for crash/cut commands (Patroni's view, running).
ha_require_leader() {
    ha_dcs_leader || ha_die "the cluster has no leader (see: $0 status)"
}

# ---------------------------------------------------------------- main ----

ha_usage() {
    cat >&2 <<EOF
usage: $0 start [--nodes N] | url | status | leader | wait-leader [seconds]
       | switchover | crash-primary | revive NODE | sync on|off
       | cut-replication | lossy-failover | stop | destroy
EOF
}

ha_main() {
    local cmd="${1:-}"
    [[ $# -gt 0 ]] && shift
    case "$cmd" in
        start)
            local nodes=""
            while [[ $# -gt 0 ]]; do
                case "$1" in
                    --nodes) [[ $# -ge 2 ]] || ha_die "--nodes needs a number"; nodes="$2"; shift 2 ;;
                    --nodes=*) nodes="${1#--nodes=}"; shift ;;
                    *) ha_usage; return 2 ;;
                esac
            done
            if [[ -n "$nodes" ]] && { [[ ! "$nodes" =~ ^[1-9]$ ]] || (( nodes > HA_MAX_NODES )); }; then
                ha_die "--nodes must be 1..$HA_MAX_NODES"
            fi
            ha_do_start "$nodes"
            printf 'DATABASE_URL=%s\n' "$(ha_url)"
            ;;
        url)
            ha_init_paths
            ha_require_state
            ha_require_etcd
            printf '%s\n' "$(ha_url)"
            ;;
        status)
            ha_init_paths
            ha_require_state
            ha_require_etcd
            ha_ctl list
            ;;
        leader)
            ha_init_paths
            ha_require_state
            ha_require_etcd
            ha_require_leader
            printf '%s %s\n' "$DCS_LEADER" "$DCS_LEADER_PORT"
            ;;
        wait-leader)
            local secs="${1:-60}"
            [[ "$secs" =~ ^[0-9]+$ ]] || ha_die "wait-leader: seconds must be a number"
            ha_init_paths
            ha_require_state
            ha_find_bin
            ha_wait_leader "$secs"
            printf '%s %s\n' "$WRITABLE_NODE" "$WRITABLE_PORT"
            ;;
        switchover)
            ha_init_paths
            ha_require_state
            ha_require_etcd
            ha_lock
            ha_find_bin
            ha_heal_cut
            ha_require_leader
            local old="$DCS_LEADER" candidate=""
            ha_wait 30 "a streaming replica of $old to switch over to" ha_pick_candidate "$old" "$DCS_LEADER_PORT"
            candidate="$CANDIDATE"
            ha_log "switchover from $old to $candidate"
            ha_ctl_logged "$STATE_DIR/patronictl.log" switchover --leader "$old" --candidate "$candidate" --force ||
                ha_die "patronictl switchover failed (see $STATE_DIR/patronictl.log)"
            grep -q 'Successfully switched over' "$STATE_DIR/patronictl.log.last" ||
                ha_die "patronictl switchover did not succeed (see $STATE_DIR/patronictl.log)"
            ha_wait 60 "$candidate to accept writes after the switchover" ha_check_writable_node "$candidate"
            # The old primary and every other running node follow the new leader.
            local followers=("$old") n
            while read -r n; do
                [[ "$n" != "$old" && "$n" != "$candidate" ]] && ha_patroni_pid "$n" >/dev/null && followers+=("$n")
            done < <(ha_node_names)
            ha_wait 90 "${followers[*]} to stream from $candidate after the switchover (logs: $STATE_DIR/node*/patroni.log)" \
                ha_check_streaming "$(ha_node_port "$candidate")" "${followers[@]}"
            if ha_sync_mode_on; then
                ha_wait 30 "a replica listed as Sync Standby after the switchover" ha_check_sync yes
            fi
            printf '%s %s\n' "$candidate" "$(ha_node_port "$candidate")"
            ;;
        crash-primary)
            ha_init_paths
            ha_require_state
            ha_require_etcd
            ha_find_bin
            ha_require_leader
            ha_kill_node "$DCS_LEADER"
            printf '%s %s\n' "$DCS_LEADER" "$KILL_TIME"
            ;;
        revive)
            [[ $# -eq 1 ]] || { ha_usage; return 2; }
            local node="$1"
            ha_init_paths
            ha_require_state
            ha_require_etcd
            ha_lock
            ha_find_bin
            ha_node_index "$node" >/dev/null
            (( $(ha_node_index "$node") <= $(ha_node_count) )) || ha_die "$node is not part of the cluster"
            ha_heal_cut
            local d start_at
            d="$(ha_node_dir "$node")"
            start_at="$(stat -c %s "$d/patroni.log" 2>/dev/null || echo 0)"
            if ha_patroni_pid "$node" >/dev/null; then
                ha_log "$node's Patroni is already running"
            else
                ha_write_node_conf "$node"
                ha_start_node "$node"
            fi
            ha_wait 180 "$node to be a streaming replica (log: $d/patroni.log)" ha_check_revived "$node"
            if ha_sync_mode_on; then
                ha_wait 30 "a replica listed as Sync Standby (synchronous_mode is on)" ha_check_sync yes
            fi
            if tail -c +"$(( start_at + 1 ))" "$d/patroni.log" | grep -q 'running pg_rewind'; then
                ha_log "$node: pg_rewind ran"
            fi
            ;;
        sync)
            [[ $# -eq 1 && ( "$1" == on || "$1" == off ) ]] || { ha_usage; return 2; }
            ha_init_paths
            ha_require_state
            ha_require_etcd
            ha_lock
            local value=false
            [[ "$1" == on ]] && value=true
            ha_ctl edit-config --force --quiet -s "synchronous_mode=$value" >&2 ||
                ha_die "patronictl edit-config failed"
            if [[ "$1" == on ]]; then
                ha_wait 60 "a replica listed as Sync Standby by patronictl list" ha_check_sync yes
            else
                ha_wait 60 "no replica listed as Sync Standby by patronictl list" ha_check_sync no
            fi
            ;;
        cut-replication)
            ha_init_paths
            ha_require_state
            ha_require_etcd
            ha_lock
            ha_find_bin
            ha_do_cut
            ;;
        lossy-failover)
            ha_init_paths
            ha_require_state
            ha_require_etcd
            ha_lock
            ha_find_bin
            ha_do_lossy_failover
            printf '%s %s\n' "$WRITABLE_NODE" "$WRITABLE_PORT"
            ;;
        stop)
            ha_init_paths
            [[ -f "$MARKER" ]] || { ha_log "no cluster in $STATE_DIR"; return 0; }
            ha_lock
            ha_do_stop
            ;;
        destroy)
            ha_init_paths
            if [[ ! -e "$STATE_DIR" ]]; then
                ha_log "nothing to destroy: $STATE_DIR does not exist"
                return 0
            fi
            [[ -f "$MARKER" ]] || ha_die "$STATE_DIR is not a receipts HA state directory; not deleting it"
            ha_lock
            # The data goes, so no clean shutdown: SIGKILL every daemon of ours.
            ha_kill_leftovers
            ha_log "deleting $STATE_DIR"
            rm -rf -- "$STATE_DIR"
            ;;
        *)
            ha_usage
            return 2
            ;;
    esac
}

# Sets CANDIDATE to a replica streaming from the leader (old, port): the Sync
# Standby in synchronous mode (Patroni only switches over to it), else the
# first one by name.
ha_pick_candidate() {
    local streaming sync
    streaming="$(ha_streaming_from "$2" | grep -E '^node[0-9]+$')" || return 1
    sync="$(ha_members | awk -F'\t' '$2 == "Sync Standby" { print $1; exit }')" || true
    if [[ -n "$sync" ]] && grep -qx -- "$sync" <<<"$streaming"; then
        CANDIDATE="$sync"
    else
        CANDIDATE="$(head -n 1 <<<"$streaming")"
    fi
    [[ -n "$CANDIDATE" && "$CANDIDATE" != "$1" ]]
}

ha_check_writable_node() {
    ha_probe_write && [[ "$WRITABLE_NODE" == "$1" ]]
}

ha_check_revived() {
    local node="$1"
    ha_patroni_pid "$node" >/dev/null || {
        tail -n 30 "$(ha_node_dir "$node")/patroni.log" >&2
        ha_die "Patroni $node exited (log: $(ha_node_dir "$node")/patroni.log)"
    }
    ha_probe_write || return 1
    if [[ "$WRITABLE_NODE" == "$node" ]]; then
        ha_log "note: $node is the leader (revived before its leader key expired, or never down)"
        return 0
    fi
    ha_check_streaming "$WRITABLE_PORT" "$node"
}

ha_sync_mode_on() {
    ha_ctl show-config 2>/dev/null | grep -qE '^synchronous_mode: *true'
}

ha_check_sync() { # yes|no
    local n
    n="$(ha_members | awk -F'\t' '$2 == "Sync Standby"' | wc -l)"
    if [[ "$1" == yes ]]; then (( n > 0 )); else (( n == 0 )); fi
}

# SIGKILL every process of ours (Patroni and its children, postmasters and
# their children, etcd) and wait until they are gone.
ha_kill_leftovers() {
    local pids=() pid node c d
    for d in "$STATE_DIR"/node*; do
        [[ -d "$d" ]] || continue
        node="${d##*/}"
        [[ "$node" =~ ^node[0-9]+$ ]] || continue
        for pid in "$(ha_patroni_pid "$node" || true)" "$(ha_postmaster_pid "$node" || true)"; do
            [[ -n "$pid" ]] || continue
            pids+=("$pid")
            while read -r c; do [[ -n "$c" ]] && pids+=("$c"); done < <(ha_children "$pid")
        done
    done
    pid="$(ha_etcd_pid || true)"
    [[ -n "$pid" ]] && pids+=("$pid")
    (( ${#pids[@]} > 0 )) || return 0
    ha_log "killing ${#pids[@]} processes (Patroni, PostgreSQL, etcd)"
    kill -STOP "${pids[@]}" 2>/dev/null || true
    kill -KILL "${pids[@]}" 2>/dev/null || true
    local deadline=$(( $(ha_now_ms) + 10000 ))
    for pid in "${pids[@]}"; do
        while kill -0 "$pid" 2>/dev/null && [[ "$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$pid/stat" 2>/dev/null)" != Z ]]; do
            (( $(ha_now_ms) < deadline )) || ha_die "timed out after 10s waiting for pid $pid to die"
            sleep 0.02
        done
    done
}

ha_check_replayed() { # leader_port lsn node...
    local port="$1" lsn="$2" have n
    shift 2
    have="$(ha_sql_port "$port" "select application_name from pg_stat_replication
        where replay_lsn >= '$lsn'::pg_lsn order by 1" 5 2>/dev/null)" || return 1
    for n in "$@"; do grep -qx -- "$n" <<<"$have" || return 1; done
}

ha_check_no_walsender() { # leader_port
    local n
    n="$(ha_sql_port "$1" "select count(*) from pg_stat_replication
        where application_name ~ '^node[0-9]+\$'" 5 2>/dev/null)" || return 1
    [[ "$n" == 0 ]]
}

# Succeeds when the server on PORT refuses a replication connection by pg_hba
# (proof that the postmaster has loaded the reject rule).
ha_check_replication_refused() {
    local out
    out="$(PGPASSWORD="$(ha_password replication)" PGCONNECT_TIMEOUT=2 timeout 8 "$PSQL" -X -q -A -t \
        "host=127.0.0.1 port=$1 user=replicator dbname=postgres replication=true" \
        -c "IDENTIFY_SYSTEM" 2>&1)" && return 1
    grep -q 'pg_hba.conf rejects replication connection' <<<"$out"
}

ha_do_cut() {
    [[ ! -f "$CUT_FILE" ]] || ha_die "replication is already cut (see $CUT_FILE); run lossy-failover or start"
    ha_require_leader
    local leader="$DCS_LEADER" port="$DCS_LEADER_PORT" replicas=() n lsn hba
    while read -r n; do [[ "$n" != "$leader" ]] && replicas+=("$n"); done < <(ha_node_names)
    (( ${#replicas[@]} > 0 )) || ha_die "cut-replication needs at least one replica"
    ha_wait 30 "replicas ${replicas[*]} to stream from $leader" ha_check_streaming "$port" "${replicas[@]}"
    lsn="$(ha_sql_port "$port" "select pg_current_wal_lsn()")" || ha_die "cannot query $leader"
    ha_wait 30 "replicas ${replicas[*]} to replay $leader's WAL up to $lsn" \
        ha_check_replayed "$port" "$lsn" "${replicas[@]}"
    # Refuse every replication connection on the primary (a local file: it is
    # not replicated, and Patroni writes pg_hba.conf anew whenever it starts
    # PostgreSQL, so a revived old primary gets the normal one back).
    hba="$(ha_node_dir "$leader")/data/pg_hba.conf"
    [[ -f "$hba" ]] || ha_die "$hba not found"
    cp "$hba" "$STATE_DIR/cut.pg_hba.conf"
    printf 'leader=%s\nreplayed_lsn=%s\n' "$leader" "$lsn" >"$CUT_FILE"
    { printf '# cut-replication (scripts/ha-cluster.sh): no replication connections\n'
      printf 'host replication all all reject\n'
      cat "$STATE_DIR/cut.pg_hba.conf"; } | ha_write_file "$hba"
    ha_sql_port "$port" "select pg_reload_conf()" >/dev/null || ha_die "cannot reload the configuration of $leader"
    ha_wait 10 "$leader to refuse replication connections (pg_hba.conf reloaded)" \
        ha_check_replication_refused "$port"
    ha_sql_port "$port" "select pg_terminate_backend(pid) from pg_stat_replication
        where application_name ~ '^node[0-9]+\$'" >/dev/null || ha_die "cannot terminate walsenders on $leader"
    ha_wait 10 "the walsenders of $leader to exit" ha_check_no_walsender "$port"
    local cut_lsn
    cut_lsn="$(ha_sql_port "$port" "select pg_current_wal_lsn()")" || ha_die "cannot query $leader"
    printf 'cut_lsn=%s\n' "$cut_lsn" >>"$CUT_FILE"
    ha_log "replication from $leader cut (replicas had replayed $lsn; primary at $cut_lsn; replicas: ${replicas[*]})"
}

# Patroni lists NODE as a running Leader (its member key is up to date).
ha_check_listed_leader() {
    ha_members | awk -F'\t' -v n="$1" '$1 == n && $2 == "Leader" && $3 == "running" && $5 != "" { ok = 1 }
        END { exit !ok }'
}

ha_do_lossy_failover() {
    [[ -f "$CUT_FILE" ]] || ha_die "lossy-failover: run cut-replication first"
    ha_require_leader
    local old="$DCS_LEADER" cut_leader candidate="" n
    cut_leader="$(sed -n 's/^leader=//p' "$CUT_FILE")"
    [[ "$old" == "$cut_leader" ]] ||
        ha_die "lossy-failover: the leader is $old, but replication was cut on $cut_leader"
    while read -r n; do
        [[ "$n" != "$old" ]] && ha_patroni_pid "$n" >/dev/null && { candidate="$n"; break; }
    done < <(ha_node_names)
    [[ -n "$candidate" ]] || ha_die "lossy-failover: no running replica to promote"
    ha_kill_node "$old"
    # The dead node's files: its normal pg_hba.conf back (Patroni would rewrite
    # it at the next start anyway).
    ha_restore_hba "$old"
    rm -f "$CUT_FILE" "$STATE_DIR/cut.pg_hba.conf"
    ha_log "failover to $candidate (patronictl failover --candidate $candidate --force)"
    # The dead leader's REST API refuses, so patronictl writes the failover key
    # into etcd itself ("falling back to DCS"; its traceback goes to the log).
    ha_ctl_logged "$STATE_DIR/patronictl.log" failover --candidate "$candidate" --force ||
        ha_die "patronictl failover failed (see $STATE_DIR/patronictl.log)"
    grep -qE 'Successfully failed over|falling back to DCS' "$STATE_DIR/patronictl.log.last" ||
        ha_die "patronictl failover did not start a failover (see $STATE_DIR/patronictl.log)"
    ha_wait 60 "$candidate to accept writes after the failover (log: $(ha_node_dir "$candidate")/patroni.log)" \
        ha_check_writable_node "$candidate"
    ha_wait 30 "patronictl list to show $candidate as the running leader" ha_check_listed_leader "$candidate"
    # Other running replicas (3+ nodes) follow the new leader.
    local followers=()
    while read -r n; do
        [[ "$n" != "$old" && "$n" != "$candidate" ]] && ha_patroni_pid "$n" >/dev/null && followers+=("$n")
    done < <(ha_node_names)
    if (( ${#followers[@]} > 0 )); then
        ha_wait 60 "${followers[*]} to stream from $candidate (logs: $STATE_DIR/node*/patroni.log)" \
            ha_check_streaming "$WRITABLE_PORT" "${followers[@]}"
    fi
    ha_probe_write || ha_die "$candidate stopped accepting writes"
}

ha_main "$@"
