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
[ -z "$missing" ] && { install_speedscope; exit 0; }
if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages:$missing (run as root to install them)" >&2
    exit 1
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
install_speedscope
