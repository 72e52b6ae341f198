"""The program the recorded images in tests/images are of (make images):
two call chains that take turns through frames at the same addresses, each
ending in spin(), which spends its time in sum() (C), so that a moment
caught in spin() has every frame at a known line.

Usage: aba.py SECONDS
"""
import sys
import time


def spin():
    return sum(range(200000))


def a2():
    return spin()


def a1():
    return a2()


def chain_a():
    return a1()


def b2():
    return spin()


def b1():
    return b2()


def chain_b():
    return b1()


def main():
    end = time.time() + float(sys.argv[1])
    while time.time() < end:
        chain_a()
        chain_b()


main()
