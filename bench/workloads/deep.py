"""Benchmark workload: a 50-deep recursion whose bottom calls a hot leaf.

Nearly every sample sees the same 50-frame stack with the leaf on top, the
case a frame cache is built for. See _bench.py for the command line.
very_deep.py runs the same code deeper.
"""
import _bench

DEPTH = 50       # frames of recurse() under unit()
LEAF_CALLS = 20  # leaf calls per descent: most time is spent at full depth
LEAF_N = 200


def leaf(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


def recurse(depth, leaf_calls=LEAF_CALLS):
    if depth == 1:
        total = 0
        for _ in range(leaf_calls):
            total += leaf(LEAF_N)
        return total
    return recurse(depth - 1, leaf_calls) + 1


def unit():
    return recurse(DEPTH)


if __name__ == "__main__":
    _bench.run(unit, __doc__)
