# shellcheck shell=bash
# The state directory, its passwords, and the configuration files of patronictl and of each
# node's Patroni (the settings and why: README.md, "Patroni settings").

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
    if (( IS_ROOT )); then
        chown "$SERVER_USER:" "$STATE_DIR"
        ha_as_server test -w "$STATE_DIR" ||
            ha_die "user $SERVER_USER cannot write to $STATE_DIR (choose another RECEIPTS_HA_DIR)"
    fi
    touch "$MARKER"
    mkdir -p "$ETCD_DIR"
    chmod 700 "$ETCD_DIR"
    if (( IS_ROOT )); then chown -R "$SERVER_USER:" "$ETCD_DIR" "$MARKER"; fi
    local p
    for p in receipts superuser replication; do ha_ensure_password "$p"; done
}

# STATE_DIR/NAME.password: made once (24 random letters and digits), mode 600.
ha_ensure_password() {
    local f="$STATE_DIR/$1.password"
    if [[ ! -s "$f" ]]; then
        receipts_pg_random_password | ha_write_file "$f"
    fi
    chmod 600 "$f"
    if (( IS_ROOT )); then chown "$SERVER_USER:" "$f"; fi
}

ha_write_ctl_conf() {
    ha_write_file "$CTL_CONF" <<EOF
scope: $HA_SCOPE
namespace: $HA_NAMESPACE
etcd3:
  hosts: 127.0.0.1:$HA_ETCD_CLIENT_PORT
EOF
}

# NODE's directory and its patroni.yml (rewritten on every start).
ha_write_node_conf() {
    local node="$1" d
    d="$(ha_node_dir "$node")"
    mkdir -p "$d"
    chmod 700 "$d"
    if (( IS_ROOT )); then chown "$SERVER_USER:" "$d"; fi
    ha_patroni_yml "$node" "$d" | ha_write_file "$d/patroni.yml"
}

# patroni.yml of NODE with directory DIR, on stdout.
ha_patroni_yml() {
    local node="$1" d="$2" port rest
    port="$(ha_node_port "$node")"
    rest="$(ha_node_rest_port "$node")"
    cat <<EOF
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
    - locale: $(ha_locale)

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
EOF
}
