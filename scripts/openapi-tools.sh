#!/usr/bin/env bash
# The Python tools the tests use, in a virtual environment under .receipts/:
# openapi-spec-validator (the linter, run by the test suite), schemathesis (run against a
# live receiptsd by scripts/schemathesis.sh) and standardwebhooks (the Standard Webhooks
# reference verifier, which StandardWebhooksTests runs on real deliveries). Versions are pinned so that a run is
# reproducible; raise them here.
#
# `source scripts/openapi-tools.sh` defines ensure_openapi_tools and OPENAPI_TOOLS (the
# environment's directory). ensure_openapi_tools installs python3 and python3-venv with
# apt-get when they are missing (a fresh Debian has neither venv nor pip), then the tools
# from PyPI, and fails (status 1) when they cannot be installed.

OPENAPI_TOOLS="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)/.receipts/openapi-tools"
OPENAPI_TOOLS_REQUIREMENTS=(openapi-spec-validator==0.9.0 schemathesis==4.32.5 standardwebhooks==1.1.0)

ensure_openapi_tools() {
    local stamp="$OPENAPI_TOOLS/.installed"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "${OPENAPI_TOOLS_REQUIREMENTS[*]}" ]]; then
        return 0
    fi
    if ! command -v python3 >/dev/null 2>&1 || ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
        echo "openapi-tools: installing python3-venv" >&2
        local sudo=()
        [[ "$(id -u)" != 0 ]] && sudo=(sudo)
        "${sudo[@]}" apt-get update >&2 || return 1
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv >&2 || return 1
    fi
    echo "openapi-tools: installing ${OPENAPI_TOOLS_REQUIREMENTS[*]} into $OPENAPI_TOOLS" >&2
    rm -rf "$OPENAPI_TOOLS"
    python3 -m venv "$OPENAPI_TOOLS" >&2 || return 1
    "$OPENAPI_TOOLS/bin/pip" install --quiet --disable-pip-version-check "${OPENAPI_TOOLS_REQUIREMENTS[@]}" >&2 || return 1
    echo "${OPENAPI_TOOLS_REQUIREMENTS[*]}" > "$stamp"
}
