# Sourced by the scripts that install what their checks need on a fresh Debian machine.

# install_packages CALLER WHY PACKAGE...: installs the Debian packages with apt-get (through
# sudo when not root), saying on standard error which and WHY ("the browser tests need
# them"); when that fails, says so under CALLER's name and exits 1.
install_packages() {
    local caller="$1" why="$2"
    shift 2
    echo "$caller: installing $* ($why)" >&2
    local sudo=()
    [[ "$(id -u)" != 0 ]] && sudo=(sudo)
    if ! { "${sudo[@]}" apt-get update >&2 &&
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >&2; }; then
        echo "$caller: error: could not install $*; $why" >&2
        exit 1
    fi
}
