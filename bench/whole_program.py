"""Two figures of issue 28's note, measured on one machine in one sitting:

    /usr/bin/python3 bench/whole_program.py [--build DIR] [--python PY]
                                            [--runs R] [--seconds S]

first: how soon after its start a child is first sampled. `pystrobe run
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
"""
import argparse
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
    """ms from the child's start to its first sample, or None."""
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([pystrobe, "run", "--subprocesses", "--collapsed", "-o",
                            f"{d}/p.txt", "--", python, str(FAMILY), "timing-" + method, d],
                           capture_output=True, text=True, timeout=120)
        child = int(Path(d, "child_timing.pid").read_text())
    table = r.stderr.split("Processes (--subprocesses):", 1)[-1]
    for m in ROW.finditer(table):
        if int(m.group(1)) == child and m.group(4) != "-":
            return int(m.group(4)[:-2])
    return None


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


def spread(v):
    v = [x for x in v if x is not None]
    if not v:
        return "no figure"
    return f"min {min(v)}, median {statistics.median(v)}, max {max(v)} (n={len(v)})"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=str(ROOT / "build"))
    p.add_argument("--python", default="python3.12")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--seconds", type=float, default=3.0)
    a = p.parse_args()
    pystrobe = str(Path(a.build) / "pystrobe")

    print(f"first sample of a child after its start (ms), {a.python}, {a.runs} runs:")
    for method in ("fork", "spawn", "subprocess"):
        v = [first_sample(pystrobe, a.python, method) for _ in range(a.runs)]
        print(f"  {method:10} {spread(v)}")

    print(f"--blocking per sample, generators.py at 1 kHz, {a.seconds} s, {a.runs} runs each:")
    runs = {"default": [], "blocking": []}
    for _ in range(a.runs):
        runs["default"].append(sampled_run(pystrobe, a.python, a.seconds))
        runs["blocking"].append(sampled_run(pystrobe, a.python, a.seconds, "--blocking"))
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


if __name__ == "__main__":
    main()
