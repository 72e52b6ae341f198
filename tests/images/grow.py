"""The program tests/images/grow-3.X-*.img are of (tools/record_images.sh
grow): one thread alternates between a shallow stack (spin under shallow)
and one 41 calls deeper (spin under deep, 41 times), so that its data stack
grows by a few KB between the two moments: past what second copies of the
shallow moment's frames covered before (test_images.c's test_grow).

Usage: grow.py SECONDS
"""
import sys
import time


def spin():
    return sum(range(200000))


def shallow():
    return spin()


def deep(n):
    if n:
        return deep(n - 1)
    return spin()


def main():
    end = time.time() + float(sys.argv[1])
    while time.time() < end:
        shallow()
        deep(40)


main()
