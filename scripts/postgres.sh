#!/usr/bin/env bash
# Local PostgreSQL cluster for Receipts development and tests.
#
# Usage: scripts/postgres.sh start | stop | status | url | psql [args...]
#
#   start   Install missing packages (Debian/apt), create the cluster on first
#           use, start it (if not running) and create database "receipts".
#           Prints exactly one line on stdout:
#             DATABASE_URL=postgresql://receipts:<password>@127.0.0.1:<port>/receipts
#           Progress messages go to stderr.
#   url     Print just the URL (starts the server if it is not running).
#   stop    Fast shutdown if running.
#   status  Print "running" (exit 0) or "stopped" (exit 3).
#   psql    exec psql on the URL with any extra arguments.
#
# Environment:
#   RECEIPTS_STATE_DIR  state directory (default: <repo root>/.receipts)
#
# State layout (<state>/postgres/): data/ (cluster), postgres.log, port,
# password (mode 600), and "datadir" when the cluster had to live elsewhere
# (root runs the server as the "postgres" user; if that user cannot reach the
# repository path the cluster goes to /var/tmp/receipts-postgres-<hash>/).
#
# `source scripts/postgres.sh` only defines functions (ensure_packages is
# exported); it does not change shell options or run anything.

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    set -euo pipefail
fi

RECEIPTS_PG_SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
RECEIPTS_PG_REPO_ROOT="$(dirname "$RECEIPTS_PG_SCRIPT_DIR")"
RECEIPTS_PG_FIRST_PORT=54329

receipts_pg_log() { printf 'postgres.sh: %s\n' "$*" >&2; }
receipts_pg_die() { receipts_pg_log "error: $*"; exit 1; }

