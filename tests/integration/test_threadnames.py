"""Thread names (threading.Thread.name) read from the target: dump, the
collapsed output's thread frame and the flame graph's thread list show the
names threading.enumerate() reports, on one interpreter of each frame layout;
so do the other outputs that label threads (Chrome trace, gecko, speedscope,
SVG, pprof), live or replayed from a recording."""
import gzip
import json
import re
import xml.etree.ElementTree as ET

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
    rec = tmp_path / "names.pysr"
    res = run_pystrobe(pystrobe, "attach", "-d", "1", "-r", "200", f"--{fmt}", "-o", out,
                       "--record", rec, proc.pid)
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
        # the recording's names, replayed into every output that labels threads
        check_labelled_outputs(pystrobe, rec, tmp_path, want, set(roots))
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


def pb_fields(data):
    """The fields of one protobuf message: [(number, value)], value an int
    (varint) or bytes (length-delimited)."""
    out, i = [], 0

    def varint():
        nonlocal i
        v = shift = 0
        while True:
            b = data[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v
    while i < len(data):
        key = varint()
        num, wire = key >> 3, key & 7
        if wire == 0:
            out.append((num, varint()))
        elif wire == 2:
            n = varint()
            out.append((num, data[i:i + n]))
            i += n
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"wire type {wire}")
    return out


def pprof_thread_names(path):
    """{thread_id: thread_name label or None} of every sample of a pprof file."""
    prof = pb_fields(gzip.decompress(path.read_bytes()))
    strings = [v.decode("utf-8") for n, v in prof if n == 6]
    names = {}
    for n, sample in prof:
        if n != 2:
            continue
        labels = {}
        for k, lab in pb_fields(sample):
            if k == 3:
                f = dict(pb_fields(lab))
                labels[strings[f[1]]] = strings[f[2]] if f.get(2) else f.get(3)
        names[str(labels["thread_id"])] = labels.get("thread_name")
    return names


def check_labelled_outputs(pystrobe, rec, tmp_path, want, seen):
    """Each output replayed from rec names each thread seen (tids) as
    threading.enumerate() did, a thread without a name by its id alone."""
    named = {t: n for t, n in want["named"].items() if t in seen}
    bare = str(want["bare"])
    outs = {}
    for fmt in ("gecko", "chrometrace", "speedscope", "svg", "pprof"):
        outs[fmt] = tmp_path / f"replayed.{fmt}"
        res = run_pystrobe(pystrobe, "replay", f"--{fmt}", "-o", outs[fmt], rec)
        assert res.returncode == 0, (fmt, res.stderr.decode())
    gecko = {str(t["tid"]): t["name"] for t in json.loads(outs["gecko"].read_text())["threads"]}
    trace = {str(e["tid"]): e["args"]["name"]
             for e in json.loads(outs["chrometrace"].read_text())["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    scope = {p["name"].split()[1]: p["name"]
             for p in json.loads(outs["speedscope"].read_text())["profiles"]}
    svg = {el.text for el in ET.parse(outs["svg"]).iter() if el.tag.endswith("title")}
    pprof = pprof_thread_names(outs["pprof"])
    for tid, name in named.items():
        assert gecko.get(tid) == f"{name} {tid}", (tid, name, gecko)
        assert trace.get(tid) == f"tid:{tid} ({name})", (tid, name, trace)
        assert scope.get(tid) == f"Thread {tid} ({name})", (tid, name, scope)
        # SVG text cannot hold control characters: U+FFFD stands for them
        shown = name.replace("\n", "\ufffd")
        assert any(t and t.startswith(f"tid:{tid} ({shown})") for t in svg), (tid, name, svg)
        assert pprof.get(tid) == name, (tid, name, pprof)
    if bare in seen:
        assert gecko[bare] == f"Thread {bare}" and trace[bare] == f"tid:{bare}", (gecko, trace)
        assert scope[bare] == f"Thread {bare}" and pprof[bare] is None, (scope, pprof)


def test_chrometrace_names_live(pystrobe, target, python_sleeper, tmp_path):
    """The Chrome trace written while sampling (not replayed) names threads."""
    if target.version != (3, 12):
        pytest.skip("on 3.12: the names are read alike for every output")
    proc, want = start(python_sleeper, target)
    out = tmp_path / "trace.json"
    res = run_pystrobe(pystrobe, "attach", "-d", "1", "-r", "200", "--chrometrace", "-o", out,
                       proc.pid)
    assert res.returncode == 0, res.stderr.decode()
    trace = {str(e["tid"]): e["args"]["name"]
             for e in json.loads(out.read_text())["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    for tid, name in want["named"].items():
        assert trace.get(tid) == f"tid:{tid} ({name})", (tid, name, trace)
    assert trace[str(want["bare"])] == f"tid:{want['bare']}", trace
