"""reference_loop: the raw cost of one sample of CPython 3.15's own unwinder.

    python3.15 reference_loop.py PID SECONDS

The counterpart of bench/unwind_loop.c: RemoteUnwinder(pid, all_threads=True,
cache_frames=True) (as `python -m profiling.sampling -a` builds it, minus the
GC markers) and get_stack_trace() back to back for SECONDS, with nothing else
in the loop but a clock read. A sample fails when the call raises
RuntimeError, OSError or UnicodeDecodeError (what profiling.sampling counts
as an error); ProcessLookupError ends the loop (the target exited). Prints
one line in the same key=value form as unwind_loop: samples failed seconds
us_per_sample success_rate threads frames end, where threads and frames are
the largest counts among CHECK_SAMPLES more samples taken after the timed
loop (frames of all threads together).

Runs under python3.15 (`_remote_debugging` is private to 3.15). With
LOOP_MODULE=pystrobe (and the package on PYTHONPATH) the same loop drives
pystrobe's RemoteUnwinder instead: the binding's cost, issue 6's bench rows.
"""
import importlib
import os
import sys
import time

_remote_debugging = importlib.import_module(os.environ.get("LOOP_MODULE", "_remote_debugging"))

CHECK_SAMPLES = 200  # as in unwind_loop.c


def count(stack):
    threads = frames = 0
    for interp in stack:
        for thread in interp.threads:
            threads += 1
            frames += len(thread.frame_info)
    return threads, frames


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: reference_loop.py PID SECONDS")
    pid, seconds = int(sys.argv[1]), float(sys.argv[2])
    unwinder = _remote_debugging.RemoteUnwinder(pid, all_threads=True, cache_frames=True)
    get = unwinder.get_stack_trace
    clock = time.perf_counter
    samples = failed = 0
    why = "duration"
    t0 = clock()
    deadline = t0 + seconds
    while True:
        samples += 1
        try:
            get()
        except ProcessLookupError:
            failed += 1
            why = "ProcessLookupError"
            t1 = clock()
            break
        except (RuntimeError, OSError, UnicodeDecodeError):
            failed += 1
        t1 = clock()
        if t1 >= deadline:
            break
    elapsed = t1 - t0
    threads = frames = 0
    for _ in range(CHECK_SAMPLES if why == "duration" else 0):
        try:
            t, f = count(get())
        except (RuntimeError, OSError, UnicodeDecodeError):
            continue
        threads, frames = max(threads, t), max(frames, f)
    print(f"samples={samples} failed={failed} seconds={elapsed:.6f} "
          f"us_per_sample={elapsed * 1e6 / samples:.4f} "
          f"success_rate={(samples - failed) / samples:.6f} "
          f"threads={threads} frames={frames} end={why}", flush=True)


if __name__ == "__main__":
    main()
