"""gc_work.py SECONDS: makes cyclic garbage and collects it, over and over:
collections start both in gc.collect() (from make_garbage) and automatically
(allocating in Node.__init__). async_gc.py imports make_garbage from it (it
must be staged beside it)."""
import gc
import sys
import time


class Node:
    def __init__(self):
        self.other = self


def make_garbage():
    for _ in range(20000):
        Node()
    gc.collect()


def main(seconds):
    end = time.time() + seconds
    while time.time() < end:
        make_garbage()


if __name__ == "__main__":
    main(float(sys.argv[1]))
