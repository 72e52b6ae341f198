"""Benchmark workload: a pipeline of generators (source, map, filter, batch,
reduce) pulled by sum().

Each sample sees a stack of suspended and resumed generator frames above a C
call (sum). See _bench.py for the command line.
"""
import _bench

ITEMS = 2000  # items through the pipeline per unit
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


def unit():
    return sum(sums(batches(evens(squares(source(ITEMS))), BATCH)))


if __name__ == "__main__":
    _bench.run(unit, __doc__)
