#!/usr/bin/env bash
# A Patroni-managed PostgreSQL cluster on loopback, for Receipts' failover tests: one etcd
# and N Patroni nodes (node1..nodeN). What each command does and prints, the guarantees,
# ports, state layout, Patroni settings and measured timings: scripts/ha-cluster/README.md.
# The code is in scripts/ha-cluster/, by topic; this file only dispatches.
#
# stdout carries only each command's documented output; progress goes to stderr.
# Every wait has a deadline and fails naming what it waited for.
set -euo pipefail

here="$(dirname "${BASH_SOURCE[0]}")"
# postgres.sh's helpers (sourcing it only defines functions): its password maker.
# shellcheck source=scripts/postgres.sh
source "$here/postgres.sh"
# shellcheck source=scripts/ha-cluster/common.sh
source "$here/ha-cluster/common.sh"
# shellcheck source=scripts/ha-cluster/packages.sh
source "$here/ha-cluster/packages.sh"
# shellcheck source=scripts/ha-cluster/processes.sh
source "$here/ha-cluster/processes.sh"
# shellcheck source=scripts/ha-cluster/config.sh
source "$here/ha-cluster/config.sh"
# shellcheck source=scripts/ha-cluster/queries.sh
source "$here/ha-cluster/queries.sh"
# shellcheck source=scripts/ha-cluster/lifecycle.sh
source "$here/ha-cluster/lifecycle.sh"
# shellcheck source=scripts/ha-cluster/faults.sh
source "$here/ha-cluster/faults.sh"

ha_usage() {
    cat >&2 <<USAGE
usage: $0 start [--nodes N] | url | status | leader | wait-leader [seconds]
       | switchover | crash-primary | revive NODE | sync on|off
       | cut-replication | lossy-failover | stop | destroy
USAGE
}

ha_main() {
    local cmd="${1:-}"
    [[ $# -gt 0 ]] && shift
    case "$cmd" in                                          # in:
        start)           ha_cmd_start "$@" ;;               # lifecycle.sh
        url)             ha_need state etcd; printf '%s\n' "$(ha_url)" ;;
        status)          ha_need state etcd; ha_ctl list ;;
        leader)          ha_cmd_leader ;;                   # faults.sh
        wait-leader)     ha_cmd_wait_leader "$@" ;;         # faults.sh
        switchover)      ha_cmd_switchover ;;               # faults.sh
        crash-primary)   ha_cmd_crash_primary ;;            # faults.sh
        revive)          ha_cmd_revive "$@" ;;              # faults.sh
        sync)            ha_cmd_sync "$@" ;;                # faults.sh
        cut-replication) ha_cmd_cut_replication ;;          # faults.sh
        lossy-failover)  ha_cmd_lossy_failover ;;           # faults.sh
        stop)            ha_cmd_stop ;;                     # lifecycle.sh
        destroy)         ha_cmd_destroy ;;                  # lifecycle.sh
        *)               ha_usage; return 2 ;;
    esac
}

ha_main "$@"
