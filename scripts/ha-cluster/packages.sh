# shellcheck shell=bash
# The Debian packages the cluster needs, and the PostgreSQL binaries it runs.

ha_have_packages() {
    command -v patroni >/dev/null 2>&1 && command -v patronictl >/dev/null 2>&1 &&
        command -v etcd >/dev/null 2>&1 &&
        compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null &&
        /usr/bin/python3 -c 'import etcd' >/dev/null 2>&1
}

# Install patroni, etcd-server (and postgresql when no server is installed) with apt-get;
# sudo when not root. Debian's postinst scripts would start a system-wide etcd (and try a
# patroni service): while installing, a temporary /usr/sbin/policy-rc.d (when there is
# none) forbids that.
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
    if (( made_policy )); then "${sudo[@]}" rm -f "$policy"; fi
    (( rc == 0 )) || ha_die "apt-get install ${pkgs[*]} failed"
    ha_have_packages || ha_die "packages installed but patroni/etcd/PostgreSQL/python3-etcd still missing"
}

# PG_BIN and PSQL: the newest /usr/lib/postgresql/*/bin, preferring the version of an
# existing cluster.
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
