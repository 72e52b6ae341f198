"""The program tests/images/init-3.X.img are of (tools/record_images.sh
init): objects made over and over, each __init__ spending its time in sum()
(C). Once the call that makes them is specialized (CALL_ALLOC_AND_ENTER_INIT,
3.13+), CPython runs each __init__ above a frame of its own code object,
also named __init__, which checks that __init__ returned None and never
leaves its prologue. A moment caught in spin() under __init__ has that
frame on its stack (test_images.c's test_init_shim).

Usage: init.py SECONDS
"""
import sys
import time


def spin():
    return sum(range(200000))


class Made:
    def __init__(self):
        spin()


def make():
    return Made()


def main():
    end = time.time() + float(sys.argv[1])
    while time.time() < end:
        make()


main()
