"""Each thread's states carried in the profile and shown by the flame
graph: its share of samples holding the GIL, having released it, waiting
for it, on CPU, in GC and handling an exception (issue 29).

modes.py puts threads in known states: spin() holds the GIL on the CPU,
sleeper() sleeps, handler() sleeps inside an `except` block; gc_work.py
collects cyclic garbage over and over. The shares pystrobe writes into the
page's data and the table Chromium renders from them are checked against
those states, on a 3.15 target (where GIL waiting and GC are known) and a
3.12 one (where the page says they are not); the replay of a recording
gives the same counts.
"""
import json
import subprocess

import pytest

from conftest import run_pystrobe, wait_ready
from targets import ROOT, supported_targets
from test_flamegraph import assert_ok, load, page_data

WORKLOADS = ROOT / "tests" / "integration" / "workloads"
TARGETS = [t for t in supported_targets() if t.name in ("pyenv-3.12.1", "sid-3.15")]
# [samples, gil, gil_wait, cpu_known, cpu, gc, exception] (flamegraph.c)
SAMPLES, GIL, GIL_WAIT, CPU_KNOWN, CPU, GC, EXC = range(7)

pytestmark = pytest.mark.skipif(not TARGETS, reason="no CPython 3.12/3.15 target")


def states_by_tid(path):
    data, _ = page_data(path)
    return {int(th[1]): th[3] for th in data["threads"] if len(th) > 3}


@pytest.mark.parametrize("target", TARGETS, ids=repr)
def test_flamegraph_thread_states(target, pystrobe, spawn, tmp_path):
    p = spawn(target.argv + ["-B", target.stage(WORKLOADS / "modes.py")],
              stdout=subprocess.PIPE)
    tids = json.loads(wait_ready(p, timeout=60))
    out, rec = tmp_path / "f.html", tmp_path / "r.pysr"
    r = run_pystrobe(pystrobe, "attach", "-d", "2", "--flamegraph", "-o", out, "--record", rec,
                     p.pid)
    assert r.returncode == 0, r.stderr.decode()
    st = states_by_tid(out)
    spin, sleeper, handler = st[tids["spin"]], st[tids["sleeper"]], st[tids["handler"]]
    for s in (spin, sleeper, handler):
        # CPU states are read in --mode cpu and with --no-idle only.
        assert s[SAMPLES] >= 5 and s[CPU_KNOWN] == s[CPU] == 0, s
    # The spinner is the only thread that wants the GIL: it holds it nearly
    # always (bounds far from the load's reach).
    assert spin[GIL] * 2 >= spin[SAMPLES] and sleeper[GIL] * 5 <= sleeper[SAMPLES], (spin, sleeper)
    assert handler[EXC] == handler[SAMPLES] and sleeper[EXC] == 0 and spin[EXC] == 0

    again = tmp_path / "again.html"
    r = run_pystrobe(pystrobe, "replay", "--flamegraph", "-o", again, rec)
    assert r.returncode == 0, r.stderr.decode()
    assert states_by_tid(again) == st

    page = load(out, tmp_path)
    assert_ok(page)
    assert "hidden" not in page.by_id("states-panel").attrs
    rows = {}
    body = page.by_id("thread-states")
    for tr in (n for n in body.iter() if n.tag == "tr"):
        cells = [c.text() for c in tr.children if not isinstance(c, str) and c.tag == "td"]
        if cells:
            rows[cells[0]] = cells
    row = next(v for k, v in rows.items() if k.startswith(f"thread {tids['handler']} "))
    assert row[7] == "100.0%" and row[5] == "\u2013", row  # exception; CPU unknown
    note = page.by_id("states-note").text()
    if target.version >= (3, 15):
        assert row[4] != "\u2013" and "3.15+" not in note, (row, note)
    else:
        assert row[4] == "\u2013" and row[6] == "\u2013" and "3.15+" in note, (row, note)


@pytest.mark.parametrize("target", [t for t in TARGETS if t.version >= (3, 15)], ids=repr)
def test_gc_share(target, pystrobe, spawn, tmp_path):
    """A thread that does little but collect garbage: a large share in GC."""
    script = target.stage(WORKLOADS / "gc_work.py")
    code = (f"import sys; sys.argv = [{script!r}, '60']; print('ready', flush=True); "
            f"exec(compile(open({script!r}).read(), {script!r}, 'exec'))")
    p = spawn(target.argv + ["-B", "-c", code], stdout=subprocess.PIPE)
    assert wait_ready(p, timeout=60) == "ready"
    out = tmp_path / "f.html"
    r = run_pystrobe(pystrobe, "attach", "-d", "2", "--flamegraph", "-o", out, p.pid)
    assert r.returncode == 0, r.stderr.decode()
    (s,) = states_by_tid(out).values()
    assert s[SAMPLES] >= 5 and s[GC] * 10 >= s[SAMPLES], s
