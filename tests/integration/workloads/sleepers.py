"""Many threads asleep a few calls deep, for pystrobe's read counts.

    sleepers.py N [DURATION]    (default: an hour; the tests kill it sooner)

Starts N threads, each asleep in time.sleep under outer() and inner(), then
prints "ready". Runs on Python 3.8+.
"""
import sys
import threading
import time

LONG = 3600.0
started = threading.Semaphore(0)


def inner():
    started.release()
    while True:
        time.sleep(LONG)


def outer():
    inner()


def main(n, duration):
    for _ in range(n):
        threading.Thread(target=outer, daemon=True).start()
    for _ in range(n):
        started.acquire()
    time.sleep(0.1)
    print("ready", flush=True)
    time.sleep(duration)


if __name__ == "__main__":
    main(int(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else LONG)
