"""Benchmark workload: 50 threads, each alternating CPU work and short sleeps.

A unit is one CPU burst of one thread; every SLEEP_EVERY-th unit a thread
sleeps 1 ms. With --work N the N units are shared among the threads (N
rounded up to a multiple of THREADS). The threads are started and waiting
before "ready" is printed. Command line as in _bench.py.
"""
import time

import _bench

THREADS = 50
SLEEP_EVERY = 4  # units between sleeps
SLEEP_S = 0.001
BURST_N = 300


def crunch(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def work_item(k):
    crunch(BURST_N)
    if k % SLEEP_EVERY == 0:
        time.sleep(SLEEP_S)


if __name__ == "__main__":
    _bench.run_threads(work_item, __doc__, THREADS)
