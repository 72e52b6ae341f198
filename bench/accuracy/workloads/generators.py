"""Accuracy workload: a generator pipeline pulled by sum() (C).

    generators.py DURATION SEED

source -> squares -> evens -> batches -> sums, each stage a generator over
the one before, the whole pulled by sum() in main(). The stack switches
between the stages millions of times a second.

Valid stacks: `<module>;main` followed by a prefix of
sums;batches;evens;squares;source (in that order).
Prints "ready {}" once set up. Runs on Python 3.8+.
"""
import sys
import time

ITEMS = 2000
BATCH = 16


def source(n):
    for i in range(n):
        yield i


def squares(it):
    for x in it:
        yield x * x


def evens(it):
    for x in it:
        if x % 2 == 0:
            yield x


def batches(it, size):
    batch = []
    for x in it:
        batch.append(x)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def sums(it):
    for batch in it:
        yield sum(batch)


def main(duration):
    print("ready {}", flush=True)
    end = time.monotonic() + duration
    total = 0
    while time.monotonic() < end:
        total += sum(sums(batches(evens(squares(source(ITEMS))), BATCH)))
    return total


if __name__ == "__main__":
    main(float(sys.argv[1]))
