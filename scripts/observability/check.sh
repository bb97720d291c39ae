#!/usr/bin/env bash
# Offline checks of the observability files in deploy/ (no Prometheus or Grafana running):
#
#   - deploy/prometheus/receipts-rules.yml is valid (promtool check rules) and passes its unit
#     tests (promtool test rules deploy/prometheus/receipts-rules.test.yml);
#   - deploy/prometheus/prometheus.yml is valid (promtool check config, on a copy that names
#     the rule file by its path here instead of its path in the container);
#   - deploy/README.md has a row for every alert;
#   - every PromQL expression of deploy/grafana/receipts.json parses (each panel target
#     becomes a recording rule, Grafana's variables replaced, for promtool check rules), and
#     every recording rule name the dashboard uses is recorded by receipts-rules.yml;
#   - with --metrics FILE (the text of GET /metrics of a live receiptsd, e.g.
#     `curl -s localhost:8080/metrics > metrics.txt`): every metric name the rules and the
#     dashboard use is in FILE.
#
# Usage: scripts/observability/check.sh [--metrics FILE]
# Installs the Debian package prometheus (for promtool) when promtool is missing. Needs
# python3 (scripts/observability/metric_names.py, stdlib only). Exits non-zero, saying
# which, when any check fails.
set -euo pipefail
cd "$(dirname "$0")/../.."

rules=deploy/prometheus/receipts-rules.yml
rule_tests=deploy/prometheus/receipts-rules.test.yml
config=deploy/prometheus/prometheus.yml
config_rules_path=/etc/prometheus/receipts-rules.yml
dashboard=deploy/grafana/receipts.json
names=scripts/observability/metric_names.py
readme=deploy/README.md

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

metrics_file=""
while (($#)); do
    case "$1" in
        --metrics) [[ $# -ge 2 ]] || { echo "check.sh: error: --metrics needs a file" >&2; exit 2; }
            metrics_file="$2"; shift 2 ;;
        --metrics=*) metrics_file="${1#--metrics=}"; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "check.sh: error: unknown argument: $1 (usage: scripts/observability/check.sh [--metrics FILE])" >&2; exit 2 ;;
    esac
done
if [[ -n "$metrics_file" && ! -r "$metrics_file" ]]; then
    echo "check.sh: error: cannot read the metrics file $metrics_file" >&2
    exit 2
fi

if ! command -v python3 >/dev/null 2>&1; then
    echo "check.sh: error: python3 is needed (for $names)" >&2
    exit 1
fi
if ! command -v promtool >/dev/null 2>&1; then
    source scripts/apt-packages.sh
    install_packages check.sh "the checks need its promtool" prometheus
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

failures=()
# run NAME COMMAND...: runs the check, its output indented; records it when it fails.
run() {
    local name="$1"; shift
    echo "== $name"
    if "$@" > "$tmp/out" 2>&1; then
        sed 's/^/   /' "$tmp/out"
    else
        sed 's/^/   /' "$tmp/out"
        echo "   FAILED: $name"
        failures+=("$name")
    fi
}

run "rules are valid ($rules)" promtool check rules "$rules"
run "rule unit tests pass ($rule_tests)" promtool test rules "$rule_tests"

# The scrape config names the rule file by its path in the Prometheus container.
if grep -qF "$config_rules_path" "$config"; then
    sed "s#$config_rules_path#$PWD/$rules#" "$config" > "$tmp/prometheus.yml"
    run "scrape config is valid ($config)" promtool check config "$tmp/prometheus.yml"
else
    echo "== scrape config loads the rules"
    echo "   FAILED: $config does not load $config_rules_path (where docker-compose.yml mounts $rules)"
    failures+=("scrape config loads the rules")
fi

dashboard_rules() {
    python3 "$names" dashboard-rules "$dashboard" > "$tmp/dashboard-rules.yml" || return 1
    promtool check rules "$tmp/dashboard-rules.yml" && return 0
    echo "(rule dashboard:panel_<id>_<refId> is the target <refId> of the panel with \"id\": <id> in $dashboard)"
    return 1
}
run "every PromQL expression of the dashboard parses ($dashboard)" dashboard_rules
run "every recording rule the dashboard uses is recorded" python3 "$names" recorded --rules "$rules" --dashboard "$dashboard"

# deploy/README.md has a row for every alert.
alerts_documented() {
    local alert missing=0
    while read -r alert; do
        grep -qF "| \`$alert\` |" "$readme" || { echo "no row for $alert in $readme"; missing=1; }
    done < <(sed -n 's/^ *- alert: *\([A-Za-z0-9_]*\).*/\1/p' "$rules")
    ((missing == 0)) && echo "every alert of $rules has its row in $readme"
}
run "every alert is in the table of $readme" alerts_documented

if [[ -n "$metrics_file" ]]; then
    run "every metric name used is in $metrics_file" \
        python3 "$names" check --metrics "$metrics_file" --rules "$rules" --dashboard "$dashboard"
fi

if ((${#failures[@]})); then
    echo "check.sh: ${#failures[@]} check(s) failed:" >&2
    printf '  - %s\n' "${failures[@]}" >&2
    exit 1
fi
echo "check.sh: all checks passed"
