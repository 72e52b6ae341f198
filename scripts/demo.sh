#!/bin/sh
# The demo: profile examples/demo.py with pystrobe.
#
#   demo.sh PYSTROBE_BINARY
#
# Runs the example under `pystrobe run --flamegraph` for a few seconds (the
# flame graph goes to build/demo/flamegraph.html), then again for the pstats
# table, and prints the top of it. The Python is python3 on PATH if pystrobe
# supports it (3.8+), else pyenv's 3.13.0, else python3.15 in the sid root
# (.cache/sid-root, see sidroot.sh) through chroot.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -eq 1 ] || { echo "usage: $0 PYSTROBE_BINARY" >&2; exit 2; }
bin=$1
[ -x "$bin" ] || { echo "demo: $bin is not an executable (run make first)" >&2; exit 1; }
example=$here/examples/demo.py
sidroot=${PYSTROBE_SIDROOT:-$here/.cache/sid-root}
out=$here/build/demo
mkdir -p "$out"

is_supported() { # python
    "$1" -c 'import sys; sys.exit(not (3, 8) <= sys.version_info[:2] <= (3, 15))' 2>/dev/null
}

set --
if command -v python3 >/dev/null 2>&1 && is_supported python3; then
    # The real executable, not a wrapper such as pyenv's shim.
    set -- "$(python3 -c 'import sys; print(sys.executable)')" "$example"
elif [ -x "${PYENV_ROOT:-$HOME/.pyenv}/versions/3.13.0/bin/python3.13" ]; then
    set -- "${PYENV_ROOT:-$HOME/.pyenv}/versions/3.13.0/bin/python3.13" "$example"
elif [ -x "$sidroot/usr/bin/python3.15" ]; then
    mkdir -p "$sidroot/tmp/pystrobe-demo"
    cp "$example" "$sidroot/tmp/pystrobe-demo/demo.py"
    set -- chroot "$sidroot" /usr/bin/python3.15 /tmp/pystrobe-demo/demo.py
else
    echo "demo: no Python 3.8+ found (python3, pyenv 3.13.0, or make sidroot)" >&2
    exit 1
fi

echo "demo: pystrobe run --flamegraph -d 3 -- $*"
"$bin" run --flamegraph -r 1khz -d 3 -o "$out/flamegraph.html" -- "$@"
echo
echo "demo: pystrobe run -d 3 -l 12 -- $*   (the pstats table)"
"$bin" run -r 1khz -d 3 -l 12 -- "$@"
echo
echo "demo: the flame graph (open it in a browser): $out/flamegraph.html"
