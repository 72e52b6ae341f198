"""Threads that come and go: one short-lived thread after another, each
asleep a moment in lives_briefly(). For the frame cache's dropping of the
entries of threads that are gone.

    churn.py [DURATION]    (default: an hour; the tests kill it sooner)

Prints "ready" once the first thread has run. Runs on Python 3.8+.
"""
import sys
import threading
import time


def lives_briefly():
    time.sleep(0.003)


def main(duration):
    end = time.monotonic() + duration
    first = True
    while time.monotonic() < end:
        t = threading.Thread(target=lives_briefly)
        t.start()
        t.join()
        if first:
            print("ready", flush=True)
            first = False


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 3600.0)
