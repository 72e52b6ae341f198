"""The program tests/images/tops-3.X-*.img are of (tools/record_images.sh
tops): two call chains whose frames have the same sizes, level by level,
and so the same addresses on the data stack (3.11+), each with a leaf of
its own (spin_a, spin_b) that spends its time in sum(). A copy of the data
stack paused between a2's bytes, at a moment in spin_a, and those of the
frame above, at a moment in spin_b, finds spin_b under a2: each frame in
place, a2 calling, and a later read made once the program is back in
spin_a shows a2 and a1 as the copy had them. Only a second read of the top
frame shows that it is not a2's callee.

Usage: tops.py SECONDS
"""
import sys
import time

N = 200000


def spin_a(r):
    return sum(r)


def spin_b(r):
    return sum(r)


def a2(n):
    return spin_a(range(n))


def b2(n):
    return spin_b(range(n))


def a1(n):
    return a2(n)


def b1(n):
    return b2(n)


def main():
    end = time.time() + float(sys.argv[1])
    while time.time() < end:
        b1(N)
        a1(N)


main()
