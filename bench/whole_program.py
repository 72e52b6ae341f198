"""Three figures of issue 28's note, measured on one machine in one sitting:

    /usr/bin/python3 bench/whole_program.py [--build DIR] [--python PY]
                                            [--runs R] [--seconds S] [--hand N]
                                            [--only first|blocking|distribution]

first: how soon after its start a child is first sampled, and how soon
after its own code began (the child notes when, on the clock and start
the table uses, so that the tick cancels out). `pystrobe run
--subprocesses` on tests/integration/workloads/family.py timing-METHOD (a
child started by os.fork, multiprocessing's spawn, subprocess running
python), R runs each; the end table's FIRST column is the time from the
child's start (as the kernel gives it, to a clock tick: each figure may be up
to one tick, 10 ms, too high) to its first sample. Printed: min, median, max.

blocking: the cost of --blocking per sample. The generator pipeline
(bench/workloads/generators.py, --duration S) run under `pystrobe run -r
1000 --stats`, by default and with --blocking, alternating, R runs each:
the profiler's CPU per sample (--stats), the time the target spent stopped
per sample (--blocking's --stats line), and the pipeline's units done (the
target's own speed under each). Printed: medians, and the ratios.

distribution: a --blocking profile of the same pipeline (`attach -r 1000
--blocking`, S seconds) against stacks taken by hand: the target stopped
with SIGSTOP until /proc shows every thread stopped, read once with the
pystrobe module (which writes nothing), let go with SIGCONT, then left to
run 0.5-3 ms (random) before the next stop, N times. Printed: each run's
samples and failed samples, the shares of the most common stacks, and the
total variation distance (TVD) of the stack distributions: --blocking
against the hand's, the default mode against the hand's, and the hand's
two halves against each other (the sampling noise at that count).
"""
import argparse
import json
import random
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAMILY = ROOT / "tests" / "integration" / "workloads" / "family.py"
GENERATORS = ROOT / "bench" / "workloads" / "generators.py"
ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+(\d+)\s+(-|\d+ms)\s+(.*)$", re.M)


def first_sample(pystrobe, python, method):
    """(ms from the child's start to its first sample, ms from the child's
    own code beginning to it), or Nones."""
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([pystrobe, "run", "--subprocesses", "--collapsed", "-o",
                            f"{d}/p.txt", "--", python, str(FAMILY), "timing-" + method, d],
                           capture_output=True, text=True, timeout=120)
        child = int(Path(d, "child_timing.pid").read_text())
        code_file = Path(d, "child_timing.code")
        code = float(code_file.read_text()) if code_file.exists() else None
    table = r.stderr.split("Processes (--subprocesses):", 1)[-1]
    for m in ROW.finditer(table):
        if int(m.group(1)) == child and m.group(4) != "-":
            first = int(m.group(4)[:-2])
            return first, None if code is None else round(first - code)
    return None, None


def sampled_run(pystrobe, python, seconds, *extra):
    """(profiler CPU us per sample, stopped us per sample or None, units)."""
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([pystrobe, "run", "-r", "1000", "--stats", *extra, "--collapsed",
                            "-o", f"{d}/p.txt", "--", python, str(GENERATORS), "--duration",
                            str(seconds)], capture_output=True, text=True, timeout=120)
    cpu = re.search(r"profiler CPU:.*?([\d.]+) us per sample\)", r.stderr)
    stopped = re.search(r"stopped \(--blocking\): ([\d.]+) us per sample", r.stderr)
    units = re.search(r"(\d+)", r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "")
    return (float(cpu.group(1)) if cpu else None,
            float(stopped.group(1)) if stopped else None,
            int(units.group(1)) if units else None)


# The hand's sampler, run by /usr/bin/python3: MODULE_DIR PID N -> JSON
# {"stacks": {"root;...;leaf": count}, "unreadable": count}.
HAND = r"""
import json, os, random, signal, sys, time
sys.path.insert(0, sys.argv[1])
import pystrobe
pid, n = int(sys.argv[2]), int(sys.argv[3])

def all_stopped():
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] != "T":
                return False
    return True

u = pystrobe.RemoteUnwinder(pid, all_threads=True)
stacks, unreadable = {}, 0
for _ in range(n):
    os.kill(pid, signal.SIGSTOP)
    while not all_stopped():
        time.sleep(0.0001)
    try:
        got = u.get_stack_trace()
    except Exception:
        got, unreadable = [], unreadable + 1
    os.kill(pid, signal.SIGCONT)
    for interp in got:
        for t in interp.threads:
            key = ";".join(f.funcname for f in reversed(t.frame_info))
            stacks[key] = stacks.get(key, 0) + 1
    time.sleep(random.uniform(0.0005, 0.003))
print(json.dumps({"stacks": stacks, "unreadable": unreadable}))
"""


def start_pipeline(python):
    """The bench's generator pipeline, running until killed: its Popen."""
    p = subprocess.Popen([python, str(GENERATORS)], stdout=subprocess.PIPE, text=True)
    p.stdout.readline()  # "ready PID"
    return p


