"""--opcodes: the instruction executing in each frame, named from the
target's own opcode table.

On a target that holds still (opcode_target.py), `dump --opcodes` must give,
for every frame of the main thread, the byte and the name the target itself
sees at the frame's instruction (its co_code or _co_code_adaptive, as its
dis names it), on every supported interpreter; on 3.11+ the warm call is a
specialized instruction, named with what it stands for. A profile taken with
--opcodes carries per-frame instruction counts into the flame graph's
tooltip data. The generated tables are what tools/gen_opcodes.py makes of
the headers on this machine."""
import json
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from conftest import run_pystrobe
from targets import ROOT, SIDROOT
from test_recording import profiler_cli  # noqa: F401

REPORT_TIMEOUT = 60.0


def test_tables_match_headers():
    assert (SIDROOT / "usr/include/python3.15/internal").is_dir(), "sid root headers missing"
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_opcodes.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.fixture(scope="module")
def still(target):
    """(target, Popen, report) of opcode_target.py blocked at its known stack."""
    host_dir, target_dir = target.stage_dir()
    script = target.stage(ROOT / "tests" / "integration" / "opcode_target.py")
    report_path = f"{target_dir}/report.json"
    proc = target.popen([script, report_path])
    host_report = target.host_path(report_path)
    deadline = time.monotonic() + REPORT_TIMEOUT
    try:
        while not host_report.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"opcode_target on {target} wrote no report")
            time.sleep(0.05)
        yield target, proc, json.loads(host_report.read_text())
    finally:
        proc.kill()
        proc.wait(timeout=10)


def main_frames(pystrobe, pid, *extra):
    res = run_pystrobe(pystrobe, "dump", "--json", "--opcodes", *extra, pid)
    assert res.returncode == 0, res.stderr.decode()
    doc = json.loads(res.stdout)
    [t] = [t for t in doc["interpreters"][0]["threads"] if t["status"]["main_thread"]]
    assert t["error"] is None, t["error"]
    return t["frames"]


def test_dump_opcodes_are_the_targets(pystrobe, still):
    target, proc, report = still
    got = main_frames(pystrobe, proc.pid)
    want = report["frames"]
    assert [f["qualname"].rsplit(".", 1)[-1] for f in got] == [w["name"] for w in want]
    for g, w in zip(got, want):
        where = f"{target}: {w['name']} line {w['line']} lasti {w['lasti']}"
        assert g["lasti"] == w["lasti"], where
        assert g["opcode"] == w["opcode"], where
        assert g["opname"] == w["opname"], where
        assert g["opbase"] == w["opbase"], where


def test_warm_call_is_specialized(pystrobe, still):
    target, proc, report = still
    frames = main_frames(pystrobe, proc.pid)
    [loop] = [f for f in frames if f["qualname"] == "main_loop"]
    if target.version < (3, 11):
        assert loop["opbase"] is None and loop["opname"] == "CALL_FUNCTION"
    else:
        # The call of step() ran thousands of times: a specialized CALL.
        assert loop["opbase"] == "CALL" and loop["opname"] != "CALL", loop


def test_text_names_the_instruction(pystrobe, still):
    target, proc, report = still
    res = run_pystrobe(pystrobe, "dump", "--opcodes", "--no-source", proc.pid)
    assert res.returncode == 0, res.stderr.decode()
    line = [ln for ln in res.stdout.decode().splitlines() if "in main_loop" in ln][0]
    w = [f for f in report["frames"] if f["name"] == "main_loop"][0]
    want = w["opname"] + (f" ({w['opbase']})" if w["opbase"] else "")
    assert line.endswith("]  " + want), line


def test_without_opcodes_no_fields(pystrobe, still):
    target, proc, report = still
    res = run_pystrobe(pystrobe, "dump", "--json", proc.pid)
    doc = json.loads(res.stdout)
    frames = [f for t in doc["interpreters"][0]["threads"] for f in t["frames"]]
    assert frames and all("opcode" not in f for f in frames)


LOOP_CODE = """
import time
def add(a, b):
    return a + b
def work():
    # add's time goes to one specialized instruction, BINARY_OP_ADD_UNICODE
    # (3.11+): copying long strings, not an int add a sampler rarely catches.
    end = time.time() + 1.5
    s, t = "a" * 20000, "b" * 20000
    while time.time() < end:
        for i in range(100):
            x = add(s, t)
print("ready", flush=True)
work()
"""


