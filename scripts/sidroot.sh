#!/bin/sh
# The Debian sid root filesystem with python3.13, 3.14 and 3.15 (and their
# headers), built once into .cache/sid-root and reused. It also has libelf,
# which the pystrobe Python module needs when python3.15 there imports it.
#
#   sidroot.sh ensure    build it unless it is there and complete
#   sidroot.sh mount     mount /proc and a /dev of its own inside it (for tools that
#                        need them)
#   sidroot.sh umount    undo mount
#   sidroot.sh austin    unpack Debian's austin into the root (for make bench-austin;
#                        its package cannot be installed in sid, only unpacked)
#   sidroot.sh path      print its path
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
ROOT=${PYSTROBE_SIDROOT:-$here/.cache/sid-root}
MIRROR=${PYSTROBE_MIRROR:-http://deb.debian.org/debian}
PYS="python3.13 python3.14 python3.15"
EXTRA="libelf1t64"

complete() {
    [ -f "$ROOT/.pystrobe-complete" ] || return 1
    for p in $PYS; do [ -x "$ROOT/usr/bin/$p" ] || return 1; done
    for p in $EXTRA; do
        grep -qx "Package: $p" "$ROOT/var/lib/dpkg/status" 2>/dev/null || return 1
    done
}

case "${1:-ensure}" in
ensure)
    complete && exit 0
    [ "$(id -u)" -eq 0 ] || { echo "sidroot: building the sid root needs root" >&2; exit 1; }
    "$0" umount 2>/dev/null || true
    rm -rf "$ROOT"
    mkdir -p "$(dirname "$ROOT")"
    include=""
    for p in $PYS; do include="$include,$p,$p-dev"; done
    for p in $EXTRA; do include="$include,$p"; done
    echo "sidroot: debootstrap sid into $ROOT (about a minute)"
    debootstrap --variant=minbase --include="${include#,}" sid "$ROOT" "$MIRROR" \
        >"$ROOT.log" 2>&1 || { tail -20 "$ROOT.log" >&2; exit 1; }
    touch "$ROOT/.pystrobe-complete"
    ;;
mount)
    mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
    # /dev: a tmpfs holding copies of the root's own device nodes (those
    # debootstrap made), not the host's /dev bound there: a run killed
    # while it is mounted leaves it behind, and removing the tree then
    # (rm -rf) would delete the host's device nodes through a bind mount.
    if ! mountpoint -q "$ROOT/dev"; then
        nodes=$(mktemp -d)
        cp -a "$ROOT/dev/." "$nodes/"
        mount -t tmpfs -o mode=755,nosuid,size=1m pystrobe-dev "$ROOT/dev"
        cp -a "$nodes/." "$ROOT/dev/"
        rm -rf "$nodes"
        mkdir -p "$ROOT/dev/shm" "$ROOT/dev/pts"
        chmod 1777 "$ROOT/dev/shm"
    fi
    ;;
umount)
    for m in dev proc; do
        if mountpoint -q "$ROOT/$m"; then umount "$ROOT/$m" || umount -l "$ROOT/$m"; fi
    done
    ;;
path)
    echo "$ROOT"
    ;;
austin)
    [ -x "$ROOT/usr/bin/austin" ] && exit 0
    "$0" mount
    chroot "$ROOT" sh -c 'cd /tmp && apt-get download -q austin && dpkg -x austin_*.deb / &&
        rm -f austin_*.deb && apt-get install -y -q libunwind8' ||
        { "$0" umount; echo "sidroot: could not unpack austin" >&2; exit 1; }
    "$0" umount
    ;;
*)
    echo "usage: $0 ensure|mount|umount|path|austin" >&2
    exit 2
    ;;
esac
