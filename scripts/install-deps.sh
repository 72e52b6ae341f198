#!/bin/sh
# Install the Debian packages pystrobe needs to build and test, if missing.
set -eu
PKGS="make gcc clang libclang-rt-dev libelf-dev zlib1g-dev libcmocka-dev pkg-config python3 python3-pytest
      python3-dev python3-setuptools python3-wheel
      debootstrap util-linux procps chromium
      libncurses-dev
      tmux"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages:$missing (run as root to install them)" >&2
    exit 1
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