def page_data(path):
    text = path.read_text()
    m = re.search(r'<script type="application/json" id="pystrobe-data">(.*?)</script>', text,
                  re.S)
    return json.loads(m.group(1))


def test_flamegraph_tooltip_counts(pystrobe, target, tmp_path):
    out = tmp_path / "fg.html"
    host_dir, target_dir = target.stage_dir()
    script = host_dir / "loop.py"
    script.write_text(LOOP_CODE)
    # One run writes the page and a recording of the same samples.
    rec = tmp_path / "rec.pysr"
    res = run_pystrobe(pystrobe, "run", "--opcodes", "--flamegraph", "-o", out, "--record", rec,
                       "--", *target.argv, f"{target_dir}/loop.py")
    assert res.returncode == 0, res.stderr.decode()
    d = page_data(out)
    S, N, O = d["strings"], d["nodes"], d["opcodes"]
    per_node = {}
    for node, name, base, count in zip(O["node"], O["name"], O["base"], O["count"]):
        per_node.setdefault(node, []).append((S[name], S[base] if base >= 0 else None, count))
    adds = [n for n in per_node if S[N["name"][n]] == "add"]
    assert adds, "no instruction counted in add()"
    for n in adds:
        # A node's instruction counts are its samples (self and callees').
        assert sum(c for _, _, c in per_node[n]) == N["total"][n]
    if target.version >= (3, 11):
        names = {(a, b) for n in adds for a, b, _ in per_node[n]}
        assert ("BINARY_OP_ADD_UNICODE", "BINARY_OP") in names, names
    # A recording keeps each frame's instruction: replayed, the same counts.
    res = run_pystrobe(pystrobe, "replay", "--flamegraph", "-o", tmp_path / "replayed.html", rec)
    assert res.returncode == 0, res.stderr.decode()
    assert page_data(tmp_path / "replayed.html")["opcodes"] == O
    # The SVG flame graph's tooltips list them too (most sampled first).
    svg = tmp_path / "replayed.svg"
    res = run_pystrobe(pystrobe, "replay", "--svg", "-o", svg, rec)
    assert res.returncode == 0, res.stderr.decode()
    titles = [el.text for el in ET.parse(svg).iter() if el.tag.endswith("title")]
    add_titles = [t for t in titles if t.startswith("add (")]
    assert any(re.search(r"\); \S", t) for t in add_titles), add_titles
    if target.version >= (3, 11):
        assert any("BINARY_OP_ADD_UNICODE (BINARY_OP) " in t for t in add_titles), add_titles
    # Without --opcodes the page carries no such data.
    out2 = tmp_path / "fg2.html"
    res = run_pystrobe(pystrobe, "run", "-d", "0.3", "--flamegraph", "-o", out2, "--",
                       *target.argv, f"{target_dir}/loop.py")
    assert res.returncode == 0, res.stderr.decode()
    assert "opcodes" not in page_data(out2)


# Hovers every box of the page until it finds the frame named `add`, and
# reports what the tooltip showed for it.
HOVER_ADD = r"""
(function () {
  var $ = function (id) { return document.getElementById(id); };
  var canvas = $('graph'), r = canvas.getBoundingClientRect(), t = $('tooltip'), out = null;
  for (var row = 0; row < 40 && !out; row++)
    for (var x = 1; x < r.width && !out; x += 3) {
      canvas.dispatchEvent(new MouseEvent('mousemove', { bubbles: true,
        clientX: r.left + x, clientY: r.top + row * 18 + 9 }));
      if (!t.hidden && t.querySelector('.tt-name').textContent === 'add')
        out = t.querySelector('.tt-ops').textContent;
    }
  document.body.dataset.result = JSON.stringify(out);
})();
"""


def test_flamegraph_tooltip_shows_instructions(pystrobe, target, tmp_path):
    """The page's tooltip, in a browser, lists the instructions of the frame."""
    if target.version != (3, 12):
        pytest.skip("one interpreter is enough for the page")
    from test_flamegraph import assert_ok, load, with_script
    out = tmp_path / "fg.html"
    host_dir, target_dir = target.stage_dir()
    (host_dir / "loop.py").write_text(LOOP_CODE)
    res = run_pystrobe(pystrobe, "run", "--opcodes", "--flamegraph", "-o", out, "--",
                       *target.argv, f"{target_dir}/loop.py")
    assert res.returncode == 0, res.stderr.decode()
    page = load(with_script(out, tmp_path / "hover.html", HOVER_ADD), tmp_path)
    assert_ok(page)
    text = json.loads(page.body.attrs["data-result"])
    assert text and text.startswith("Instructions: "), text
    assert "BINARY_OP_ADD_UNICODE (BINARY_OP) " in text, text


