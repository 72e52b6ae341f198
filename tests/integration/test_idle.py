"""Idle threads taken over from the last snapshot (pys_options.reuse_idle,
src/core/idle.c): a thread that has not held the GIL since the last
snapshot keeps its stack, and every thread that did hold it is read again.
Samples come from tests/tools/sample_stream, which drives the library."""
import os
import re
import subprocess
from pathlib import Path

from conftest import wait_ready
from targets import ROOT

BUILD = Path(os.environ.get("PYSTROBE_BUILD", ROOT / "build"))
STREAM = BUILD / "tests" / "sample_stream"
WORKLOAD = ROOT / "tests" / "integration" / "workloads" / "tickers.py"
THREADS = 8


def compare_stream(pid, *flags):
    """Sample for 2 s, 200 µs apart; after each snapshot a second session
    reads every thread. (compared, differ, reused) thread stacks."""
    r = subprocess.run([str(STREAM), str(pid), "2", "--compare", "--interval-us", "200",
                        *flags], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    m = re.search(r"reused (\d+) compared (\d+) differ (\d+)", r.stderr)
    assert m, r.stderr
    reused, compared, differ = (int(x) for x in m.groups())
    return compared, differ, reused


# A loaded machine (a sanitizer build beside other work) can read too few
# stacks in one 2 s round: rounds of both sessions, taken in turn so that they
# see the same load, go on until each compared enough, at most ROUNDS of them.
# An idle machine needs one round.
ROUNDS = 8


def test_idle_threads_taken_over_stay_exact(spawn, target):
    """Threads that wake in turn (each every 5 ms, moving between two
    functions): the snapshots that take idle threads over agree with a
    session that reads every thread as often as two sessions reading
    everything agree (they differ only when a thread moved between the two
    snapshots). Treating two hand-overs of the GIL as one, or never reading
    a taken-over thread again, makes them disagree far more often."""
    p = spawn(target.argv + ["-B", target.stage(WORKLOAD), str(THREADS)],
              stdout=subprocess.PIPE)
    wait_ready(p)
    # Enough stacks for the rates below to mean something (15,000 to 20,000
    # a second here when nothing else runs).
    need = 200 * THREADS
    idle, base = [0, 0, 0], [0, 0, 0]
    for _ in range(ROUNDS):
        if idle[0] > need and base[0] > need:
            break
        idle = [a + b for a, b in zip(idle, compare_stream(p.pid, "--reuse-idle"))]
        base = [a + b for a, b in zip(base, compare_stream(p.pid))]
    compared, differ, reused = idle
    base_compared, base_differ, base_reused = base
    assert base_reused == 0
    assert compared > need and base_compared > need, (idle, base)
    # Most stacks were taken over: the threads are asleep most of the time.
    assert reused > compared // 2, (reused, compared)
    numbers = (differ, compared, base_differ, base_compared)
    # Three times the base rate: a correct build's two rates came within
    # 2.3x of each other over many runs (counts of 150-350 each).
    assert differ / compared <= max(3 * base_differ / base_compared, 0.005), numbers
