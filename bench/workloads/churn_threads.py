"""Benchmark workload: churn.py's recursion in 100 threads at once.

A unit is one descent and return of one thread; with --work N the N units
are shared among the threads (N rounded up to a multiple of THREADS). The
threads are started and waiting before "ready" is printed. Command line as
in _bench.py.
"""
import _bench
from churn import unit

THREADS = 100


if __name__ == "__main__":
    _bench.run_threads(lambda k: unit(), __doc__, THREADS)