# Install postgresql (server + client), libpq-dev and pkg-config when any of
# them is missing. Safe to call repeatedly; does nothing when all are present.
ensure_packages() {
    local missing=() initdb_found=0 f
    for f in /usr/lib/postgresql/*/bin/initdb; do
        [[ -x "$f" ]] && initdb_found=1
    done
    (( initdb_found )) || missing+=("initdb")
    if ! command -v pg_config >/dev/null 2>&1; then
        missing+=("pg_config")
    elif [[ ! -f /usr/include/postgresql/libpq-fe.h && ! -f "$(pg_config --includedir 2>/dev/null)/libpq-fe.h" ]]; then
        missing+=("libpq-fe.h")
    fi
    command -v pkg-config >/dev/null 2>&1 || missing+=("pkg-config")
    (( ${#missing[@]} == 0 )) && return 0

    printf 'postgres.sh: missing %s; installing postgresql libpq-dev pkg-config via apt\n' "${missing[*]}" >&2
    local sudo=()
    if [[ "$(id -u)" != 0 ]]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo=(sudo)
        else
            printf 'postgres.sh: error: not root and sudo is not available; install postgresql libpq-dev pkg-config manually\n' >&2
            return 1
        fi
    fi
    command -v apt-get >/dev/null 2>&1 || {
        printf 'postgres.sh: error: apt-get not found; install PostgreSQL server, libpq headers and pkg-config manually\n' >&2
        return 1
    }
    # Route apt's stdout to stderr: callers capture our stdout.
    "${sudo[@]}" apt-get update >&2 &&
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y --no-install-recommends postgresql libpq-dev pkg-config >&2
}
export -f ensure_packages

# ---------------------------------------------------------------- paths ----

receipts_pg_init_paths() {
    local state="${RECEIPTS_STATE_DIR:-$RECEIPTS_PG_REPO_ROOT/.receipts}"
    if [[ -d "$state" ]]; then
        state="$(cd "$state" && pwd -P)"
    elif [[ "$state" != /* ]]; then
        state="$PWD/$state"
    fi
    STATE_DIR="$state"
    PG_STATE="$STATE_DIR/postgres"
    PORT_FILE="$PG_STATE/port"
    PASSWORD_FILE="$PG_STATE/password"
    DATADIR_FILE="$PG_STATE/datadir"
    LOCK_FILE="$STATE_DIR/postgres.lock"
    FALLBACK_DIR="/var/tmp/receipts-postgres-$(printf '%s' "$STATE_DIR" | sha256sum | cut -c1-8)"
    IS_ROOT=0
    [[ "$(id -u)" == 0 ]] && IS_ROOT=1

    if [[ -f "$DATADIR_FILE" ]]; then
        DATA_DIR="$(<"$DATADIR_FILE")"
    else
        DATA_DIR="$PG_STATE/data"
    fi
    receipts_pg_set_logfile
    receipts_pg_pick_server_user
}

receipts_pg_set_logfile() {
    LOG_FILE="$(dirname "$DATA_DIR")/postgres.log"
}

receipts_pg_pick_server_user() {
    if (( ! IS_ROOT )); then
        SERVER_USER="$(id -un)"
        return
    fi
    SERVER_USER=postgres
    if [[ -d "$DATA_DIR" ]]; then
        local owner
        owner="$(stat -c %U "$DATA_DIR" 2>/dev/null || true)"
        if [[ -n "$owner" && "$owner" != root && "$owner" != UNKNOWN ]]; then
            SERVER_USER="$owner"
        fi
    fi
}

# Newest /usr/lib/postgresql/*/bin, preferring the major version the existing
# cluster was created with.
receipts_pg_find_bin() {
    PG_BIN=""
    if [[ -f "$DATA_DIR/PG_VERSION" ]]; then
        local ver
        ver="$(<"$DATA_DIR/PG_VERSION")"
        if [[ -x "/usr/lib/postgresql/$ver/bin/pg_ctl" ]]; then
            PG_BIN="/usr/lib/postgresql/$ver/bin"
        fi
    fi
    if [[ -z "$PG_BIN" ]]; then
        PG_BIN="$(compgen -G '/usr/lib/postgresql/*/bin' | sort -V | tail -n 1 || true)"
    fi
    if [[ -z "$PG_BIN" || ! -x "$PG_BIN/pg_ctl" ]]; then
        local d
        d="$(pg_config --bindir 2>/dev/null || true)"
        if [[ -n "$d" && -x "$d/pg_ctl" ]]; then
            PG_BIN="$d"
        elif command -v pg_ctl >/dev/null 2>&1; then
            PG_BIN="$(dirname "$(command -v pg_ctl)")"
        else
            PG_BIN=""
            return 1
        fi
    fi
    if [[ -x "$PG_BIN/psql" ]]; then
        PSQL="$PG_BIN/psql"
    elif command -v psql >/dev/null 2>&1; then
        PSQL="$(command -v psql)"
    else
        PSQL=""
    fi
}

# ------------------------------------------------------------- run as ----

receipts_pg_ensure_server_user() {
    (( IS_ROOT )) || return 0
    id -u "$SERVER_USER" >/dev/null 2>&1 && return 0
    [[ "$SERVER_USER" == postgres ]] || receipts_pg_die "user $SERVER_USER does not exist"
    receipts_pg_log "creating system user postgres"
    useradd --system --home /var/lib/postgresql postgres >&2
}

# Run a command as the server user (postgres when we are root), from "/" so
# an unreadable working directory does not matter. All paths are absolute.
receipts_pg_as_server() {
    if (( ! IS_ROOT )); then
        (cd / && "$@")
    elif command -v runuser >/dev/null 2>&1; then
        (cd / && runuser -u "$SERVER_USER" -- "$@")
    else
        local cmd
        cmd="$(printf '%q ' "$@")"
        (cd / && su "$SERVER_USER" -s /bin/bash -c "$cmd")
    fi
}

# Like receipts_pg_as_server, but closes every inherited descriptor above 2
# first: the postmaster outlives us and must not hold our lock file or a
# caller's pipe (e.g. bats' fd 3) open. Its stdout goes to our stderr.
receipts_pg_as_server_daemon() {
    (
        fds=()
        for fd in /proc/self/fd/*; do
            fd="${fd##*/}"
            [[ "$fd" =~ ^[0-9]+$ ]] && (( fd > 2 )) && fds+=("$fd")
        done
        for fd in "${fds[@]}"; do
            eval "exec ${fd}>&-" 2>/dev/null || true
        done
        receipts_pg_as_server "$@" </dev/null >&2
    )
}

