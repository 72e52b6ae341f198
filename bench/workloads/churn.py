"""Benchmark workload: a 900-deep recursion and back, with a short leaf.

Each unit descends 900 frames, does a little work at the bottom and returns
all the way. CPython keeps frames on a per-thread data stack allocated in
chunks (mmap'ed and munmap'ed as the stack crosses chunk boundaries), so the
stack grows and shrinks through several chunks all the time, and a sample
mostly finds a stack that changed since the last one. See _bench.py for the
command line.
"""
import sys

import _bench

DEPTH = 900     # frames of descend() under unit()
LEAF_N = 50     # a short leaf: most of the time goes to calls and returns

sys.setrecursionlimit(DEPTH + 1000)


def leaf(n):
    total = 0
    for i in range(n):
        total += i
    return total


def descend(depth):
    if depth == 1:
        return leaf(LEAF_N)
    return descend(depth - 1) + 1


def unit():
    return descend(DEPTH)


if __name__ == "__main__":
    _bench.run(unit, __doc__)
