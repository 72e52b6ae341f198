"""`python -m pkgdemo DURATION [EXIT_STATUS]`: spends DURATION seconds on the
CPU in crunch(), then exits with EXIT_STATUS (default 0). Prints "ready" once
started. Runs on Python 3.8+."""
import sys
import time


def crunch(duration):
    x = 1
    deadline = time.monotonic() + duration
    while time.monotonic() < deadline:
        for _ in range(5000):
            x = (x * 31 + 7) % 1000003
    return x


def main(argv):
    print("ready", flush=True)
    crunch(float(argv[0]))
    return int(argv[1]) if len(argv) > 1 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
