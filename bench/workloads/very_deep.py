"""Benchmark workload: a 950-deep recursion whose bottom calls a hot leaf.

Tests the cost of walking very long stacks (the recursion limit is raised
for it). See _bench.py for the command line.
"""
import sys

import _bench

DEPTH = 950      # frames of recurse() under unit()
LEAF_CALLS = 40  # enough leaf work per descent that most samples are at depth
LEAF_N = 200

sys.setrecursionlimit(DEPTH + 1000)


def leaf(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


def recurse(depth):
    if depth == 1:
        total = 0
        for _ in range(LEAF_CALLS):
            total += leaf(LEAF_N)
        return total
    return recurse(depth - 1) + 1


def unit():
    return recurse(DEPTH)


if __name__ == "__main__":
    _bench.run(unit, __doc__)
