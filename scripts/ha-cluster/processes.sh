# shellcheck shell=bash
# Processes: run as the server user, spawn a daemon, find our daemons by pid file and command
# line, stop and kill them. Everything from /proc; no systemd.

# Run a command as the server user (postgres when root), from "/".
ha_as_server() {
    if (( IS_ROOT )); then
        (cd / && runuser -u "$SERVER_USER" -- "$@")
    else
        (cd / && "$@")
    fi
}

# C.UTF-8 when the machine has it, else C (for the daemons' environment and initdb).
ha_locale() {
    if locale -a 2>/dev/null | grep -qiE '^c\.utf-?8$'; then printf 'C.UTF-8'; else printf 'C'; fi
}

# ha_spawn LOG PIDFILE command...: start a daemon as the server user in its own session,
# detached: stdin /dev/null, stdout+stderr appended to LOG (owned by the server user),
# inherited descriptors above 2 closed (callers may hold a pipe or our lock). The daemon's
# own pid (it execs) goes to PIDFILE.
ha_spawn() {
    local log="$1" pidfile="$2" lang
    shift 2
    lang="$(ha_locale)"
    local envv=(env -i "PATH=$PG_BIN:/usr/local/bin:/usr/bin:/bin" "HOME=$STATE_DIR"
        "LANG=$lang" "LC_ALL=$lang" "TZ=UTC")
    # shellcheck disable=SC2016 # $$, $0 and $@ are the inner sh's
    local run=(sh -c 'echo $$ >"$0" && exec "$@"' "$pidfile" "$@")
    local as=()
    if (( IS_ROOT )); then
        if command -v setpriv >/dev/null 2>&1; then
            as=(setpriv --reuid="$SERVER_USER" --regid="$SERVER_USER" --init-groups)
        else
            as=(runuser -u "$SERVER_USER" --)
        fi
    fi
    rm -f "$pidfile"
    touch "$log"
    if (( IS_ROOT )); then chown "$SERVER_USER:" "$log"; fi
    (
        for fd in /proc/self/fd/*; do   # the list is made before the loop: closing is safe
            fd="${fd##*/}"
            if (( fd > 2 )); then eval "exec ${fd}>&-" 2>/dev/null || true; fi
        done
        cd /
        exec setsid "${as[@]}" "${envv[@]}" "${run[@]}" </dev/null >>"$log" 2>&1
    ) &
    ha_poll 0.05 10 test -s "$pidfile" || ha_die "timed out after 10s waiting for $pidfile (see $log)"
    # The pid is the wrapper sh's until it execs the daemon; while the exec runs, the
    # process's cmdline may read empty. Wait for the daemon's own, so that the liveness
    # checks that follow (which match the cmdline) never see the wrapper or the exec half done.
    local pid
    pid="$(tr -dc '0-9' <"$pidfile")"
    ha_poll 0.02 10 ha_execed "$pid" || ha_die "timed out after 10s waiting for $pid to start $1 (see $log)"
}

# PID has exited, or runs a program other than the wrapper sh.
ha_execed() {
    local first
    kill -0 "$1" 2>/dev/null || return 0
    first="$(tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | head -n 1)"
    [[ -n "$first" && "$first" != sh ]]
}

# State letter of PID ("Z": exited, not yet reaped). /proc/PID/stat is "pid (comm) state
# ppid ...", and comm may contain spaces and parentheses: the fields after the last ") ".
ha_pid_state() {
    local line
    { read -r line <"/proc/$1/stat"; } 2>/dev/null || return 1
    line="${line##*) }"
    printf '%s' "${line%% *}"
}

ha_pid_gone() {
    ! kill -0 "$1" 2>/dev/null || [[ "$(ha_pid_state "$1")" == Z ]]
}

# The pid on PIDFILE's first line when that process is alive and its command line has
# PATTERN.
ha_pid_alive() {
    local pidfile="$1" pattern="$2" pid
    [[ -f "$pidfile" ]] || return 1
    pid="$(head -n 1 "$pidfile" | tr -dc '0-9')"
    [[ -n "$pid" ]] && ! ha_pid_gone "$pid" || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$pattern" || return 1
    printf '%s' "$pid"
}

ha_etcd_pid() { ha_pid_alive "$ETCD_PID" "--data-dir $ETCD_DIR"; }
ha_patroni_pid() {
    local d
    d="$(ha_node_dir "$1")"
    ha_pid_alive "$d/patroni.pid" "$d/patroni.yml"
}
# The postmaster of a node's data directory, when it runs.
ha_postmaster_pid() {
    local d
    d="$(ha_node_dir "$1")/data"
    ha_pid_alive "$d/postmaster.pid" "$d"
}

# Direct children of a pid (one a line).
ha_children() {
    local f line state ppid pid
    for f in /proc/[0-9]*/stat; do
        { read -r line <"$f"; } 2>/dev/null || continue
        read -r state ppid _ <<<"${line##*) }"
        if [[ "$ppid" == "$1" && "$state" != Z ]]; then
            pid="${f#/proc/}"
            printf '%s\n' "${pid%/stat}"
        fi
    done
    return 0
}

# Every process of a node: its Patroni, its postmaster, and their children (one a line).
ha_node_pids() {
    local pid
    for pid in "$(ha_patroni_pid "$1" || true)" "$(ha_postmaster_pid "$1" || true)"; do
        if [[ -n "$pid" ]]; then printf '%s\n' "$pid"; ha_children "$pid"; fi
    done | sort -un
}

# ha_kill_pids pid...: SIGKILL them, all SIGSTOPped first (so that none of them acts in
# between), and wait until they are gone. KILL_TIME: `date +%s.%N` of the kill.
ha_kill_pids() {
    local pid
    kill -STOP "$@" 2>/dev/null || true
    KILL_TIME="$(date +%s.%N)"
    kill -KILL "$@" 2>/dev/null || true
    for pid in "$@"; do
        ha_poll 0.02 10 ha_pid_gone "$pid" || ha_die "timed out after 10s waiting for pid $pid to die"
    done
}

# ha_stop_pid PID WHAT SECONDS: SIGTERM and wait for it to exit; SIGKILL after the deadline.
ha_stop_pid() {
    local pid="$1" what="$2" secs="$3"
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || return 0
    ha_poll 0.1 "$secs" ha_pid_gone "$pid" && return 0
    ha_log "$what (pid $pid) did not stop within ${secs}s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.2
}

ha_port_in_use() {
    timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}
