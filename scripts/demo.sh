#!/bin/sh
# Run examples/demo.py under a Python that pystrobe supports (3.13+) and dump
# its stacks once.
#
#   demo.sh PYSTROBE_BINARY
#
# The Python is the first of: python3 on PATH if it is 3.13 or newer; pyenv's
# 3.13.0; python3.15 in the sid root (.cache/sid-root, see sidroot.sh), run
# through chroot with the example copied into the root. The example is always
# stopped on exit.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -eq 1 ] || { echo "usage: $0 PYSTROBE_BINARY" >&2; exit 2; }
bin=$1
[ -x "$bin" ] || { echo "demo: $bin is not an executable (run make first)" >&2; exit 1; }
example=$here/examples/demo.py
sidroot=${PYSTROBE_SIDROOT:-$here/.cache/sid-root}

is_supported() { # python
    "$1" -c 'import sys; sys.exit(sys.version_info < (3, 13))' 2>/dev/null
}

python=""
script=$example
staged=""
if command -v python3 >/dev/null 2>&1 && is_supported python3; then
    # The real executable, not a wrapper (pyenv shim), so $! is the Python.
    python=$(python3 -c 'import sys; print(sys.executable)')
fi
if [ -z "$python" ]; then
    prefix=""
    if command -v pyenv >/dev/null 2>&1; then
        prefix=$(pyenv prefix 3.13.0 2>/dev/null || true)
    fi
    for p in "$prefix/bin/python3.13" \
             "${PYENV_ROOT:-$HOME/.pyenv}/versions/3.13.0/bin/python3.13" \
             /root/.pyenv/versions/3.13.0/bin/python3.13; do
        if [ -x "$p" ] && is_supported "$p"; then python=$p; break; fi
    done
fi
if [ -z "$python" ] && [ -x "$sidroot/usr/bin/python3.15" ]; then
    staged=$sidroot/tmp/pystrobe-demo
    mkdir -p "$staged"
    cp "$example" "$staged/demo.py"
    script=/tmp/pystrobe-demo/demo.py
    python="chroot $sidroot /usr/bin/python3.15"   # chroot execs: $! is the Python
fi
if [ -z "$python" ]; then
    echo "demo: no Python 3.13+ found (python3, pyenv 3.13.0, or make sidroot)" >&2
    exit 1
fi

pid=""
cleanup() {
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    if [ -n "$staged" ]; then rm -rf "$staged"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "demo: starting $python $script"
# $python is split on purpose: it may be "chroot ROOT /usr/bin/python3.15".
# shellcheck disable=SC2086
$python "$script" &
pid=$!
sleep 1
if ! kill -0 "$pid" 2>/dev/null; then
    echo "demo: the example exited early" >&2
    exit 1
fi
echo "demo: $bin dump $pid"
"$bin" dump "$pid"
