"""recompile.py SECONDS [DURATION]: code objects that die and are born again,
likely at the same addresses.

in_first() spends SECONDS compiling, running and dropping a function named
first (file "<first>"), over and over; then in_second() does the same with a
function named second (file "<second>"); and again, until DURATION (default:
an hour) has passed. Each round frees the code object of the last, so the
allocator hands its memory to the next one: a profiler that caches what it
read about a code object by address alone names second's frames first, or
the other way round. Prints "ready" once started. Runs on Python 3.8+.
"""
import sys
import time

SOURCE = """\
def {name}(n):
    x = 1
    for _ in range(n):
        x = (x * 31 + 7) % 1000003
    return x
"""


def rounds(name, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        namespace = {}
        exec(compile(SOURCE.format(name=name), "<%s>" % name, "exec"), namespace)
        namespace[name](3000)
        del namespace


def in_first(seconds):
    rounds("first", seconds)


def in_second(seconds):
    rounds("second", seconds)


def main(seconds, duration):
    deadline = time.monotonic() + duration
    while time.monotonic() < deadline:
        in_first(seconds)
        in_second(seconds)


if __name__ == "__main__":
    print("ready", flush=True)
    main(float(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 3600.0)
