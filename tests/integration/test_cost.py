"""The profiler's own cost, as the end-of-run summary and --stats report it.

`Profiler CPU: X s per second of profiling (C s in S s)` is pystrobe's
getrusage(RUSAGE_SELF) over the sampling loop: every thread of pystrobe,
none of a program it runs. Checked against what the kernel says of the
whole pystrobe process (wait4), on a real target, with bounds that hold on
a loaded machine and under the sanitizers.
"""
import os
import re
import subprocess

import pytest

from targets import all_targets

SPIN_CODE = ("import time\nprint('ready', flush=True)\n"
             "def spin():\n    t = time.monotonic()\n"
             "    while time.monotonic() - t < SECONDS:\n        pass\n"
             "SECONDS = 600\nspin()\n")
SUMMARY_CPU = re.compile(
    r"^Profiler CPU: ([0-9.]+) s per second of profiling \(([0-9.]+) s in ([0-9.]+) s\)$", re.M)
STATS_CPU = re.compile(
    r"^  profiler CPU: +([0-9.]+) s user, ([0-9.]+) s system \(([0-9.]+) s per second, "
    r"([0-9.]+) us per sample\)$", re.M)
CAPTURED = re.compile(r"^Captured (\d+) samples", re.M)


def one_target():
    """sid-3.15 (the frame cache) where present, else the newest found."""
    found = all_targets()
    named = [t for t in found if t.name == "sid-3.15"]
    if named:
        return named[0]
    if not found:
        pytest.skip("no interpreter found")
    return max(found, key=lambda t: t.version)


def run_measured(argv, tmp_path):
    """Run argv; (stderr text, the kernel's user + system seconds of it and
    of the children it waited for)."""
    err = tmp_path / "stderr"
    with open(err, "wb") as e:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=e)
    try:
        _, status, ru = os.wait4(p.pid, 0)
    finally:
        p.returncode = 0
    text = err.read_text(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text
    return text, ru.ru_utime + ru.ru_stime


def test_summary_reports_profiler_cpu(pystrobe, python_sleeper, tmp_path):
    """At a rate that keeps pystrobe busy the summary's CPU is more than
    nothing and no more than the kernel counted for the whole process (which
    adds attaching and writing the profile); --stats splits the same figure
    into user and system time and gives it per sample."""
    target = one_target()
    p, _ = python_sleeper(target, SPIN_CODE)
    text, kernel = run_measured(
        [str(pystrobe), "attach", "-r", "1000khz", "-d", "1.5", "--stats", "--collapsed",
         "-o", str(tmp_path / "out.txt"), str(p.pid)], tmp_path)
    m = SUMMARY_CPU.search(text)
    assert m, text
    per_s, cpu, secs = (float(x) for x in m.groups())
    assert cpu > 0.01, text
    assert cpu <= kernel + 0.02, (kernel, text)
    assert abs(per_s - cpu / secs) <= 0.01 + 0.01 * per_s, text
    assert per_s <= os.cpu_count() + 0.1, text
    st = STATS_CPU.search(text)
    assert st, text
    user, system, st_per_s, us = (float(x) for x in st.groups())
    assert abs(user + system - cpu) <= 0.02, text
    assert abs(st_per_s - per_s) <= 0.002, text
    samples = int(CAPTURED.search(text).group(1))
    assert samples > 0, text
    assert abs(us - cpu * 1e6 / samples) <= 0.05 * us + 0.1, text


def test_summary_cpu_is_the_profilers_alone(pystrobe, tmp_path):
    """`pystrobe run` of a program that spins: the summary counts pystrobe's
    CPU, not the program's (which the kernel's figure for pystrobe's
    process includes once pystrobe has waited for it)."""
    target = one_target()
    code = SPIN_CODE.replace("SECONDS = 600", "SECONDS = 1.5")
    text, kernel = run_measured(
        [str(pystrobe), "run", "-r", "50hz", "--collapsed", "-o", str(tmp_path / "out.txt"),
         "--", *target.argv, "-c", code], tmp_path)
    m = SUMMARY_CPU.search(text)
    assert m, text
    cpu = float(m.group(2))
    # The program spun for 1.5 s of wall time: on a loaded machine it may
    # have had far less CPU, but never so little that its share goes unseen.
    assert kernel - cpu >= 0.2, (kernel, text)
    assert cpu <= 0.5 * kernel, (kernel, text)
