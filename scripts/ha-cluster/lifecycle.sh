# shellcheck shell=bash
# The daemons' life: start etcd and the nodes (bootstrapping on first use), stop, destroy.

ha_start_etcd() {
    ha_etcd_pid >/dev/null && return 0
    local p
    for p in "$HA_ETCD_CLIENT_PORT" "$HA_ETCD_PEER_PORT"; do
        ! ha_port_in_use "$p" || ha_die "port $p is in use by another process (etcd of this cluster is not running)"
    done
    ha_log "starting etcd on 127.0.0.1:$HA_ETCD_CLIENT_PORT (log: $ETCD_LOG)"
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

ha_start_node() {
    local node="$1" d p
    d="$(ha_node_dir "$node")"
    ha_patroni_pid "$node" >/dev/null && return 0
    if ! ha_postmaster_pid "$node" >/dev/null; then
        for p in "$(ha_node_port "$node")" "$(ha_node_rest_port "$node")"; do
            ! ha_port_in_use "$p" || ha_die "port $p (for $node) is in use by another process"
        done
    fi
    ha_log "starting Patroni $node (PostgreSQL 127.0.0.1:$(ha_node_port "$node"), log: $d/patroni.log)"
    ha_spawn "$d/patroni.log" "$d/patroni.pid" "$(command -v patroni)" "$d/patroni.yml"
}

# Role receipts (LOGIN SUPERUSER, its password) and database receipts, on the leader's PORT.
ha_ensure_roles() {
    local port="$1" pw
    pw="$(ha_password receipts)"
    ha_sql_port "$port" <<EOF >/dev/null
SET synchronous_commit = local;
SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'receipts') THEN 'ALTER' ELSE 'CREATE' END
    || ' ROLE receipts WITH LOGIN SUPERUSER PASSWORD ''$pw''' \gexec
SELECT 'CREATE DATABASE receipts OWNER receipts'
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'receipts') \gexec
EOF
}

# start [--nodes N]
ha_cmd_start() {
    local want=""
    while [[ $# -gt 0 ]]; do
        case "$1" in
            --nodes) [[ $# -ge 2 ]] || ha_die "--nodes needs a number"; want="$2"; shift 2 ;;
            --nodes=*) want="${1#--nodes=}"; shift ;;
            *) ha_usage; return 2 ;;
        esac
    done
    if [[ -n "$want" ]] && { [[ ! "$want" =~ ^[1-9]$ ]] || (( want > HA_MAX_NODES )); }; then
        ha_die "--nodes must be 1..$HA_MAX_NODES"
    fi
    ha_ensure_packages
    ha_init_paths
    ha_prepare_state
    ha_lock
    ha_find_bin
    local have node url
    have="$(ha_node_count)"
    if [[ -z "$want" ]]; then
        want="${have:-0}"
        (( want > 0 )) || want="$HA_DEFAULT_NODES"
    fi
    (( have <= want )) ||
        ha_die "the cluster has $have nodes; to run $want, run: $0 destroy; $0 start --nodes $want"
    printf '%s\n' "$want" >"$NODES_FILE"
    ha_write_ctl_conf
    while read -r node; do ha_write_node_conf "$node"; done < <(ha_node_names)

    ha_start_etcd
    if ! { ha_ctl list -f tsv 2>/dev/null | awk -F'\t' 'NR > 1' | grep -q .; } &&
        [[ ! -f "$(ha_node_dir node1)/data/PG_VERSION" ]]; then
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
    url="$(ha_url)"
    printf 'DATABASE_URL=%s\n' "$url"
}

# Stop a node's Patroni, then a postmaster left without its Patroni (e.g. Patroni was
# killed alone).
ha_stop_node() {
    local node="$1" pid d
    d="$(ha_node_dir "$node")"
    if pid="$(ha_patroni_pid "$node")"; then
        ha_log "stopping Patroni $node"
        ha_stop_pid "$pid" "Patroni $node" 60
    fi
    if pid="$(ha_postmaster_pid "$node")"; then
        ha_log "stopping PostgreSQL of $node (no Patroni)"
        ha_as_server "$PG_BIN/pg_ctl" -D "$d/data" -m fast -w -t 60 stop >&2 ||
            kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$d/patroni.pid"
}

ha_cmd_stop() {
    ha_init_paths
    [[ -f "$MARKER" ]] || { ha_log "no cluster in $STATE_DIR"; return 0; }
    ha_lock
    ha_find_bin
    local leader="" node pid replicas
    if ha_etcd_pid >/dev/null && ha_dcs_leader 2>/dev/null; then leader="$DCS_LEADER"; fi
    # Replicas first (told together), the leader last: no failover while stopping.
    mapfile -t replicas < <(ha_node_names "$leader")
    for node in "${replicas[@]}"; do
        if pid="$(ha_patroni_pid "$node")"; then
            kill -CONT "$pid" 2>/dev/null || true
            kill -TERM "$pid" 2>/dev/null || true
        fi
    done
    for node in "${replicas[@]}"; do ha_stop_node "$node"; done
    if [[ -n "$leader" ]]; then ha_stop_node "$leader"; fi
    if pid="$(ha_etcd_pid)"; then
        ha_log "stopping etcd"
        ha_stop_pid "$pid" etcd 30
    fi
    rm -f "$ETCD_PID"
}

# The data goes, so no clean shutdown: SIGKILL every daemon of ours (Patroni, PostgreSQL
# and their children, etcd), then delete the state directory.
ha_cmd_destroy() {
    ha_init_paths
    if [[ ! -e "$STATE_DIR" ]]; then
        ha_log "nothing to destroy: $STATE_DIR does not exist"
        return 0
    fi
    [[ -f "$MARKER" ]] || ha_die "$STATE_DIR is not a receipts HA state directory; not deleting it"
    ha_lock
    local pids=() d pid
    for d in "$STATE_DIR"/node*; do
        if [[ -d "$d" && "${d##*/}" =~ ^node[0-9]+$ ]]; then
            mapfile -t -O "${#pids[@]}" pids < <(ha_node_pids "${d##*/}")
        fi
    done
    if pid="$(ha_etcd_pid)"; then pids+=("$pid"); fi
    if (( ${#pids[@]} > 0 )); then
        ha_log "killing ${#pids[@]} processes (Patroni, PostgreSQL, etcd)"
        ha_kill_pids "${pids[@]}"
    fi
    ha_log "deleting $STATE_DIR"
    rm -rf -- "$STATE_DIR"
}
