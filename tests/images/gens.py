"""The program tests/images/gens-3.X-*.img are of (tools/record_images.sh
gens): main pulls a generator, outer, which pulls another, inner, each with
a for loop (from 3.12 a resume is an inline call: the resumed generator's
frame is linked to its caller's while it runs, and unlinked as it yields).
Each generator spends its time in sum() (C), at one line: at A in inner,
under outer, under main; at B in outer, inner suspended. A walk that takes
its top frame from A and inner's frame from B finds inner suspended, its
caller unlinked, though inner was on top of outer at A.

Usage: gens.py SECONDS
"""
import sys
import time

N = 200000


def inner():
    while True:
        yield sum(range(N))


def outer(it):
    for x in it:
        yield sum(range(N)) + x


def main():
    end = time.time() + float(sys.argv[1])
    for _ in outer(inner()):
        if time.time() > end:
            break


main()
