"""Benchmark workload: churn.py's recursion in 100 threads at once.

A unit is one descent and return of one thread; with --work N the N units
are shared among the threads (N rounded up to a multiple of THREADS). The
threads are started and waiting before "ready" is printed. Command line as
in _bench.py.
"""
import itertools
import threading
import time

import _bench
from churn import unit

THREADS = 100


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
            for _ in range(per_thread):
                unit()
                progress.set(next(counter))
            return
        while not stop.is_set():
            unit()
            progress.set(next(counter))

    unit()  # warm up
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
