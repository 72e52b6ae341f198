"""generators.py [DURATION]: for DURATION seconds (default: an hour), main() drains a chain of
generators: outer() delegates to inner() with `yield from`, inner() calls
leaf() for each value. Every stack sampled in them is, root first,
<module>, main, outer, inner[, leaf]: a running generator's frame is linked
to the frame that resumed it. Prints "ready" once started. Runs on 3.8+.
"""
import sys
import time


def leaf(i):
    return (i * 31 + 7) % 1000003


def inner(n):
    for i in range(n):
        yield leaf(i)


def outer(n):
    yield from inner(n)


def main(duration):
    deadline = time.monotonic() + duration
    total = 0
    while time.monotonic() < deadline:
        for x in outer(200):
            total += x
    return total


if __name__ == "__main__":
    print("ready", flush=True)
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 3600.0)
