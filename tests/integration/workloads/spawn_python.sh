#!/bin/sh
# spawn_python.sh PYTHON ARGS...: starts Python as a child, waits for it, says
# so on stderr and exits with Python's status. `pystrobe run -- spawn_python.sh
# ...` must find the Python process among the shell's children.
py="$1"
shift
"$py" "$@"
status=$?
echo "spawn_python.sh: python exited with status $status" >&2
exit $status
