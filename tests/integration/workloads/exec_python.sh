#!/bin/sh
# exec_python.sh PYTHON ARGS...: becomes Python (exec), so the process that
# `pystrobe run -- exec_python.sh ...` started is the Python process itself,
# after one exec.
py="$1"
shift
exec "$py" "$@"
