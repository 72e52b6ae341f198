"""exec_second.py SECONDS: the program exec_into.py becomes: spin in
second_program_work() for SECONDS, then exit 0."""
import sys
import time


def second_program_work(seconds):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
    return n


second_program_work(float(sys.argv[1]))
