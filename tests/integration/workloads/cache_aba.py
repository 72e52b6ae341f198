"""Two call chains through frames at the same addresses, alternating: the
frames of chain_a and chain_b occupy the same slots of the data stack, so a
frame cache keyed on addresses alone would mix them (the ABA case).
Then, for the line test, a top frame that moves between two lines.

Usage: cache_aba.py aba|lines SECONDS [SPIN]
SPIN (default 2000) is the leaf's loop count: a small one makes the two
chains take turns so fast that many reads catch the stack as it changes.
"""
import sys
import time


def spin(n):
    x = 0
    for i in range(n):
        x += i
    return x


SPIN = int(sys.argv[3]) if len(sys.argv) > 3 else 2000


def a2():
    return spin(SPIN)


def a1():
    return a2()


def chain_a():
    return a1()


def b2():
    return spin(SPIN)


def b1():
    return b2()


def chain_b():
    return b1()


def lines(end):
    while time.time() < end:
        t = time.time() + 0.02
        while time.time() < t:
            pass  # LINE-A
        t = time.time() + 0.02
        while time.time() < t:
            pass  # LINE-B


def main():
    mode, seconds = sys.argv[1], float(sys.argv[2])
    end = time.time() + seconds
    if mode == "aba":
        while time.time() < end:
            chain_a()
            chain_b()
    else:
        lines(end)


main()
