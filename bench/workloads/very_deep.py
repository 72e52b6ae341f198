"""Benchmark workload: a 950-deep recursion whose bottom calls a hot leaf.

Tests the cost of walking very long stacks (the recursion limit is raised
for it). The recursion is deep.py's. See _bench.py for the command line.
"""
import sys

import _bench
from deep import recurse

DEPTH = 950      # frames of recurse() under unit()
LEAF_CALLS = 40  # enough leaf work per descent that most samples are at depth

sys.setrecursionlimit(DEPTH + 1000)


def unit():
    return recurse(DEPTH, LEAF_CALLS)


if __name__ == "__main__":
    _bench.run(unit, __doc__)
