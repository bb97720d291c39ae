# shellcheck shell=bash
# Constants, logging, the one deadline helper, paths and node names, the lock, passwords and
# the URL. Sourced by scripts/ha-cluster.sh (see README.md beside this file).

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

# ------------------------------------------------------------- waiting ----

# ha_poll INTERVAL SECONDS command...: run command every INTERVAL seconds until it succeeds;
# fails once SECONDS have passed. The command runs in this shell, so a check may ha_die
# (e.g. when the daemon it waits for has exited).
ha_poll() {
    local interval="$1" secs="$2"
    shift 2
    local deadline=$(( ${EPOCHREALTIME//[!0-9]/} + secs * 1000000 ))
    until "$@"; do
        (( ${EPOCHREALTIME//[!0-9]/} < deadline )) || return 1
        sleep "$interval"
    done
}

# ha_wait SECONDS "what" command...: every wait of the harness; on timeout it dies naming
# what it waited for.
ha_wait() {
    local secs="$1" what="$2"
    shift 2
    ha_poll 0.2 "$secs" "$@" || ha_die "timed out after ${secs}s waiting for $what"
}

# --------------------------------------------------------------- paths ----

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
    CTL_LOG="$STATE_DIR/patronictl.log"
    NODES_FILE="$STATE_DIR/nodes"
    CUT_FILE="$STATE_DIR/cut"
    CUT_HBA="$STATE_DIR/cut.pg_hba.conf"
    IS_ROOT=0
    [[ "$(id -u)" == 0 ]] && IS_ROOT=1
    if (( IS_ROOT )); then SERVER_USER=postgres; else SERVER_USER="$(id -un)"; fi
}

# ha_need WHAT...: a command's preconditions, in the order given: state (a cluster exists
# here), etcd (it runs), lock (this command runs alone), bin (PostgreSQL's binaries found).
ha_need() {
    ha_init_paths
    local need
    for need in "$@"; do
        case "$need" in
            state) [[ -f "$MARKER" ]] || ha_die "no cluster in $STATE_DIR (run: $0 start)" ;;
            etcd) ha_etcd_pid >/dev/null || ha_die "the cluster is not running: etcd is down (run: $0 start)" ;;
            lock) ha_lock ;;
            bin) ha_find_bin ;;
            *) ha_die "ha_need: unknown precondition $need" ;;
        esac
    done
}

# Held until the script exits (daemons do not inherit it: ha_spawn closes it).
ha_lock() {
    exec {HA_LOCK_FD}>>"$LOCK_FILE"
    flock -w 300 "$HA_LOCK_FD" || ha_die "timed out after 300s waiting for the lock $LOCK_FILE"
}

# ---------------------------------------------------------- node names ----

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

# The cluster's nodes (one a line), leaving out the ones named.
ha_node_names() {
    local n i
    n="$(ha_node_count)"
    for (( i = 1; i <= n; i++ )); do
        [[ " $* " == *" node$i "* ]] || printf 'node%s\n' "$i"
    done
}

# The nodes whose Patroni runs, leaving out the ones named.
ha_running_nodes() {
    local n
    while read -r n; do
        if ha_patroni_pid "$n" >/dev/null; then printf '%s\n' "$n"; fi
    done < <(ha_node_names "$@")
}

# ------------------------------------------------------ passwords, URL ----

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
    local password hosts
    password="$(ha_password receipts)"
    hosts="$(ha_hosts)"
    printf 'postgresql://receipts:%s@%s/receipts?target_session_attrs=read-write' "$password" "$hosts"
}

# Write PATH from stdin: mode 600, owned by the server user, replaced in one rename.
ha_write_file() {
    local path="$1"
    (umask 077 && cat >"$path.tmp")
    if (( IS_ROOT )); then chown "$SERVER_USER:" "$path.tmp"; fi
    mv "$path.tmp" "$path"
}
