"""Threads that wake in turn and move between two functions, for pystrobe's
reuse of idle threads (pys_options.reuse_idle).

    tickers.py N [DURATION]    (default: an hour; the tests kill it sooner)

Starts N threads; each sleeps TICK seconds in tick_a(), then TICK in
tick_b(), and so on, each wake taking the GIL for a moment. Prints "ready"
once all run. Runs on Python 3.8+.
"""
import sys
import threading
import time

LONG = 3600.0
TICK = 0.005
started = threading.Semaphore(0)


def tick_a():
    time.sleep(TICK)


def tick_b():
    time.sleep(TICK)


def ticker():
    started.release()
    while True:
        tick_a()
        tick_b()


def main(n, duration):
    for _ in range(n):
        threading.Thread(target=ticker, daemon=True).start()
    for _ in range(n):
        started.acquire()
    print("ready", flush=True)
    time.sleep(duration)


if __name__ == "__main__":
    main(int(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else LONG)
