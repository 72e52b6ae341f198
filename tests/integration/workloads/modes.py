"""Threads in known states, for pystrobe's sampling modes.

    modes.py [DURATION]        (default: an hour; the tests kill it sooner)

- spin():    on CPU all the time, holding the GIL (no other thread asks for it)
- sleeper(): asleep in time.sleep
- handler(): asleep in time.sleep inside an `except ValueError:` block
- via_c():   asleep in nap(), which a C function (map) called: with --native
             its stack reads via_c;<native>;nap
- main():    the main thread, asleep until DURATION has passed

Once every thread is in its state, prints one line: the JSON object
{"pid": ..., "spin": TID, "sleeper": TID, "handler": TID, "via_c": TID,
"main": TID} with the kernel thread ids (threading.get_native_id()).
On KeyboardInterrupt (Ctrl-C) it prints "modes.py: KeyboardInterrupt" and
exits 0. Runs on Python 3.7+.
"""
import json
import os
import signal
import sys
import threading
import time

LONG = 3600.0
# The thread's kernel id; 3.7 has no threading.get_native_id: gettid (its
# x86-64 system call number is 186).
if hasattr(threading, "get_native_id"):
    native_id = threading.get_native_id
else:
    import ctypes
    native_id = lambda: ctypes.CDLL(None).syscall(186)  # noqa: E731
tids = {}
started = threading.Semaphore(0)


def spin():
    tids["spin"] = native_id()
    started.release()
    x = 1
    while True:
        for _ in range(10000):
            x = (x * 31 + 7) % 1000003


def sleeper():
    tids["sleeper"] = native_id()
    started.release()
    while True:
        time.sleep(LONG)


def handler():
    tids["handler"] = native_id()
    try:
        raise ValueError("handled while asleep")
    except ValueError:
        started.release()
        while True:
            time.sleep(LONG)


def nap(seconds):
    started.release()
    while True:
        time.sleep(seconds)


def via_c():
    tids["via_c"] = native_id()
    list(map(nap, [LONG]))


def main(duration):
    tids["main"] = native_id()
    workers = [spin, sleeper, handler, via_c]
    for f in workers:
        threading.Thread(target=f, name=f.__name__, daemon=True).start()
    for _ in workers:
        started.acquire()
    # Each thread released the semaphore just before its last step into its
    # state (a sleep, or the spin loop); give them a moment to take it.
    time.sleep(0.1)
    print(json.dumps(dict(tids, pid=os.getpid())), flush=True)
    deadline = time.monotonic() + duration
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        time.sleep(left)


if __name__ == "__main__":
    # Ctrl-C raises KeyboardInterrupt even if SIGINT came in ignored (a
    # shell's background job, a CI runner without a terminal).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        main(float(sys.argv[1]) if len(sys.argv) > 1 else LONG)
    except KeyboardInterrupt:
        print("modes.py: KeyboardInterrupt", flush=True)
        sys.exit(0)
