"""Accuracy workload: many threads switching the GIL fast.

    threads.py DURATION SEED [THREADS]

THREADS (default 8) threads, thread k running random-depth chains
tK_1..tK_40 of its own (same code shape as chains.py, 5 us leaves), with
the switch interval at 50 us so the GIL changes hands all the time. The
main thread sleeps in main().

Valid stacks: the main thread `<module>;main`; thread k
`_bootstrap;_bootstrap_inner;run;work` then tK_1..tK_d. Prints
"ready {THREAD: FAMILY}" (native ids and idents) once every thread runs.
Runs on Python 3.8+.
"""
import json
import random
import sys
import threading
import time

DEPTH = 40
LEAF = 5e-6


def make_chain(fam, space):
    src = "".join(
        f"def {fam}_{i}(n, t):\n"
        f"    if n > {i}:\n"
        f"        return {fam}_{i + 1}(n, t)\n"
        f"    e = clock() + t\n"
        f"    while clock() < e:\n"
        f"        pass\n"
        f"    return n\n\n"
        for i in range(1, DEPTH + 1))
    exec(compile(src, f"<chain {fam}>", "exec"), space)
    return space[f"{fam}_1"]


def work(head, plan, end, ids, k, started):
    ids[threading.get_native_id()] = f"t{k}"
    ids[threading.get_ident()] = f"t{k}"
    started.release()
    while time.monotonic() < end:
        for d in plan:
            head(d, LEAF)


def main(duration, seed, n):
    sys.setswitchinterval(5e-5)
    rnd = random.Random(seed)
    space = {"clock": time.perf_counter}
    end = time.monotonic() + duration
    ids = {}
    started = threading.Semaphore(0)
    threads = []
    for k in range(n):
        head = make_chain(f"t{k}", space)
        plan = [rnd.randint(1, DEPTH) for _ in range(5000)]
        th = threading.Thread(target=work, args=(head, plan, end, ids, k, started),
                              daemon=True)
        th.start()
        threads.append(th)
    for _ in range(n):
        started.acquire()
    print("ready " + json.dumps({str(t): f for t, f in ids.items()}), flush=True)
    while time.monotonic() < end:
        time.sleep(0.05)


if __name__ == "__main__":
    main(float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 8)
