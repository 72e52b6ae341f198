"""The program tests/images/enterc-3.11/3.12.img are of (tools/record_images.sh
enterc): main() pulls a generator with next(), a call from C into the
evaluation loop, and between two pulls sorts a list (C code whose calls
reuse the C stack the next pull's _PyCFrame will take). Stopped by gdb
(tools/enter_c.gdb) as the interpreter enters the generator, before its
_PyCFrame is filled in: the thread's cframe then points at what sorted()
left there.

Usage: enter_c.py SECONDS
"""
import sys
import time


def spin():
    return sum(range(20000))


def values():
    while True:
        yield spin()


def main():
    end = time.time() + float(sys.argv[1])
    g = values()
    keys = list(range(50, 0, -1))
    while time.time() < end:
        next(g)
        sorted(keys, key=str)


main()
