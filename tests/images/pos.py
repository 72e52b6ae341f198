"""The program tests/images/pos-3.15-*.img are of (tools/record_images.sh
pos): one call of a2 calls spin and spin2 in turn, from two lines, so that
its two moments differ only above a2 and in a2's position (the frame
cache's anchor, whose position test_images.c's test_anchor_position
needs checked). Same layout as aba.py: spin() spends its time in sum().

Usage: pos.py SECONDS
"""
import sys
import time


def spin():
    return sum(range(200000))


def spin2():
    return sum(range(200000))


def a2(end):
    while time.time() < end:
        spin()
        spin2()


def a1(end):
    a2(end)


def chain(end):
    a1(end)


def main():
    chain(time.time() + float(sys.argv[1]))


main()
