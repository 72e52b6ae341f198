"""The soak test's target: a program that keeps changing everything a
sampler reads.

    workload.py SECONDS [SEED]

- threads start and end all the time (each lives 50 ms to 2 s, up to 12 at
  once), so thread states are freed and their memory reused;
- each thread recurses through 64 generated functions along one of 1,000
  call chains at a time (depths 1 to 300), so stacks are many and distinct
  (but bounded) and the data stack grows and shrinks across chunks;
- exceptions are raised and caught at random depths, and some frames sit in
  `except` blocks;
- garbage with reference cycles is made and gc.collect() runs now and then;
- generators are resumed from deep frames.

Prints one line, {"pid": PID}, once started; exits 0 after SECONDS.
Deterministic for a given seed, apart from thread timing. Python 3.8+.
"""
import gc
import json
import os
import random
import sys
import threading
import time

NFUNCS = 64
PATHS = 1000


class Boom(Exception):
    pass


def make_funcs():
    """f0..f63: each calls a random one of the others, or stops."""
    src = []
    for i in range(NFUNCS):
        src.append(
            f"def f{i}(rng, depth):\n"
            f"    if depth <= 0:\n"
            f"        return leaf(rng)\n"
            f"    r = rng.random()\n"
            f"    if r < 0.02:\n"
            f"        try:\n"
            f"            return FUNCS[rng.randrange(NFUNCS)](rng, depth - 1) + boom(rng)\n"
            f"        except Boom:\n"
            f"            return FUNCS[rng.randrange(NFUNCS)](rng, depth // 2)\n"
            f"    if r < 0.04:\n"
            f"        return sum(gen(rng, depth - 1))\n"
            f"    return FUNCS[rng.randrange(NFUNCS)](rng, depth - 1) + {i}\n")
    ns = {"NFUNCS": NFUNCS, "Boom": Boom}
    exec(compile("\n".join(src), "<soak-funcs>", "exec"), ns)
    funcs = [ns[f"f{i}"] for i in range(NFUNCS)]
    ns["FUNCS"] = funcs
    ns["leaf"] = leaf
    ns["boom"] = boom
    ns["gen"] = gen
    return funcs


def leaf(rng):
    x = 0
    for k in range(rng.randrange(20, 400)):
        x += k * k
    return x & 0xff


def boom(rng):
    raise Boom(rng.random())


def gen(rng, depth):
    for _ in range(2):
        yield FUNCS[rng.randrange(NFUNCS)](rng, depth // 2)


class Node:
    def __init__(self):
        self.other = None
        self.payload = [0] * 16


def make_garbage(rng):
    for _ in range(rng.randrange(50, 500)):
        a, b = Node(), Node()
        a.other, b.other = b, a
    if rng.random() < 0.1:
        gc.collect()


def worker(seed, until):
    rng = random.Random(seed)
    while time.monotonic() < until:
        # One of PATHS call chains, each fixed by its seed, so that the
        # distinct stacks are many but bounded.
        path = random.Random(rng.randrange(PATHS))
        try:
            FUNCS[path.randrange(NFUNCS)](path, path.randrange(1, 301))
        except Boom:
            pass
        make_garbage(rng)


FUNCS = make_funcs()


def main():
    seconds = float(sys.argv[1])
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    sys.setrecursionlimit(5000)
    rng = random.Random(seed)
    print(json.dumps({"pid": os.getpid()}), flush=True)
    end = time.monotonic() + seconds
    live = []
    n = 0
    while time.monotonic() < end:
        live = [t for t in live if t.is_alive()]
        while len(live) < 12:
            n += 1
            life = rng.uniform(0.05, 2.0)
            t = threading.Thread(target=worker, args=(seed * 100003 + n,
                                                      min(end, time.monotonic() + life)),
                                 name=f"soak-{n}", daemon=True)
            t.start()
            live.append(t)
        time.sleep(0.01)
    for t in live:
        t.join()


if __name__ == "__main__":
    main()
