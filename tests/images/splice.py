"""The program tests/images/splice-3.X-*.img are of (tools/record_images.sh
splice): two call chains whose frames have the same sizes, level by level,
and so the same addresses on the data stack (3.11+), taking turns. Chain b
is one call deeper (spin_b); chain a's leaf, a2, spends its time in sum()
itself. So at a moment in a2 the data stack just above a2 still holds the
frame spin_b left there when chain b last returned, and its caller field
names a2's address: a walk that takes the thread's top from a moment in
spin_b and the frames from a moment in a2 finds spin_b under a2, a chain
the program never makes, made of frames that each look in place.

Usage: splice.py SECONDS
"""
import sys
import time

N = 200000


def spin_b(r):
    return sum(r)


def a2(n):
    return sum(range(n))


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
