#!/usr/bin/python3
"""How long a process waits for its own mmap_lock, with and without a profiler.

    /usr/bin/python3 bench/mmap_lock.py SECONDS TARGET_PID [PROFILER_PID]

Records the kernel's mmap_lock tracepoints (tracefs, mounted at
/sys/kernel/tracing if it is not) for SECONDS and prints, for the target's
own threads, how many times they took the lock for writing (mmap, munmap,
mprotect...) and how long they waited for it (from start_locking to
acquire_returned), and for the profiler, how many times it took the
target's lock (for reading: process_vm_readv/writev pin pages under it) and
how long it held it. Needs root. The lock is the target's mm, told apart
by the mm pointer the tracepoints print.
"""
import collections
import os
import re
import statistics
import subprocess
import sys
import time

T = "/sys/kernel/tracing"
EV = ["mmap_lock_start_locking", "mmap_lock_acquire_returned", "mmap_lock_released"]
LINE = re.compile(r"^\s*\S+-(\d+)\s+\[\d+\]\s+\S+\s+([\d.]+): (mmap_lock_\w+): mm=(\S+) "
                  r"memcg_id=\d+ write=(\w+)")


def w(path, text):
    with open(f"{T}/{path}", "w") as f:
        f.write(text)


def tids(pid):
    try:
        return {int(t) for t in os.listdir(f"/proc/{pid}/task")}
    except OSError:
        return set()


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else 0.0


def main():
    secs, target = float(sys.argv[1]), int(sys.argv[2])
    prof = int(sys.argv[3]) if len(sys.argv) > 3 else None
    if not os.path.exists(f"{T}/events"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", T], check=True)
    ttids = tids(target)
    ptids = tids(prof) if prof else set()
    with open(f"{T}/buffer_size_kb") as f:
        old_size = f.read().split()[0]
    with open(f"{T}/tracing_on") as f:
        old_on = f.read().strip()
    w("tracing_on", "0")
    w("trace", "")
    w("buffer_size_kb", "65536")
    for e in EV:
        w(f"events/mmap_lock/{e}/enable", "1")
    w("tracing_on", "1")
    time.sleep(secs)
    w("tracing_on", "0")
    for e in EV:
        w(f"events/mmap_lock/{e}/enable", "0")
    ttids |= tids(target)
    if prof:
        ptids |= tids(prof)
    with open(f"{T}/trace") as f:
        lines = f.readlines()
    w("trace", "")
    w("buffer_size_kb", old_size)  # the tracer as it was found
    w("tracing_on", old_on)
    start, got = {}, {}
    twait, thold, pwait, phold = [], [], [], []
    target_mm = collections.Counter()
    events = []
    for line in lines:
        m = LINE.match(line)
        if m:
            events.append((int(m.group(1)), float(m.group(2)), m.group(3), m.group(4),
                           m.group(5) == "true"))
    for tid, _, _, mm, _ in events:
        if tid in ttids:
            target_mm[mm] += 1
    mm = target_mm.most_common(1)[0][0] if target_mm else None
    for tid, ts, ev, emm, write in events:
        if emm != mm or (tid not in ttids and tid not in ptids):
            continue
        key = (tid, write)
        if ev == "mmap_lock_start_locking":
            start[key] = ts
        elif ev == "mmap_lock_acquire_returned":
            if key in start:
                if tid in ttids:
                    twait.append((ts - start.pop(key), write))
                else:
                    pwait.append(ts - start.pop(key))
            got[key] = ts
        elif key in got:
            (thold if tid in ttids else phold).append(ts - got.pop(key))
    us = 1e6
    for write in (True, False):
        tw = [x for x, wr in twait if wr == write]
        print(f"target {target}: {len(tw)} takings for {'writing' if write else 'reading'} "
              f"in {secs:g} s; wait: total {us * sum(tw) / 1e3:.1f} ms, median "
              f"{us * statistics.median(tw) if tw else 0:.1f} us, max {us * max(tw or [0]):.0f} "
              f"us; waits over 10 us: {sum(1 for x in tw if x > 10e-6)} "
              f"({us * sum(x for x in tw if x > 10e-6) / 1e3:.1f} ms), over 1 ms: "
              f"{sum(1 for x in tw if x > 1e-3)}")
    if prof:
        print(f"profiler {prof}: {len(phold)} takings of the target's lock; hold us: "
              f"median {us * statistics.median(phold) if phold else 0:.1f}, p99 "
              f"{us * pct(phold, .99):.1f}, total {us * sum(phold) / 1e3:.1f} ms; waits for "
              f"it: total {us * sum(pwait) / 1e3:.1f} ms, over 10 us: "
              f"{sum(1 for x in pwait if x > 10e-6)}")


if __name__ == "__main__":
    main()
