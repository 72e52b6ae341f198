"""Thread names (threading.Thread.name) read from the target: dump, the
collapsed output's thread frame and the flame graph's thread list show the
names threading.enumerate() reports, on one interpreter of each frame layout."""
import json
import re

import pytest

from conftest import run_pystrobe
from targets import feature_targets


# Names are read from the threading module's state, not the frames: one
# interpreter of each frame layout (targets.FEATURE_TARGETS).
@pytest.fixture(scope="module", params=feature_targets(), ids=repr)
def target(request):
    return request.param


# Threads named plainly, with characters the outputs must escape, renamed
# after start, named by default; and one started without a Thread object,
# which has no name.
NAMES_CODE = r"""
import json, threading, time, _thread
stop = threading.Event()
def work():
    while not stop.is_set():
        sum(range(200))
        time.sleep(0.001)
names = ["worker-\u03b1", "pool;1", "line\nbreak", "plain"]
ts = [threading.Thread(target=work, name=n, daemon=True) for n in names]
ts.append(threading.Thread(target=work, daemon=True))
for t in ts:
    t.start()
ts[3].name = "renamed"
bare = []
lock = threading.Lock()
def bare_thread():
    bare.append(threading.get_native_id() if hasattr(threading, "get_native_id") else 0)
    while True:
        time.sleep(0.01)
_thread.start_new_thread(bare_thread, ())
while not bare:
    time.sleep(0.01)
print(json.dumps({"named": {str(t.native_id): t.name for t in threading.enumerate()},
                  "bare": bare[0]}), flush=True)
while True:
    sum(range(1000))
    time.sleep(0.001)
"""


def start(python_sleeper, target):
    proc, line = python_sleeper(target, NAMES_CODE)
    return proc, json.loads(line)


def test_dump_names_equal_enumerate(pystrobe, target, python_sleeper):
    proc, want = start(python_sleeper, target)
    res = run_pystrobe(pystrobe, "dump", "--json", proc.pid)
    assert res.returncode == 0, res.stderr.decode()
    doc = json.loads(res.stdout)
    got = {str(t["native_thread_id"]): t["name"]
           for i in doc["interpreters"] for t in i["threads"]}
    for tid, name in want["named"].items():
        assert got.get(tid) == name, (tid, name, got)
    assert got[str(want["bare"])] is None
    # the text form shows them too, escaped
    res = run_pystrobe(pystrobe, "dump", proc.pid)
    text = res.stdout.decode()
    assert '"worker-\u03b1"' in text and '"line\\x0abreak"' in text and '"MainThread"' in text


@pytest.mark.parametrize("fmt", ["collapsed", "flamegraph"])
def test_record_names(pystrobe, target, python_sleeper, tmp_path, fmt):
    if target.version not in ((3, 8), (3, 12), (3, 15)):
        pytest.skip("recorded on 3.8, 3.12 and 3.15; dump covers every version")
    proc, want = start(python_sleeper, target)
    out = tmp_path / f"out.{fmt}"
    res = run_pystrobe(pystrobe, "attach", "-d", "1", "-r", "200", f"--{fmt}", "-o", out,
                       proc.pid)
    assert res.returncode == 0, res.stderr.decode()
    if fmt == "collapsed":
        roots = {}
        for line in out.read_text(encoding="utf-8").splitlines():
            m = re.match(r"tid:(\d+)(?: \((.*?)\))?(?:;| \d+$)", line)
            assert m, line
            roots[m.group(1)] = m.group(2)
        # names escaped as frame names are: ';' -> ',', line breaks -> ' '
        esc = {tid: n.replace(";", ",").replace("\n", " ") for tid, n in want["named"].items()}
        for tid, name in roots.items():
            if tid == str(want["bare"]):
                assert name is None
            else:
                assert name == esc[tid], (tid, name, esc)
        assert set(esc) <= set(roots), (esc, roots)
        # --no-tid drops the thread frame, name and all
        res = run_pystrobe(pystrobe, "attach", "-d", "0.3", "--collapsed", "--no-tid", "-o",
                           out, proc.pid)
        assert res.returncode == 0
        assert "tid:" not in out.read_text(encoding="utf-8")
    else:
        html = out.read_text(encoding="utf-8")
        m = re.search(r'<script type="application/json" id="pystrobe-data">(.*?)</script>', html, re.S)
        assert m, "no data block"
        data = json.loads(m.group(1))
        got = {str(th[1]): (th[2] if len(th) > 2 else None) for th in data["threads"]}
        for tid, name in want["named"].items():
            assert got.get(tid) == name, (tid, name, got)
        assert got[str(want["bare"])] is None
