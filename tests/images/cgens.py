"""The program tests/images/cgens-3.X-*.img are of (tools/record_images.sh
cgens): main pulls two generators in turn, outer and spin, each with next()
(C) through a partial (C), at one call of main's: a generator's frame is
linked, while it runs, to the entry frame that next()'s call into the
interpreter puts on the C stack (3.12+), which names main's frame; both
calls put it at the same address. At A outer runs, in sum() (C), under
main; at B spin does, outer suspended: its frame unlinked. A walk that
takes its top frame from A and outer's frame from B finds outer suspended,
with no caller, though outer was on top of main at A.

Usage: cgens.py SECONDS
"""
import functools
import sys
import time

N = 200000


def outer():
    while True:
        yield sum(range(N))


def spin():
    while True:
        yield sum(range(N))


def main():
    end = time.time() + float(sys.argv[1])
    steps = (functools.partial(next, outer()), functools.partial(next, spin()))
    i = 0
    while time.time() < end:
        steps[i % 2]()
        i += 1


main()
