"""exec_into.py SECONDS PROGRAM ARGS...: spin in python_work() for SECONDS,
then replace this process's program with PROGRAM ARGS (os.execv)."""
import os
import sys
import time


def python_work(seconds):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
    return n


print("ready", os.getpid(), flush=True)
python_work(float(sys.argv[1]))
os.execv(sys.argv[2], sys.argv[2:])
