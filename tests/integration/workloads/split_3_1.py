"""A workload with a known CPU split: alpha() takes 3/4 of the time, beta() 1/4.

    split_3_1.py DURATION [--report FILE] [--exit-status N]
    split_3_1.py --selftest [SECONDS]

alpha and beta have the same body (an arithmetic loop, no calls, so each is
the leaf of its own stacks) and are given the same work per call; main()
calls alpha three times for each call of beta, every call well under a
millisecond, until DURATION seconds have passed, then exits with N (default
0). Equal calls make the split exactly 3:1 whatever the interpreter's speed:
calls of different lengths would not cost in proportion to their iterations
(the longer loop's counters fall outside the small-int cache). It prints
"ready" once started.

--selftest runs for SECONDS (default 2), measuring the CPU time
(time.process_time) and the wall time (time.perf_counter) of every call, and
prints alpha's share of each; it exits 1 if the CPU split is not 3:1 within
one point: the calibration that the tests' expected share rests on.

With --report, main() measures the wall time of every call (perf_counter
only: a vDSO read, where process_time is a system call, and a loaded machine
preempts a process at the end of system calls, which would pile the waiting
onto whichever call the clock read closes) and writes the totals as JSON to
FILE (atomically) every REPORT_EVERY seconds and at the end, so a test can
compare a wall-clock profile with the workload's own measurement over the
same window. The report has the pid, so a test can attach to the process.

Runs on Python 3.8+.
"""
import json
import os
import sys
import time

# Iterations per call: a call must be long against the clock reads around it
# (under a microsecond) and short against a scheduler time slice (3 ms and
# more), so that a loaded machine cannot preempt the workload in step with its
# cycle of calls and pull its wall-clock split away from its CPU split.
ITERATIONS = 500
# The cycle of calls: three of alpha, one of beta.
CYCLE = ("alpha", "alpha", "alpha", "beta")
REPORT_EVERY = 0.05


def alpha(n):
    x = 1
    for _ in range(n):
        x = (x * 31 + 7) % 1000003
    return x


def beta(n):
    x = 1
    for _ in range(n):
        x = (x * 31 + 7) % 1000003
    return x


def write_report(path, totals, done):
    doc = dict(totals, pid=os.getpid(), done=done, cpu_total=time.process_time())
    tmp = path + ".tmp"
    # json.dumps, not json.dump: dump encodes through Python generators,
    # whose frames would add stacks of their own to the profile.
    text = json.dumps(doc)
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main(duration, report=None):
    wall = time.perf_counter
    totals = {"alpha_wall": 0.0, "beta_wall": 0.0, "chunks": 0}
    funcs = {"alpha": alpha, "beta": beta}
    start = wall()
    next_report = start
    while True:
        now = wall()
        if now - start >= duration:
            break
        if report is not None and now >= next_report:
            write_report(report, totals, False)
            next_report = now + REPORT_EVERY
        for name in CYCLE:
            w0 = wall()
            funcs[name](ITERATIONS)
            totals[name + "_wall"] += wall() - w0
        totals["chunks"] += 1
    if report is not None:
        write_report(report, totals, True)
    return totals


def selftest(duration):
    cpu, wall = time.process_time, time.perf_counter
    totals = {"alpha_cpu": 0.0, "beta_cpu": 0.0, "alpha_wall": 0.0, "beta_wall": 0.0}
    funcs = {"alpha": alpha, "beta": beta}
    chunks = 0
    start = wall()
    while wall() - start < duration:
        for name in CYCLE:
            c0 = cpu()
            w0 = wall()
            funcs[name](ITERATIONS)
            w1 = wall()
            c1 = cpu()
            totals[name + "_cpu"] += c1 - c0
            totals[name + "_wall"] += w1 - w0
        chunks += 1
    cpu_share = totals["alpha_cpu"] / (totals["alpha_cpu"] + totals["beta_cpu"])
    wall_share = totals["alpha_wall"] / (totals["alpha_wall"] + totals["beta_wall"])
    print("python %s: %d cycles, alpha's share of alpha+beta: cpu %.2f%%, wall %.2f%%"
          % (sys.version.split()[0], chunks, 100 * cpu_share, 100 * wall_share))
    return abs(cpu_share - 0.75) <= 0.01


def parse_args(argv):
    args = {"duration": None, "report": None, "exit_status": 0, "selftest": None}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--report":
            args["report"] = argv[i + 1]
            i += 2
        elif a == "--exit-status":
            args["exit_status"] = int(argv[i + 1])
            i += 2
        elif a == "--selftest":
            args["selftest"] = 2.0
            if i + 1 < len(argv):
                args["selftest"] = float(argv[i + 1])
                i += 1
            i += 1
        else:
            args["duration"] = float(a)
            i += 1
    if args["duration"] is None and args["selftest"] is None:
        sys.exit("usage: split_3_1.py DURATION [--report FILE] [--exit-status N] "
                 "| --selftest [SECONDS]")
    return args


if __name__ == "__main__":
    args = parse_args(sys.argv[1:])
    if args["selftest"] is not None:
        sys.exit(0 if selftest(args["selftest"]) else 1)
    print("ready", flush=True)
    main(args["duration"], args["report"])
    sys.exit(args["exit_status"])
