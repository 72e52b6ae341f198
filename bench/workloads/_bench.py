"""The command line every benchmark workload shares.

A workload is a function `unit()` doing one small, fixed piece of work
(roughly 0.1 to 2 ms). This module runs it in one of three ways:

    WORKLOAD.py                     units until killed
    WORKLOAD.py --duration S        units for S seconds, then prints
                                    "units N seconds T"
    WORKLOAD.py --work N            exactly N units, then prints
                                    "elapsed T units N" (T: seconds of the
                                    N units alone, not of start-up)

and, with any of them:

    --wait            print "ready PID", then wait for a line on stdin
                      before the first unit (so a profiler can attach
                      first); without it "ready PID" is printed too, and
                      work starts at once
    --progress FILE   keep the number of units done so far in the first 8
                      bytes of FILE (little-endian unsigned), updated after
                      every unit, so that another process can measure the
                      rate of work while it profiles this one

A multi-threaded workload calls run_threads instead, with a unit(k) that
each of its threads runs (k: the thread's own count of units, from 1).
"""
import argparse
import itertools
import mmap
import os
import struct
import sys
import threading
import time

_COUNT = struct.Struct("<Q")


def parse_args(description):
    p = argparse.ArgumentParser(description=description)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--duration", type=float, metavar="S",
                   help="run for S seconds and print the units done")
    g.add_argument("--work", type=int, metavar="N",
                   help="run N units and print the elapsed time")
    p.add_argument("--progress", metavar="FILE",
                   help="keep the count of units done in FILE")
    p.add_argument("--wait", action="store_true",
                   help="wait for a line on stdin before starting")
    return p.parse_args()


class Progress:
    """A shared counter in a file (a no-op without a file)."""

    def __init__(self, path):
        self._mm = None
        if path:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.ftruncate(fd, mmap.PAGESIZE)
                self._mm = mmap.mmap(fd, mmap.PAGESIZE)
            finally:
                os.close(fd)

    def set(self, n):
        if self._mm is not None:
            _COUNT.pack_into(self._mm, 0, n)


def announce(args):
    """Say the workload is set up; with --wait, block until told to go."""
    print(f"ready {os.getpid()}", flush=True)
    if args.wait:
        sys.stdin.readline()


def run(unit, description):
    """Run unit() as the command line asks (see the module docstring)."""
    args = parse_args(description)
    progress = Progress(args.progress)
    unit()  # warm up: first-call specialisation, imports, caches
    announce(args)
    if args.work is not None:
        t0 = time.perf_counter()
        for i in range(1, args.work + 1):
            unit()
            progress.set(i)
        elapsed = time.perf_counter() - t0
        print(f"elapsed {elapsed:.6f} units {args.work}", flush=True)
        return
    deadline = None if args.duration is None else time.monotonic() + args.duration
    t0 = time.perf_counter()
    for n in itertools.count(1):
        unit()
        progress.set(n)
        if deadline is not None and time.monotonic() >= deadline:
            break
    print(f"units {n} seconds {time.perf_counter() - t0:.6f}", flush=True)


def run_threads(unit, description, nthreads):
    """Run unit(k) in nthreads threads as the command line asks: with --work
    N, the N units shared among the threads (N rounded up to a multiple of
    nthreads); the threads are started and waiting before "ready"."""
    args = parse_args(description)
    progress = Progress(args.progress)
    counter = itertools.count(1)  # next() is atomic under the GIL
    go = threading.Event()
    stop = threading.Event()
    per_thread = None if args.work is None else -(-args.work // nthreads)

    def worker():
        go.wait()
        for k in itertools.count(1):
            if per_thread is not None and k > per_thread:
                return
            unit(k)
            progress.set(next(counter))
            if per_thread is None and stop.is_set():
                return

    unit(1)  # warm up
    threads = [threading.Thread(target=worker, name=f"worker-{i}") for i in range(nthreads)]
    for t in threads:
        t.start()
    announce(args)
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