def attach_profile(pystrobe, pid, seconds, *extra):
    """{stack of qualnames: samples}, captured, failed of an attach."""
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([pystrobe, "attach", str(pid), "-r", "1000", "-d", str(seconds),
                            *extra, "--collapsed", "-o", f"{d}/p.txt"],
                           capture_output=True, text=True, timeout=120)
        stacks = {}
        for line in Path(d, "p.txt").read_text().splitlines():
            frames, n = line.rsplit(" ", 1)
            key = ";".join(f.rsplit(":", 2)[1] for f in frames.split(";")[1:])
            stacks[key] = stacks.get(key, 0) + int(n)
    cap = re.search(r"Captured (\d+) samples", r.stderr)
    failed = re.search(r"Failed samples: (\d+)", r.stderr)
    return stacks, int(cap.group(1)) if cap else 0, int(failed.group(1)) if failed else 0


def tvd(a, b):
    """Total variation distance of two {key: count} distributions."""
    na, nb = sum(a.values()) or 1, sum(b.values()) or 1
    return sum(abs(a.get(k, 0) / na - b.get(k, 0) / nb) for k in set(a) | set(b)) / 2


def distribution(pystrobe, build, python, seconds, n):
    p = start_pipeline(python)
    try:
        blocking, cap_b, failed_b = attach_profile(pystrobe, p.pid, seconds, "--blocking")
        default, cap_d, failed_d = attach_profile(pystrobe, p.pid, seconds)
        r = subprocess.run(["/usr/bin/python3", "-c", HAND, str(Path(build) / "python"),
                            str(p.pid), str(n)], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            print("  the hand's sampler failed:", r.stderr.strip()[-500:])
            return
        hand = json.loads(r.stdout)
    finally:
        p.kill()
        p.wait()
    stacks = hand["stacks"]
    each = [k for k, c in stacks.items() for _ in range(c)]
    random.Random(1).shuffle(each)
    half_a, half_b = {}, {}
    for i, k in enumerate(each):  # the samples in two random halves
        h = half_a if i % 2 else half_b
        h[k] = h.get(k, 0) + 1
    print(f"  --blocking: {cap_b} samples, {failed_b} failed; default: {cap_d} samples, "
          f"{failed_d} failed; by hand: {sum(stacks.values())} stacks of {n} stops, "
          f"{hand['unreadable']} unreadable")
    total = {k: sum(d.values()) or 1 for k, d in
             (("b", blocking), ("d", default), ("h", stacks))}
    print("  share of the most common stacks (leaf last), by hand / --blocking / default:")
    for k in sorted(stacks, key=stacks.get, reverse=True)[:8]:
        print(f"    {stacks[k] / total['h']:.3f} {blocking.get(k, 0) / total['b']:.3f} "
              f"{default.get(k, 0) / total['d']:.3f}  {k.split(';', 2)[-1]}")
    print(f"  TVD --blocking vs hand {tvd(blocking, stacks):.3f}, default vs hand "
          f"{tvd(default, stacks):.3f}; the hand's halves against each other "
          f"{tvd(half_a, half_b):.3f}")


def spread(v):
    v = [x for x in v if x is not None]
    if not v:
        return "no figure"
    return f"min {min(v)}, median {statistics.median(v)}, max {max(v)} (n={len(v)})"


def blocking_cost(pystrobe, python, seconds, nruns):
    print(f"--blocking per sample, generators.py at 1 kHz, {seconds} s, {nruns} runs each:")
    runs = {"default": [], "blocking": []}
    for _ in range(nruns):
        runs["default"].append(sampled_run(pystrobe, python, seconds))
        runs["blocking"].append(sampled_run(pystrobe, python, seconds, "--blocking"))
    med = {}
    for k, v in runs.items():
        med[k] = [statistics.median([x[i] for x in v if x[i] is not None] or [0])
                  for i in range(3)]
        print(f"  {k:9} profiler CPU {med[k][0]:.1f} us/sample, stopped "
              f"{med[k][1]:.1f} us/sample, target units {med[k][2]:.0f}")
    d, b = med["default"], med["blocking"]
    if d[0] and d[2]:
        print(f"  ratios blocking/default: profiler CPU per sample {b[0] / d[0]:.2f}, "
              f"target units {b[2] / d[2]:.3f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=str(ROOT / "build"))
    p.add_argument("--python", default="python3.12")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--hand", type=int, default=2000, metavar="N",
                   help="stops by hand for the distribution (0: not measured)")
    p.add_argument("--only", choices=["first", "blocking", "distribution"],
                   help="measure one figure only")
    a = p.parse_args()
    pystrobe = str(Path(a.build) / "pystrobe")

    if a.only in (None, "first"):
        print(f"first sample of a child after its start (ms), {a.python}, {a.runs} runs:")
        print("  (after: from the child's own code beginning; negative: sampled while"
              " its interpreter was still starting)")
        for method in ("fork", "spawn", "subprocess"):
            v = [first_sample(pystrobe, a.python, method) for _ in range(a.runs)]
            print(f"  {method:10} start {spread([x[0] for x in v])}")
            print(f"  {'':10} after {spread([x[1] for x in v])}")
    if a.only in (None, "blocking"):
        blocking_cost(pystrobe, a.python, a.seconds, a.runs)
    if a.only in (None, "distribution") and a.hand > 0:
        print(f"distribution, generators.py: --blocking and default at 1 kHz for {a.seconds} s, "
              f"{a.hand} stops by hand:")
        distribution(pystrobe, a.build, a.python, a.seconds, a.hand)


if __name__ == "__main__":
    main()