def loop_run(pystrobe, target, tmp_path, *args):
    """LOOP_CODE run with --opcodes and args; the script's path as the
    target sees it."""
    host_dir, target_dir = target.stage_dir()
    (host_dir / "loop.py").write_text(LOOP_CODE)
    res = run_pystrobe(pystrobe, "run", "--opcodes", *args, "--", *target.argv,
                       f"{target_dir}/loop.py")
    assert res.returncode == 0, res.stderr.decode()
    return f"{target_dir}/loop.py"


def test_jsonl_frames_carry_instructions(pystrobe, target, tmp_path):
    """--jsonl --opcodes: each frame of the frame table its instruction, as
    dump --json names it; add's frames at its add (specialized),
    their self samples adding up to all of add's; without --opcodes none."""
    if target.version != (3, 12):
        pytest.skip("the writer does not depend on the interpreter")
    out = tmp_path / "o.jsonl"
    script = loop_run(pystrobe, target, tmp_path, "--jsonl", "-o", out)
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    strings = {s["str_id"]: s["value"] for r in recs if r["type"] == "string_table"
               for s in r["strings"]}
    frames = {f["frame_id"]: f for r in recs if r["type"] == "frame_table" for f in r["frames"]}
    self_ = {e["frame_id"]: e["self"] for r in recs if r["type"] == "agg" for e in r["entries"]}
    adds = [f for f in frames.values() if strings[f["func_str_id"]] == "add"]
    assert adds and all("opcode" in f for f in adds if f["line"] == 4), adds
    ops = {(f.get("opname"), f.get("opbase")) for f in adds}
    assert ("BINARY_OP_ADD_UNICODE", "BINARY_OP") in ops, ops
    assert sum(self_.get(f["frame_id"], 0) for f in adds) > 0
    out2 = tmp_path / "plain.jsonl"
    res = run_pystrobe(pystrobe, "run", "-d", "0.3", "--jsonl", "-o", out2, "--",
                       *target.argv, script)
    assert res.returncode == 0, res.stderr.decode()
    assert '"opcode"' not in out2.read_text()


def test_gecko_instructions_as_subcategories(pystrobe, target, tmp_path, profiler_cli):
    """--gecko --opcodes: each instruction a subcategory of the Python
    category, the frames of add at BINARY_OP_ADD_UNICODE; the Firefox Profiler's
    importer loads the file and breaks add's samples down by them."""
    if target.version != (3, 12):
        pytest.skip("one interpreter is enough for the importer")
    out = tmp_path / "g.json"
    loop_run(pystrobe, target, tmp_path, "--gecko", "-o", out)
    d = json.loads(out.read_text())
    [python] = [c for c in d["meta"]["categories"] if c["name"] == "Python"]
    subs = python["subcategories"]
    assert subs[0] == "Other" and "BINARY_OP_ADD_UNICODE (BINARY_OP)" in subs, subs
    S = d["shared"]["stringArray"]
    [th] = [t for t in d["threads"] if t["isMainThread"]]
    ft, fn = th["frameTable"], th["funcTable"]
    add_subs = {subs[ft["subcategory"][i]] for i in range(ft["length"])
                if S[fn["name"][ft["func"][i]]] == "add"}
    assert "BINARY_OP_ADD_UNICODE (BINARY_OP)" in add_subs, add_subs
    r = profiler_cli.load(out)
    assert r.returncode == 0, (r.stdout + r.stderr).decode()
    s = profiler_cli.run("thread", "samples", "--json", "--limit", "100000")
    assert s.returncode == 0, s.stderr.decode()
    # The importer's category breakdown: the samples by leaf instruction.
    [py] = [c for c in json.loads(s.stdout)["categoryBreakdown"]["categories"]
            if c["name"] == "Python"]
    by_op = {c["name"]: c["samples"] for c in py["subcategories"]}
    assert by_op.get("BINARY_OP_ADD_UNICODE (BINARY_OP)", 0) > 0, by_op
    assert sum(by_op.values()) == py["samples"], (by_op, py["samples"])
