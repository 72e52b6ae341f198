"""Two call chains through frames at the same addresses, alternating: the
frames of chain_a and chain_b occupy the same slots of the data stack, so a
frame cache keyed on addresses alone would mix them (the ABA case).
In "leaf" mode two such chains call one leaf function, whose line
tells them apart: a chain's callers under the other's leaf line is a
stack the program never has.
Then, for the line test, a top frame that moves between two lines; for
the entry frame test ("next"), a function that resumes two generators from
two lines through next(), a call from C each time; and
for the unwinding test, a recursion 900 deep that keeps unwinding to its
bottom and going down again, its leaf a spin ("hold": one that stays down,
its leaf spinning until the end, 80 deep).

Usage: cache_aba.py aba|leaf|lines|next|deep|hold SECONDS [SPIN]
SPIN (default 2000) is the leaf's loop count: a small one makes the two
chains take turns so fast that many reads catch the stack as it changes.
It prints "ready" once it is in its mode's loop ("hold": at its leaf).
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


def leaf(tag):
    x = 0
    if tag == "c":
        for i in range(SPIN):
            x += i  # LEAF-C
    else:
        for i in range(SPIN):
            x += i  # LEAF-D
    return x


def c2():
    return leaf("c")


def c1():
    return c2()


def chain_c():
    return c1()


def d2():
    return leaf("d")


def d1():
    return d2()


def chain_d():
    return d1()


def recurse(depth):
    if depth == 0:
        total = 0
        for _ in range(40):
            total += spin(200)
        return total
    return recurse(depth - 1) + 1


def hold(depth, end):
    if depth == 0:
        print("ready", flush=True)  # inline: no frame of its own to be sampled
        while time.time() < end:
            spin(SPIN)
        return 0
    return hold(depth - 1, end) + 1


def lines(end):
    while time.time() < end:
        t = time.time() + 0.02
        while time.time() < t:
            pass  # LINE-A
        t = time.time() + 0.02
        while time.time() < t:
            pass  # LINE-B


def gen_a():
    while True:
        yield spin(SPIN)


def gen_b():
    while True:
        yield spin(SPIN)


def from_c(end):
    a, b = gen_a(), gen_b()
    while time.time() < end:
        next(a)  # NEXT-A
        next(b)  # NEXT-B


def main():
    mode, seconds = sys.argv[1], float(sys.argv[2])
    end = time.time() + seconds
    if mode != "hold":
        print("ready", flush=True)
    if mode == "aba":
        while time.time() < end:
            chain_a()
            chain_b()
    elif mode == "leaf":
        while time.time() < end:
            chain_c()
            chain_d()
    elif mode == "next":
        from_c(end)
    elif mode == "deep":
        sys.setrecursionlimit(2000)
        while time.time() < end:
            recurse(900)
    elif mode == "hold":
        sys.setrecursionlimit(2000)
        hold(80, end)
    else:
        lines(end)


main()
