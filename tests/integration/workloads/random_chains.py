"""Many distinct stacks: each step calls a chain of random length through 200
generated functions, each link chosen at random, and spins a moment at its
end. Nearly every sample of a fast profile is a stack never seen before,
which is what bounds the profile's memory (`--max-memory`).

    random_chains.py [DURATION] [SEED]    (default: an hour, seed 1)

Prints "ready" once the functions exist. Runs on Python 3.8+.
"""
import random
import sys
import time

FUNCTIONS = 200
MIN_DEPTH, MAX_DEPTH = 4, 24
SPIN = 200  # loop turns at the end of a chain: a few tens of microseconds

SOURCE = "".join(
    f"def f{i}(depth):\n"
    f"    if depth:\n"
    f"        return FUNCS[choose()](depth - 1)\n"
    f"    return spin()\n\n"
    for i in range(FUNCTIONS)
)


def spin():
    x = 0
    for i in range(SPIN):
        x += i
    return x


def main(duration, seed):
    rnd = random.Random(seed)
    space = {"spin": spin, "choose": lambda: rnd.randrange(FUNCTIONS)}
    exec(compile(SOURCE, "<chains>", "exec"), space)
    funcs = [space[f"f{i}"] for i in range(FUNCTIONS)]
    space["FUNCS"] = funcs
    print("ready", flush=True)
    end = time.monotonic() + duration
    while time.monotonic() < end:
        for _ in range(100):
            funcs[rnd.randrange(FUNCTIONS)](rnd.randint(MIN_DEPTH, MAX_DEPTH))


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 3600.0,
         int(sys.argv[2]) if len(sys.argv) > 2 else 1)
