# shellcheck shell=bash
# What the failover tests do to the cluster: leader, wait-leader, switchover, crash-primary,
# revive, sync on|off, cut-replication (and its heal), lossy-failover.

ha_cmd_leader() {
    ha_need state etcd
    ha_require_leader
    printf '%s %s\n' "$DCS_LEADER" "$DCS_LEADER_PORT"
}

ha_cmd_wait_leader() {
    local secs="${1:-60}"
    [[ "$secs" =~ ^[0-9]+$ ]] || ha_die "wait-leader: seconds must be a number"
    ha_need state bin
    ha_wait_leader "$secs"
    printf '%s %s\n' "$WRITABLE_NODE" "$WRITABLE_PORT"
}

# ha_wait_followers LEADER WHEN NODE...: wait until the nodes stream from LEADER.
ha_wait_followers() {
    local leader="$1" when="$2"
    shift 2
    (( $# > 0 )) || return 0
    ha_wait 90 "$* to stream from $leader $when (logs: $STATE_DIR/node*/patroni.log)" \
        ha_check_streaming "$(ha_node_port "$leader")" "$@"
}

# In synchronous mode, wait until patronictl lists a Sync Standby again.
ha_wait_sync_standby() {
    if ha_sync_mode_on; then
        ha_wait 30 "a replica listed as Sync Standby $1" ha_check_sync yes
    fi
}

# Sets CANDIDATE to a replica streaming from the leader (OLD, on PORT): the Sync Standby in
# synchronous mode (Patroni only switches over to it), else the first one by name.
ha_pick_candidate() {
    local streaming sync
    streaming="$(ha_streaming_from "$2" | grep -E '^node[0-9]+$')" || return 1
    sync="$(ha_members | ha_member_with_role "Sync Standby")" || true
    if [[ -n "$sync" ]] && grep -qx -- "$sync" <<<"$streaming"; then
        CANDIDATE="$sync"
    else
        CANDIDATE="$(head -n 1 <<<"$streaming")"
    fi
    [[ -n "$CANDIDATE" && "$CANDIDATE" != "$1" ]]
}

ha_cmd_switchover() {
    ha_need state etcd lock bin
    ha_heal_cut
    ha_require_leader
    local old="$DCS_LEADER" candidate others
    ha_wait 30 "a streaming replica of $old to switch over to" ha_pick_candidate "$old" "$DCS_LEADER_PORT"
    candidate="$CANDIDATE"
    ha_log "switchover from $old to $candidate"
    ha_ctl_logged switchover --leader "$old" --candidate "$candidate" --force ||
        ha_die "patronictl switchover failed (see $CTL_LOG)"
    grep -q 'Successfully switched over' "$CTL_LOG.last" ||
        ha_die "patronictl switchover did not succeed (see $CTL_LOG)"
    ha_wait 60 "$candidate to accept writes after the switchover" ha_check_writable_node "$candidate"
    # The old primary and every other running node follow the new leader.
    mapfile -t others < <(ha_running_nodes "$old" "$candidate")
    ha_wait_followers "$candidate" "after the switchover" "$old" "${others[@]}"
    ha_wait_sync_standby "after the switchover"
    printf '%s %s\n' "$candidate" "$(ha_node_port "$candidate")"
}

# SIGKILL NODE's Patroni and every process of its PostgreSQL; sets KILL_TIME.
ha_kill_node() {
    local pids
    mapfile -t pids < <(ha_node_pids "$1")
    (( ${#pids[@]} > 0 )) || ha_die "$1 has no running Patroni or PostgreSQL to kill"
    ha_kill_pids "${pids[@]}"
    rm -f "$(ha_node_dir "$1")/patroni.pid"
    ha_log "killed $1 (${#pids[@]} processes: Patroni and PostgreSQL)"
}

ha_cmd_crash_primary() {
    ha_need state etcd bin
    ha_require_leader
    ha_kill_node "$DCS_LEADER"
    printf '%s %s\n' "$DCS_LEADER" "$KILL_TIME"
}

# NODE runs and streams from the leader (or is the leader: revived before its key expired).
ha_check_revived() {
    local node="$1" log
    log="$(ha_node_dir "$node")/patroni.log"
    ha_patroni_pid "$node" >/dev/null || { tail -n 30 "$log" >&2; ha_die "Patroni $node exited (log: $log)"; }
    ha_probe_write || return 1
    if [[ "$WRITABLE_NODE" == "$node" ]]; then
        ha_log "note: $node is the leader (revived before its leader key expired, or never down)"
        return 0
    fi
    ha_check_streaming "$WRITABLE_PORT" "$node"
}

ha_cmd_revive() {
    [[ $# -eq 1 ]] || { ha_usage; return 2; }
    local node="$1" index log start_at
    ha_need state etcd lock bin
    index="$(ha_node_index "$node")"
    (( index <= $(ha_node_count) )) || ha_die "$node is not part of the cluster"
    ha_heal_cut
    log="$(ha_node_dir "$node")/patroni.log"
    start_at="$(stat -c %s "$log" 2>/dev/null || echo 0)"
    if ha_patroni_pid "$node" >/dev/null; then
        ha_log "$node's Patroni is already running"
    else
        ha_write_node_conf "$node"
        ha_start_node "$node"
    fi
    ha_wait 180 "$node to be a streaming replica (log: $log)" ha_check_revived "$node"
    ha_wait_sync_standby "(synchronous_mode is on)"
    if tail -c +"$(( start_at + 1 ))" "$log" | grep -q 'running pg_rewind'; then
        ha_log "$node: pg_rewind ran"
    fi
}

ha_cmd_sync() {
    [[ $# -eq 1 && ( "$1" == on || "$1" == off ) ]] || { ha_usage; return 2; }
    ha_need state etcd lock
    local value=true want=yes what="a replica"
    if [[ "$1" == off ]]; then value=false want=no what="no replica"; fi
    ha_ctl edit-config --force --quiet -s "synchronous_mode=$value" >&2 || ha_die "patronictl edit-config failed"
    ha_wait 60 "$what listed as Sync Standby by patronictl list" ha_check_sync "$want"
}

# ------------------------------------------------------ cut-replication ----

# ha_check_replayed LEADER-PORT LSN NODE...: the nodes have replayed the leader's WAL to LSN.
ha_check_replayed() {
    local port="$1" lsn="$2" n names=""
    shift 2
    for n in "$@"; do names+="${names:+,}'$n'"; done
    ha_sql_true "$port" "select count(distinct application_name) = $# from pg_stat_replication
        where replay_lsn >= '$lsn'::pg_lsn and application_name in ($names)"
}

# The server on PORT refuses a replication connection by pg_hba (proof that the postmaster
# has loaded the reject rule).
ha_check_replication_refused() {
    local out
    out="$(ha_psql replication 8 "host=127.0.0.1 port=$1 user=replicator dbname=postgres replication=true" \
        -c "IDENTIFY_SYSTEM" 2>&1)" && return 1
    grep -q 'pg_hba.conf rejects replication connection' <<<"$out"
}

ha_cmd_cut_replication() {
    ha_need state etcd lock bin
    [[ ! -f "$CUT_FILE" ]] || ha_die "replication is already cut (see $CUT_FILE); run lossy-failover or start"
    ha_require_leader
    local leader="$DCS_LEADER" port="$DCS_LEADER_PORT" replicas lsn cut_lsn hba
    mapfile -t replicas < <(ha_node_names "$leader")
    (( ${#replicas[@]} > 0 )) || ha_die "cut-replication needs at least one replica"
    ha_wait 30 "replicas ${replicas[*]} to stream from $leader" ha_check_streaming "$port" "${replicas[@]}"
    lsn="$(ha_sql_port "$port" "select pg_current_wal_lsn()")" || ha_die "cannot query $leader"
    ha_wait 30 "replicas ${replicas[*]} to replay $leader's WAL up to $lsn" \
        ha_check_replayed "$port" "$lsn" "${replicas[@]}"
    # Refuse every replication connection on the primary (a local file: it is not
    # replicated, and Patroni writes pg_hba.conf anew whenever it starts PostgreSQL, so a
    # revived old primary gets the normal one back).
    hba="$(ha_node_dir "$leader")/data/pg_hba.conf"
    [[ -f "$hba" ]] || ha_die "$hba not found"
    cp "$hba" "$CUT_HBA"
    printf 'leader=%s\nreplayed_lsn=%s\n' "$leader" "$lsn" >"$CUT_FILE"
    { printf '# cut-replication (scripts/ha-cluster.sh): no replication connections\n'
      printf 'host replication all all reject\n'
      cat "$CUT_HBA"; } | ha_write_file "$hba"
    ha_sql_port "$port" "select pg_reload_conf()" >/dev/null || ha_die "cannot reload the configuration of $leader"
    ha_wait 10 "$leader to refuse replication connections (pg_hba.conf reloaded)" \
        ha_check_replication_refused "$port"
    ha_sql_port "$port" "select pg_terminate_backend(pid) from pg_stat_replication
        where application_name ~ '^node[0-9]+\$'" >/dev/null || ha_die "cannot terminate walsenders on $leader"
    ha_wait 10 "the walsenders of $leader to exit" ha_sql_true "$port" \
        "select count(*) = 0 from pg_stat_replication where application_name ~ '^node[0-9]+\$'"
    cut_lsn="$(ha_sql_port "$port" "select pg_current_wal_lsn()")" || ha_die "cannot query $leader"
    printf 'cut_lsn=%s\n' "$cut_lsn" >>"$CUT_FILE"
    ha_log "replication from $leader cut (replicas had replayed $lsn; primary at $cut_lsn; replicas: ${replicas[*]})"
}

# The cut primary NODE's own pg_hba.conf back in its data directory.
ha_restore_hba() {
    local hba
    hba="$(ha_node_dir "$1")/data/pg_hba.conf"
    [[ -f "$CUT_HBA" && -f "$hba" ]] || return 0
    ha_write_file "$hba" <"$CUT_HBA"
}

# Undo a cut-replication that lossy-failover did not consume: give the cut primary its
# pg_hba.conf back (and reload it when it runs). Replicas' walreceivers reconnect within
# wal_retrieve_retry_interval (5 s).
ha_heal_cut() {
    [[ -f "$CUT_FILE" ]] || return 0
    local node
    node="$(sed -n 's/^leader=//p' "$CUT_FILE")"
    if [[ -f "$CUT_HBA" ]]; then
        ha_log "healing cut-replication: restoring $node's pg_hba.conf"
        ha_restore_hba "$node"
        if ha_postmaster_pid "$node" >/dev/null; then
            ha_sql_port "$(ha_node_port "$node")" "select pg_reload_conf()" >/dev/null ||
                ha_die "cannot reload the configuration of $node"
        fi
    fi
    rm -f "$CUT_FILE" "$CUT_HBA"
}

# ------------------------------------------------------- lossy-failover ----

ha_cmd_lossy_failover() {
    ha_need state etcd lock bin
    [[ -f "$CUT_FILE" ]] || ha_die "lossy-failover: run cut-replication first"
    ha_require_leader
    local old="$DCS_LEADER" cut_leader candidate others
    cut_leader="$(sed -n 's/^leader=//p' "$CUT_FILE")"
    [[ "$old" == "$cut_leader" ]] ||
        ha_die "lossy-failover: the leader is $old, but replication was cut on $cut_leader"
    mapfile -t others < <(ha_running_nodes "$old")   # not `| head`: SIGPIPE under pipefail
    (( ${#others[@]} > 0 )) || ha_die "lossy-failover: no running replica to promote"
    candidate="${others[0]}"
    ha_kill_node "$old"
    # The dead node's files: its normal pg_hba.conf back (Patroni would rewrite it at the
    # next start anyway).
    ha_restore_hba "$old"
    rm -f "$CUT_FILE" "$CUT_HBA"
    ha_log "failover to $candidate (patronictl failover --candidate $candidate --force)"
    # The dead leader's REST API refuses, so patronictl writes the failover key into etcd
    # itself ("falling back to DCS"; its traceback goes to the log).
    ha_ctl_logged failover --candidate "$candidate" --force ||
        ha_die "patronictl failover failed (see $CTL_LOG)"
    grep -qE 'Successfully failed over|falling back to DCS' "$CTL_LOG.last" ||
        ha_die "patronictl failover did not start a failover (see $CTL_LOG)"
    ha_wait 60 "$candidate to accept writes after the failover (log: $(ha_node_dir "$candidate")/patroni.log)" \
        ha_check_writable_node "$candidate"
    ha_wait 30 "patronictl list to show $candidate as the running leader" ha_check_listed_leader "$candidate"
    # Other running replicas (3+ nodes) follow the new leader.
    mapfile -t others < <(ha_running_nodes "$old" "$candidate")
    ha_wait_followers "$candidate" "after the failover" "${others[@]}"
    ha_probe_write || ha_die "$candidate stopped accepting writes"
    printf '%s %s\n' "$WRITABLE_NODE" "$WRITABLE_PORT"
}
