"""A thread "deep" recursing DEPTH calls down (sys.setrecursionlimit), whose
leaf spins. With WIGGLE, the leaf keeps calling a recursion of 0 to WIGGLE
more frames: the stack's top moves all the time. With HOLD (microseconds),
each depth of that recursion is held that long, so that most reads of the
whole stack see one moment. Prints "ready" once at the bottom.

    deep.py DEPTH [WIGGLE [HOLD]]"""
import sys
import threading
import time

DEPTH = int(sys.argv[1])
WIGGLE = int(sys.argv[2]) if len(sys.argv) > 2 else 0
HOLD = int(sys.argv[3]) / 1e6 if len(sys.argv) > 3 else 0.0
sys.setrecursionlimit(DEPTH + WIGGLE + 1000)
# Before 3.11 each Python call recurses on the C stack too.
threading.stack_size(512 << 20)


def wiggle(k):
    if k > 0:
        return wiggle(k - 1)
    if HOLD:
        until = time.perf_counter() + HOLD
        while time.perf_counter() < until:
            pass
    return 0


def spin():
    print("ready", flush=True)
    k = n = 0
    while True:
        if WIGGLE:
            wiggle(k)
            k = (k + 1) % (WIGGLE + 1)
        else:
            n += 1


def down(n):
    if n == 0:
        return spin()
    return down(n - 1)


t = threading.Thread(target=down, args=(DEPTH,), name="deep")
t.start()
t.join()