receipts_pg_server_can_reach() {
    receipts_pg_as_server test -x "$1" 2>/dev/null
}

# ------------------------------------------------------------- helpers ----

receipts_pg_random_password() {
    local pw=""
    while (( ${#pw} < 24 )); do
        pw+="$(LC_ALL=C tr -dc 'A-Za-z0-9' < <(head -c 512 /dev/urandom))"
    done
    printf '%s' "${pw:0:24}"
}

receipts_pg_password() {
    [[ -r "$PASSWORD_FILE" ]] || receipts_pg_die "cannot read $PASSWORD_FILE (remove $PG_STATE and run start again to recreate the cluster)"
    tr -d '\n' <"$PASSWORD_FILE"
}

receipts_pg_url() {
    local db="${1:-receipts}"
    printf 'postgresql://receipts:%s@127.0.0.1:%s/%s' "$(receipts_pg_password)" "$PORT" "$db"
}

# Succeeds when something accepts connections on 127.0.0.1:$1.
receipts_pg_port_in_use() {
    local port="$1"
    if command -v timeout >/dev/null 2>&1; then
        timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null
    else
        bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null
    fi
}

receipts_pg_find_free_port() {
    local port="${1:-$RECEIPTS_PG_FIRST_PORT}" last=$(( ${1:-$RECEIPTS_PG_FIRST_PORT} + 1000 ))
    while (( port <= last && port <= 65535 )); do
        if (( port != 5432 )) && ! receipts_pg_port_in_use "$port"; then
            printf '%s' "$port"
            return 0
        fi
        port=$(( port + 1 ))
    done
    receipts_pg_die "no free TCP port found starting at ${1:-$RECEIPTS_PG_FIRST_PORT}"
}

receipts_pg_is_running() {
    [[ -n "${PG_BIN:-}" && -f "$DATA_DIR/PG_VERSION" ]] || return 1
    receipts_pg_as_server "$PG_BIN/pg_ctl" -D "$DATA_DIR" status >/dev/null 2>&1
}

# Port of the running postmaster (4th line of postmaster.pid).
receipts_pg_running_port() {
    sed -n '4p' "$DATA_DIR/postmaster.pid" 2>/dev/null | tr -dc '0-9'
}

receipts_pg_has_locale() {
    locale -a 2>/dev/null | grep -qiE '^c\.utf-?8$'
}

# -------------------------------------------------------------- steps ----

# Decide where the cluster lives (first start only) and prepare directories.
receipts_pg_prepare_dirs() {
    [[ -d "$STATE_DIR" ]] || mkdir -m 755 -p "$STATE_DIR"
    [[ -d "$PG_STATE" ]] || mkdir -m 755 "$PG_STATE"

    if (( IS_ROOT )) && [[ ! -f "$DATADIR_FILE" && ! -d "$PG_STATE/data" ]] &&
        ! receipts_pg_server_can_reach "$PG_STATE"; then
        receipts_pg_log "user $SERVER_USER cannot reach $PG_STATE; using $FALLBACK_DIR for the cluster"
        mkdir -p "$FALLBACK_DIR"
        chmod 700 "$FALLBACK_DIR"
        chown "$SERVER_USER:" "$FALLBACK_DIR"
        DATA_DIR="$FALLBACK_DIR/data"
        printf '%s\n' "$DATA_DIR" >"$DATADIR_FILE"
        receipts_pg_set_logfile
    fi

    if [[ ! -f "$PASSWORD_FILE" ]]; then
        (umask 077 && receipts_pg_random_password >"$PASSWORD_FILE.tmp" && mv "$PASSWORD_FILE.tmp" "$PASSWORD_FILE")
    fi
    chmod 600 "$PASSWORD_FILE"

    local parent
    parent="$(dirname "$DATA_DIR")"
    [[ -d "$parent" ]] || mkdir -p "$parent"
    touch "$LOG_FILE"
    if (( IS_ROOT )); then
        chown "$SERVER_USER:" "$LOG_FILE"
        if [[ "$LOG_FILE" != "$PG_STATE/postgres.log" ]]; then
            ln -sfn "$LOG_FILE" "$PG_STATE/postgres.log"
        fi
    fi
}

receipts_pg_initdb() {
    local marker="$DATA_DIR/.receipts-initialized"
    [[ -f "$marker" ]] && return 0

    if [[ -d "$DATA_DIR" ]] && [[ -n "$(ls -A "$DATA_DIR" 2>/dev/null)" ]]; then
        local aside
        aside="$DATA_DIR.incomplete-$(date +%Y%m%d%H%M%S)"
        receipts_pg_log "$DATA_DIR is not a completed cluster; moving it to $aside"
        mv "$DATA_DIR" "$aside"
    fi
    mkdir -p "$DATA_DIR"
    chmod 700 "$DATA_DIR"
    (( IS_ROOT )) && chown "$SERVER_USER:" "$DATA_DIR"

    local pwfile locale_arg=--locale=C
    pwfile="$(mktemp "$(dirname "$DATA_DIR")/.pwfile.XXXXXX")"
    # shellcheck disable=SC2064
    trap "rm -f '$pwfile'" EXIT
    receipts_pg_password >"$pwfile"
    (( IS_ROOT )) && chown "$SERVER_USER:" "$pwfile"
    receipts_pg_has_locale && locale_arg=--locale=C.UTF-8

    receipts_pg_log "initializing cluster in $DATA_DIR ($PG_BIN)"
    if ! receipts_pg_as_server "$PG_BIN/initdb" -D "$DATA_DIR" -U receipts \
        --auth=scram-sha-256 --pwfile="$pwfile" -E UTF8 "$locale_arg" >&2; then
        rm -f "$pwfile"
        receipts_pg_die "initdb failed"
    fi
    rm -f "$pwfile"
    trap - EXIT

    cat >>"$DATA_DIR/postgresql.conf" <<'EOF'

# --- added by scripts/postgres.sh (Receipts) ---
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
max_connections = 1000
shared_buffers = 256MB
log_min_messages = warning
EOF
    touch "$marker"
    (( IS_ROOT )) && chown "$SERVER_USER:" "$marker" "$DATA_DIR/postgresql.conf"
    return 0
}

# Start the postmaster on a free port; retries on a bind race.
receipts_pg_start_server() {
    local port="" attempt
    if [[ -f "$PORT_FILE" ]]; then
        port="$(tr -dc '0-9' <"$PORT_FILE")"
        if [[ -n "$port" ]] && receipts_pg_port_in_use "$port"; then
            receipts_pg_log "recorded port $port is taken by another process; picking a new one"
            port="$(receipts_pg_find_free_port $(( port + 1 )))"
        fi
    fi
    [[ -n "$port" ]] || port="$(receipts_pg_find_free_port)"

    for attempt in 1 2 3 4 5; do
        printf '%s\n' "$port" >"$PORT_FILE"
        local before
        before="$(stat -c %s "$LOG_FILE" 2>/dev/null || echo 0)"
        receipts_pg_log "starting server on 127.0.0.1:$port (log: $LOG_FILE)"
        if receipts_pg_as_server_daemon "$PG_BIN/pg_ctl" -D "$DATA_DIR" -l "$LOG_FILE" \
            -o "-p $port" -w -t 60 start; then
            PORT="$port"
            return 0
        fi
        if tail -c +"$(( before + 1 ))" "$LOG_FILE" 2>/dev/null |
            grep -qE 'could not bind|Address already in use|could not create any TCP/IP sockets'; then
            receipts_pg_log "port $port is busy; retrying (attempt $attempt)"
            port="$(receipts_pg_find_free_port $(( port + 1 )))"
            continue
        fi
        tail -n 30 "$LOG_FILE" >&2 2>/dev/null || true
        receipts_pg_die "pg_ctl start failed (see $LOG_FILE)"
    done
    receipts_pg_die "could not start server: ports kept being taken"
}

receipts_pg_ensure_database() {
    [[ -n "$PSQL" ]] || receipts_pg_die "psql not found"
    local admin exists
    admin="$(receipts_pg_url postgres)"
    exists="$(PGCONNECT_TIMEOUT=10 "$PSQL" -X -q -t -A -v ON_ERROR_STOP=1 "$admin" \
        -c "select 1 from pg_database where datname = 'receipts'")" ||
        receipts_pg_die "cannot connect to the server on port $PORT"
    if [[ "$exists" != 1 ]]; then
        receipts_pg_log "creating database receipts"
        "$PSQL" -X -q -v ON_ERROR_STOP=1 "$admin" -c 'create database receipts' >&2
    fi
}

# Start everything (idempotent). Sets PORT. Must not write to stdout.
receipts_pg_do_start() {
    ensure_packages || receipts_pg_die "required packages are missing"
    receipts_pg_init_paths
    receipts_pg_find_bin || receipts_pg_die "PostgreSQL server binaries not found"
    [[ -d "$STATE_DIR" ]] || mkdir -m 755 -p "$STATE_DIR"

    local lock_fd
    exec {lock_fd}>>"$LOCK_FILE"
    if ! flock -w 300 "$lock_fd"; then
        exec {lock_fd}>&-
        receipts_pg_die "timed out waiting for $LOCK_FILE"
    fi

    receipts_pg_ensure_server_user
    receipts_pg_prepare_dirs
    receipts_pg_find_bin || receipts_pg_die "PostgreSQL server binaries not found"
    receipts_pg_initdb

    if receipts_pg_is_running; then
        PORT="$(receipts_pg_running_port)"
        [[ -n "$PORT" ]] || receipts_pg_die "server is running but its port is unknown"
        if [[ "$(tr -dc '0-9' <"$PORT_FILE" 2>/dev/null)" != "$PORT" ]]; then
            printf '%s\n' "$PORT" >"$PORT_FILE"
        fi
    else
        receipts_pg_start_server
    fi
    receipts_pg_ensure_database

    exec {lock_fd}>&-
}

receipts_pg_do_stop() {
    receipts_pg_init_paths
    receipts_pg_find_bin || { receipts_pg_log "PostgreSQL binaries not found; nothing to stop"; return 0; }
    [[ -d "$STATE_DIR" ]] || return 0
    local lock_fd
    exec {lock_fd}>>"$LOCK_FILE"
    flock -w 300 "$lock_fd" || receipts_pg_die "timed out waiting for $LOCK_FILE"
    if receipts_pg_is_running; then
        receipts_pg_log "stopping server ($DATA_DIR)"
        receipts_pg_as_server "$PG_BIN/pg_ctl" -D "$DATA_DIR" -m fast -w -t 60 stop >&2
    else
        receipts_pg_log "server is not running"
    fi
    exec {lock_fd}>&-
}

receipts_pg_main() {
    local cmd="${1:-}"
    [[ $# -gt 0 ]] && shift
    case "$cmd" in
        start)
            receipts_pg_do_start
            printf 'DATABASE_URL=%s\n' "$(receipts_pg_url)"
            ;;
        url)
            receipts_pg_do_start
            printf '%s\n' "$(receipts_pg_url)"
            ;;
        stop)
            receipts_pg_do_stop
            ;;
        status)
            receipts_pg_init_paths
            if receipts_pg_find_bin && receipts_pg_is_running; then
                echo running
            else
                echo stopped
                return 3
            fi
            ;;
        psql)
            receipts_pg_do_start
            [[ -n "$PSQL" ]] || receipts_pg_die "psql not found"
            exec "$PSQL" "$(receipts_pg_url)" "$@"
            ;;
        *)
            echo "usage: $0 start | stop | status | url | psql [args...]" >&2
            return 2
            ;;
    esac
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    receipts_pg_main "$@"
fi
