"""The soak test: pystrobe attached for a long time at a high rate to a
program that changes everything it reads (workload.py). Not part of
`make test`; `make soak` runs it (an hour by default).

    soak.py --build DIR [--target sid-3.15] [--minutes 60] [--rate 10khz]
            [--out DIR] [-- extra pystrobe options]

Reports, and writes to OUT/report.json: samples, failed samples, pystrobe's
RSS over time (OUT/rss.csv, every 10 s) and its peak, whether the profile
is valid (collapsed stacks that parse, every stack rooted at a thread, counts
adding up to at most samples x threads) and whether RSS stayed flat over the
second half of the run (at most 10% + 8 MiB above its value at the half).
Exits 1 if the profile is invalid, pystrobe failed, or RSS kept growing.
"""
import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))
from targets import all_targets  # noqa: E402


def rss_kib(pid, field="VmRSS"):
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def check_collapsed(path, max_total):
    """Problems found in a collapsed-stacks file (an empty list if valid)."""
    problems, total, lines = [], 0, 0
    for n, line in enumerate(Path(path).read_text(errors="replace").splitlines(), 1):
        lines += 1
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit() or int(count) <= 0:
            problems.append(f"line {n}: not 'stack count': {line[:120]!r}")
            continue
        total += int(count)
        if not stack.startswith("tid:"):
            problems.append(f"line {n}: stack not rooted at a thread: {stack[:120]!r}")
    if lines == 0:
        problems.append("no stacks")
    if total > max_total:
        problems.append(f"{total} stack samples, more than samples x threads ({max_total})")
    return problems, total, lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--target", default="sid-3.15")
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--rate", default="10khz")
    ap.add_argument("--out", default="build/soak")
    ap.add_argument("extra", nargs="*", help="more pystrobe options (after --)")
    a = ap.parse_args()

    targets = {t.name: t for t in all_targets()}
    if a.target not in targets:
        sys.exit(f"soak: no target {a.target} (have: {', '.join(sorted(targets))})")
    target = targets[a.target]
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    seconds = a.minutes * 60
    strobe = Path(a.build).resolve() / "pystrobe"

    work = subprocess.Popen(target.argv + [target.stage(HERE / "workload.py"),
                                           str(seconds + 30)],
                            stdout=subprocess.PIPE, text=True)
    pid = json.loads(work.stdout.readline())["pid"]
    if target.chroot:       # the pid printed is the host's (no pid namespace)
        pass
    collapsed = out / "collapsed.txt"
    err = open(out / "pystrobe.err", "w")
    cmd = [str(strobe), "attach", "-r", a.rate, "-d", str(seconds), "--collapsed",
           "-o", str(collapsed), "--stats", *a.extra, str(pid)]
    print("soak:", " ".join(cmd), flush=True)
    t0 = time.monotonic()
    strobe_p = subprocess.Popen(cmd, stderr=err)
    series = []
    with open(out / "rss.csv", "w") as csv:
        csv.write("seconds,rss_kib,target_threads\n")
        while strobe_p.poll() is None:
            time.sleep(10)
            kib = rss_kib(strobe_p.pid)
            if kib is None:
                continue
            try:
                nthreads = len(list(Path(f"/proc/{pid}/task").iterdir()))
            except OSError:
                nthreads = 0
            t = time.monotonic() - t0
            series.append((t, kib))
            csv.write(f"{t:.0f},{kib},{nthreads}\n")
            csv.flush()
    rc = strobe_p.wait()
    err.close()
    work.kill()
    work.wait()

    text = (out / "pystrobe.err").read_text(errors="replace")
    m = re.search(r"Captured (\d+) samples", text)
    samples = int(m.group(1)) if m else 0
    m = re.search(r"Failed samples: (\d+)", text)
    failed = int(m.group(1)) if m else None
    peak = max((k for _, k in series), default=0)
    half = [k for t, k in series if t >= seconds / 2]
    at_half, end = (half[0], half[-1]) if half else (0, 0)
    flat = bool(half) and max(half) <= at_half * 1.10 + 8 * 1024
    problems, stack_samples, distinct = (check_collapsed(collapsed, samples * 64)
                                         if collapsed.exists() else (["no output"], 0, 0))
    report = {
        "target": a.target, "rate": a.rate, "minutes": a.minutes, "pystrobe_rc": rc,
        "samples": samples, "failed": failed,
        "failed_pct": round(100.0 * failed / samples, 3) if samples and failed is not None else None,
        "stack_samples": stack_samples, "distinct_stacks": distinct,
        "peak_rss_mib": round(peak / 1024, 1), "rss_at_half_mib": round(at_half / 1024, 1),
        "rss_at_end_mib": round(end / 1024, 1), "rss_flat": flat, "profile_problems": problems[:10],
    }
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    ok = rc == 0 and not problems and flat
    print("soak:", "passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
