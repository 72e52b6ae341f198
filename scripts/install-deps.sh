#!/bin/sh
# Install the Debian packages pystrobe needs to build and test, if missing.
set -eu
PKGS="make gcc clang libclang-rt-dev libelf-dev zlib1g-dev libcmocka-dev pkg-config python3 python3-pytest
      python3-dev python3-setuptools python3-wheel
      debootstrap util-linux procps chromium
      python3-pip
      man-db
      debhelper
      dh-python
      dpkg-dev
      lintian
      bash-completion
      zsh
      protobuf-c-compiler
      libprotobuf-c-dev
      golang-go
      python3-jsonschema
      libzstd-dev zstd
      libdw-dev
      libncurses-dev
      tmux
      gdb
      strace
      nodejs"
# --- speedscope (npm), whose Chrome trace importer reads --chrometrace in
# tests/integration/test_pyspy_habits.py: pinned, into .cache/npm of the tree.
install_speedscope() {
    root=$(cd "$(dirname "$0")/.." && pwd)
    [ -f "$root/.cache/npm/node_modules/speedscope/dist/release/index.html" ] && return 0
    command -v npm >/dev/null || { echo "install-deps: npm not found (nodejs provides it)" >&2; return 1; }
    mkdir -p "$root/.cache/npm"
    npm install --prefix "$root/.cache/npm" --no-audit --no-fund --silent speedscope@1.25.0
}
# --- end speedscope
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
# npm, for the speedscope package the --speedscope tests install (pinned) into
# .cache/npm: Debian's npm, unless a nodejs that brings its own is installed.
command -v npm >/dev/null 2>&1 || missing="$missing npm"
if [ -n "$missing" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-deps: missing packages:$missing (run as root to install them)" >&2
        exit 1
    fi
    echo "install-deps: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing
fi

# The Firefox Profiler's own importer, for the --gecko tests: the npm package
# @firefox-devtools/profiler-cli at a pinned version, unpacked into
# .cache/profiler-cli (it runs on Debian 12's Node.js 20 although it asks for
# 24; nothing here installs or replaces Node.js).
PROFILER_CLI_VERSION=0.10.0
cli_dir="$(dirname "$0")/../.cache/profiler-cli"
if command -v npm >/dev/null 2>&1 &&
    [ ! -e "$cli_dir/package/dist/profiler-cli.js" ]; then
    mkdir -p "$cli_dir"
    (cd "$cli_dir" &&
        npm pack --silent "@firefox-devtools/profiler-cli@$PROFILER_CLI_VERSION" >/dev/null &&
        tar xzf "firefox-devtools-profiler-cli-$PROFILER_CLI_VERSION.tgz") ||
        echo "install-deps: could not fetch profiler-cli $PROFILER_CLI_VERSION (npm)" >&2
fi

install_speedscope
