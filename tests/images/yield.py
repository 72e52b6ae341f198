"""The program tests/images/yield-3.12.img is of (tools/record_images.sh
yield): main pulls outer with sum() (C), outer pulls inner with a for loop
(from 3.12 an inline resume: inner's frame is linked to outer's while it
runs). Stopped at random moments until gdb (tools/yield_frame.gdb) finds
the thread inside inner's yield with inner's frame unlinked already and
still the thread's current frame: CPython 3.12 built by GCC may store the
two in either order.

Usage: yield.py SECONDS
"""
import sys
import time


def inner(n):
    for i in range(n):
        yield i


def outer(it):
    for x in it:
        yield x


def main():
    end = time.time() + float(sys.argv[1])
    while time.time() < end:
        sum(outer(inner(100000)))


main()
