#!/usr/bin/env bash
# Runs the whole test suite against a local PostgreSQL.
#
# On a fresh Debian machine it first installs what is missing (postgresql, libpq-dev,
# pkg-config, docker-compose for the compose-file check, prometheus for the alert rules
# tests (PrometheusAlertTests: promtool, and a real Prometheus scraping the service),
# chromium and chromium-driver for the browser tests (BrowserTests), patroni and etcd-server
# for the failover tests, and python3-venv with the OpenAPI linter from PyPI:
# scripts/openapi-tools.sh), starts a
# PostgreSQL cluster under .receipts/ (see scripts/postgres.sh) and a Patroni cluster of three
# PostgreSQL nodes on loopback (scripts/ha-cluster.sh, removed again at the end), builds
# everything, and runs every test.
# Extra arguments go to `swift test` (e.g. --filter PostgresTests).
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/postgres.sh
ensure_packages
source scripts/apt-packages.sh
if ! command -v docker-compose >/dev/null 2>&1; then
    install_packages test.sh "the compose file's check needs it" docker-compose
fi

# Prometheus and promtool for PrometheusAlertTests (deploy/prometheus: the rules' unit tests,
# the dashboard's expressions, alerts going pending, firing and resolving on a live scrape).
# Without them those tests fail (they never skip).
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
    install_packages test.sh "the alert rules' tests need it" prometheus
fi

# A real browser for BrowserTests, driven through chromedriver. Without it those tests fail
# (they never skip): a failed install stops here, saying so.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    install_packages test.sh "the browser tests need them" chromium chromium-driver
fi

# The OpenAPI linter for ContractConformanceTests (it skips, saying why, when PyPI is out of reach).
source scripts/openapi-tools.sh
ensure_openapi_tools || echo "test.sh: could not install the OpenAPI tools from PyPI; the lint test will be skipped" >&2

DATABASE_URL="$(scripts/postgres.sh url)"
export DATABASE_URL

# The failover tests (PatroniFailoverTests) run receiptsd on a real Patroni cluster: one etcd
# and three PostgreSQL nodes on loopback, a primary and two standbys, which they switch over,
# crash and fail over, and read from (ReplicaReadTests, nested in them: read replicas and
# read-your-writes) (about two and a half minutes of the run, beside the other tests). A bare
# `swift test` skips them.
trap 'scripts/ha-cluster.sh destroy >/dev/null 2>&1 || true' EXIT
ha_url="$(scripts/ha-cluster.sh start --nodes 3)" || {
    echo "test.sh: the Patroni cluster did not start; once more from nothing" >&2
    scripts/ha-cluster.sh destroy >/dev/null 2>&1 || true
    ha_url="$(scripts/ha-cluster.sh start --nodes 3)"
} || {
    echo "test.sh: error: could not start the Patroni cluster (scripts/ha-cluster.sh); the failover tests need it" >&2
    exit 1
}
export RECEIPTS_HA_DATABASE_URL="${ha_url#DATABASE_URL=}"
# The harness's own tests (its pure parts, without a cluster; a second or two).
scripts/ha-cluster/test.sh

# At most this many tests at once (swift-testing starts every test together otherwise): many
# tests start a service of their own and some time what it answers, and a few hundred
# services starting together on a machine of two cores time nothing but the machine.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-12}"

swift build --build-tests
swift test --skip-build "$@"
