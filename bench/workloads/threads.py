"""Benchmark workload: 50 threads, each alternating CPU work and short sleeps.

A unit is one CPU burst of one thread; every SLEEP_EVERY-th unit a thread
sleeps 1 ms. With --work N the N units are shared among the threads (N
rounded up to a multiple of THREADS). The threads are started and waiting
before "ready" is printed. Command line as in _bench.py.
"""
import itertools
import threading
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


def main():
    args = _bench.parse_args(__doc__)
    progress = _bench.Progress(args.progress)
    counter = itertools.count(1)  # next() is atomic under the GIL
    go = threading.Event()
    stop = threading.Event()
    per_thread = None if args.work is None else -(-args.work // THREADS)

    def worker():
        go.wait()
        if per_thread is not None:
            for k in range(1, per_thread + 1):
                work_item(k)
                progress.set(next(counter))
            return
        for k in itertools.count(1):
            work_item(k)
            progress.set(next(counter))
            if stop.is_set():
                return

    crunch(BURST_N)  # warm up
    threads = [threading.Thread(target=worker, name=f"worker-{i}") for i in range(THREADS)]
    for t in threads:
        t.start()
    _bench.announce(args)
    t0 = time.perf_counter()
    go.set()
    if args.duration is not None:
        time.sleep(args.duration)
        stop.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    units = next(counter) - 1
    if args.work is not None:
        print(f"elapsed {elapsed:.6f} units {units}", flush=True)
    else:
        print(f"units {units} seconds {elapsed:.6f}", flush=True)


if __name__ == "__main__":
    main()
