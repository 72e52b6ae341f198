"""py-spy's names and habits (issue 30): -p/--pid, --gil, --function,
--nolineno, --idle/--no-idle, on real targets (3.8, 3.12, 3.15), through
both `attach` and `run`."""
import base64
import os
import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import consumer_only_once, run_pystrobe, wait_ready
from targets import ROOT, all_targets

WORKLOAD = ROOT / "tests" / "integration" / "workloads" / "habits.py"
HABIT_TARGETS = [t for t in all_targets() if t.name in ("pyenv-3.8.18", "pyenv-3.12.1", "sid-3.15")]


def first_line(fn):
    for i, line in enumerate(WORKLOAD.read_text().splitlines(), 1):
        if line.startswith(f"def {fn}("):
            return i
    raise AssertionError(fn)


@pytest.fixture(scope="module", params=HABIT_TARGETS, ids=repr)
def habit_target(request):
    return request.param


@pytest.fixture
def habits(habit_target, spawn):
    """The workload running on the target, ready."""
    p = spawn(habit_target.argv + ["-B", habit_target.stage(WORKLOAD)], stdout=subprocess.PIPE)
    wait_ready(p)
    return p


def collapsed_stacks(path):
    """[(frames root first, count)] of a collapsed file."""
    out = []
    for line in Path(path).read_text().splitlines():
        stack, count = line.rsplit(" ", 1)
        out.append((stack.split(";"), int(count)))
    return out


def frames_of(stacks, fn):
    """Every frame naming function fn in the stacks."""
    return {f for frames, _ in stacks for f in frames if re.search(r":" + fn + r"(:|$)", f)}


def samples_in(stacks, fn):
    """Samples whose stack has a frame of function fn."""
    return sum(c for frames, c in stacks if frames_of([(frames, c)], fn))


def mostly_without_waiter(stacks):
    """busy_fn sampled, waiter_fn at most in a few samples: those taken
    while it started, before it waited (run samples from the start)."""
    busy, waiter = samples_in(stacks, "busy_fn"), samples_in(stacks, "waiter_fn")
    assert busy > 100 and waiter * 20 < busy, (busy, waiter)


def attach(pystrobe, pid, out, *opts):
    """`pystrobe attach` for 1.5 s; pid None: opts name the process."""
    tail = [pid] if pid is not None else []
    res = run_pystrobe(pystrobe, "attach", "-d", "1.5", "--collapsed", "-o", out, *opts, *tail)
    assert res.returncode == 0, res.stderr.decode()
    return collapsed_stacks(out)


def run_cmd(pystrobe, target, out, *opts):
    """`pystrobe run` on the workload for 1.5 s."""
    res = run_pystrobe(pystrobe, "run", "-d", "1.5", "--collapsed", "-o", out, *opts, "--",
                       *target.argv, "-B", target.stage(WORKLOAD))
    assert res.returncode == 0, res.stderr.decode()
    return collapsed_stacks(out)


def test_pid_option_attach_and_dump(pystrobe, habits, tmp_path):
    """attach -p PID and --pid PID, dump -p PID as py-spy writes them."""
    stacks = attach(pystrobe, None, tmp_path / "a.txt", "-p", str(habits.pid))
    assert frames_of(stacks, "busy_fn")
    stacks = attach(pystrobe, None, tmp_path / "b.txt", f"--pid={habits.pid}")
    assert frames_of(stacks, "busy_fn")
    for args in (("-p", habits.pid), ("--pid", habits.pid), (f"--pid={habits.pid}",)):
        res = run_pystrobe(pystrobe, "dump", *args)
        assert res.returncode == 0, res.stderr
        assert b"busy_fn" in res.stdout and b"waiter_fn" in res.stdout
    # The PID twice, or -p for run, is a usage error.
    assert run_pystrobe(pystrobe, "attach", "-p", habits.pid, habits.pid).returncode == 2
    assert run_pystrobe(pystrobe, "run", "-p", habits.pid, "x.py").returncode == 2
    assert run_pystrobe(pystrobe, "dump", "-p", "nope").returncode == 2


def test_function_one_entry_per_function(pystrobe, habit_target, habits, tmp_path):
    """Without --function, busy_fn's loop lines are separate entries; with
    it, busy_fn is one entry at its first line, in attach and in run."""
    exact = frames_of(attach(pystrobe, habits.pid, tmp_path / "e.txt"), "busy_fn")
    assert len(exact) > 1 and not any(f.endswith(f":{first_line('busy_fn')}") for f in exact), exact
    for stacks in (attach(pystrobe, habits.pid, tmp_path / "f.txt", "--function"),
                   run_cmd(pystrobe, habit_target, tmp_path / "r.txt", "--function")):
        busy = frames_of(stacks, "busy_fn")
        assert len(busy) == 1, busy
        assert busy.pop().endswith(f":busy_fn:{first_line('busy_fn')}")
        waiter = frames_of(stacks, "waiter_fn")
        assert waiter == {next(iter(waiter)).rsplit(":", 1)[0] + f":{first_line('waiter_fn')}"}


def test_nolineno_leaves_lines_out(pystrobe, habit_target, habits, tmp_path):
    """--nolineno: Python frames are FILE:QUALNAME, one per function."""
    for stacks in (attach(pystrobe, habits.pid, tmp_path / "n.txt", "--nolineno"),
                   run_cmd(pystrobe, habit_target, tmp_path / "r.txt", "--nolineno")):
        busy = frames_of(stacks, "busy_fn")
        assert len(busy) == 1 and busy.pop().endswith(":busy_fn"), busy
        for frames, _ in stacks:
            for f in frames[1:]:  # after tid:N
                assert not re.search(r":\d+$", f), f


def test_gil_is_mode_gil(pystrobe, habit_target, habits, tmp_path):
    """--gil keeps only the thread holding the GIL: busy_fn, never the
    waiter (which wall mode shows)."""
    wall = attach(pystrobe, habits.pid, tmp_path / "w.txt")
    assert samples_in(wall, "waiter_fn") * 2 > samples_in(wall, "busy_fn")
    for stacks in (attach(pystrobe, habits.pid, tmp_path / "g.txt", "--gil"),
                   run_cmd(pystrobe, habit_target, tmp_path / "r.txt", "--gil")):
        mostly_without_waiter(stacks)


def test_no_idle_leaves_sleeping_threads_out(pystrobe, habit_target, habits, tmp_path):
    """--idle (the default) keeps the waiting thread; --no-idle leaves it
    out and keeps the spinning one. How the options combine does not depend
    on the interpreter: the spellings of the default run on one."""
    spellings = [()]
    if habit_target is HABIT_TARGETS[0]:
        spellings += [("--idle",), ("--no-idle", "--idle")]
    for opts in spellings:
        stacks = attach(pystrobe, habits.pid, tmp_path / "i.txt", *opts)
        assert samples_in(stacks, "waiter_fn") * 2 > samples_in(stacks, "busy_fn")
    for stacks in (attach(pystrobe, habits.pid, tmp_path / "n.txt", "--no-idle"),
                   run_cmd(pystrobe, habit_target, tmp_path / "r.txt", "--no-idle")):
        mostly_without_waiter(stacks)


# --- --svg ---------------------------------------------------------------------------

HOSTILE = ROOT / "tests" / "integration" / "workloads" / "hostile_names.py"
# The hostile file name as XML text carries it, after the control character
# became U+FFFD.
HOSTILE_TEXT = "&lt;script&gt;alert(1)&lt;/script&gt;&amp;amp;"


def svg_dom(path, workdir):
    """The SVG as headless Chromium parsed it; fails on an XML error."""
    from test_flamegraph import chromium
    dom, _ = chromium(path, workdir, "--dump-dom")
    assert "<parsererror" not in dom and "This page contains the following errors" not in dom, dom[:2000]
    assert dom.lstrip().startswith("<svg"), dom[:500]
    return dom


def test_svg_renders_and_names_frames(pystrobe, habit_target, habits, tmp_path):
    """attach --svg: a well-formed SVG Chromium loads, with a labelled
    rectangle per frame; its default name is flamegraph_PID.svg."""
    res = subprocess.run([str(pystrobe), "attach", "-d", "1.5", "--svg", str(habits.pid)],
                         cwd=tmp_path, capture_output=True, timeout=120)
    assert res.returncode == 0, res.stderr.decode()
    path = tmp_path / f"flamegraph_{habits.pid}.svg"
    ET.parse(path)  # well-formed XML
    dom = svg_dom(path, tmp_path)
    assert dom.count("<rect") > 4
    assert re.search(r"<title>busy_fn \([^<]*habits\.py:\d+\) \(\d+ samples, [\d.]+%\)</title>", dom)
    assert re.search(r"<title>waiter_fn ", dom)


def test_svg_escapes_hostile_names(pystrobe, habit_target, tmp_path):
    """run --svg on a function whose file name is <script>...&amp;\"'\\x01:
    the name is text in the SVG, never markup, and Chromium parses it."""
    out = tmp_path / "h.svg"
    res = run_pystrobe(pystrobe, "run", "-d", "1.5", "--svg", "-o", out, "--",
                       *habit_target.argv, "-B", habit_target.stage(HOSTILE))
    assert res.returncode == 0, res.stderr.decode()
    raw = out.read_text(encoding="utf-8")
    assert "<script" not in raw and "\x01" not in raw
    assert HOSTILE_TEXT + "&quot;&#39;\ufffd.py" in raw
    ET.parse(out)
    dom = svg_dom(out, tmp_path)
    assert "<script" not in dom
    assert re.search(r"evil_fn \(" + re.escape(HOSTILE_TEXT), dom), dom[:3000]


# --- --chrometrace -------------------------------------------------------------------

SPEEDSCOPE = ROOT / ".cache" / "npm" / "node_modules" / "speedscope" / "dist" / "release" / "index.html"


def check_trace_structure(doc):
    """Chrome trace events as the format requires them: per thread, every
    "B" closed by an "E" of the same frame in stack order, times never going
    back. Returns {tid: [stacks begun, as tuples of names outermost first]}."""
    assert isinstance(doc["traceEvents"], list)
    open_ = {}
    last_ts = {}
    stacks = {}
    names = {}
    for ev in doc["traceEvents"]:
        assert ev["ph"] in ("B", "E", "M"), ev
        if ev["ph"] == "M":
            if ev["name"] == "thread_name":
                names[ev["tid"]] = ev["args"]["name"]
            continue
        assert isinstance(ev["pid"], int) and isinstance(ev["tid"], int)
        assert isinstance(ev["ts"], (int, float)) and ev["ts"] >= last_ts.get(ev["tid"], 0), ev
        last_ts[ev["tid"]] = ev["ts"]
        st = open_.setdefault(ev["tid"], [])
        key = (ev["name"], ev["args"]["filename"], ev["args"].get("line"))
        if ev["ph"] == "B":
            st.append(key)
            stacks.setdefault(ev["tid"], []).append(tuple(k[0] for k in st))
        else:
            assert st and st[-1] == key, (ev, st[-3:])
            st.pop()
    assert all(not st for st in open_.values()), "frames left open"
    assert set(stacks) <= set(names)
    return stacks


def chromium_url(url, workdir):
    """test_flamegraph's headless Chromium, on a URL (speedscope takes its
    profile from the URL's fragment): (DOM, stderr)."""
    consumer_only_once()
    from test_flamegraph import CHROMIUM_TIMEOUT, chromium_binary
    profile_dir = Path(workdir) / "chromium-profile"
    profile_dir.mkdir(exist_ok=True)
    res = subprocess.run([chromium_binary(), "--headless", "--no-sandbox", "--disable-gpu",
                          "--disable-background-networking", "--disable-component-update",
                          "--disable-sync", "--no-first-run", f"--user-data-dir={profile_dir}",
                          "--virtual-time-budget=8000", "--window-size=1400,900",
                          "--allow-file-access-from-files", "--dump-dom", url],
                         capture_output=True, timeout=CHROMIUM_TIMEOUT)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout.decode("utf-8"), res.stderr.decode("utf-8", errors="replace")


def speedscope_import(trace, workdir):
    """Load the trace with speedscope's own importer in headless Chromium (as
    its command line does: a script calling speedscope.loadFileFromBase64).
    An alert (speedscope's "Unrecognized format") or a console warning or
    error lands in the page's title. Returns the DOM."""
    if not SPEEDSCOPE.is_file():
        pytest.fail(f"speedscope not installed at {SPEEDSCOPE}: run scripts/install-deps.sh",
                    pytrace=False)
    data = base64.b64encode(Path(trace).read_bytes()).decode()
    loader = Path(workdir) / "load.js"
    loader.write_text(
        "const note = (k) => (...a) => { document.title = 'ERROR ' + k + ': ' + a.join(' '); };\n"
        "window.alert = note('alert'); console.error = note('error'); console.warn = note('warn');\n"
        f"speedscope.loadFileFromBase64({json.dumps(Path(trace).name)}, {json.dumps(data)});\n")
    dom, _ = chromium_url(SPEEDSCOPE.as_uri() + "#localProfilePath=" + str(loader), workdir)
    return dom, loader


def test_chrometrace_is_valid_and_speedscope_reads_it(pystrobe, habit_target, habits, tmp_path):
    """attach --chrometrace: balanced B/E events whose stacks are the
    target's; speedscope's Chrome trace importer takes it, one profile per
    thread named tid:N (NAME)."""
    out = tmp_path / "trace.json"
    res = run_pystrobe(pystrobe, "attach", "-d", "1.5", "--chrometrace", "-o", out, habits.pid)
    assert res.returncode == 0, res.stderr.decode()
    stacks = check_trace_structure(json.loads(out.read_text()))
    assert any(s[-1] == "busy_fn" for ss in stacks.values() for s in ss)
    assert any("waiter_fn" in s for ss in stacks.values() for s in ss)
    dom = speedscope_dom(out, tmp_path)
    # the first (main) thread, with its Python name after its id
    assert re.search(r"tid:\d+ \(MainThread\) \(tid \d+\) <span[^>]*>\(1/2\)</span>", dom), \
        dom[-3000:]


def test_chrometrace_run_with_function(pystrobe, habit_target, tmp_path):
    """run --chrometrace --function: frames at their function's first line,
    so busy_fn begins once and stays open (its lines do not end it)."""
    out = tmp_path / "trace.json"
    res = run_pystrobe(pystrobe, "run", "-d", "1.5", "--chrometrace", "--function", "-o", out,
                       "--", *habit_target.argv, "-B", habit_target.stage(WORKLOAD))
    assert res.returncode == 0, res.stderr.decode()
    doc = json.loads(out.read_text())
    check_trace_structure(doc)
    busy = [ev for ev in doc["traceEvents"] if ev.get("name") == "busy_fn"]
    assert [ev["ph"] for ev in busy] == ["B", "E"], busy[:6]
    assert busy[0]["args"]["line"] == first_line("busy_fn")
    speedscope_dom(out, tmp_path)


def speedscope_dom(trace, workdir):
    dom, loader = speedscope_import(trace, workdir)
    m = re.search(r"<title>(.*?)</title>", dom, re.S)
    assert m and not m.group(1).startswith("ERROR"), m.group(1) if m else dom[:2000]
    assert m.group(1).startswith(Path(trace).name), m.group(1)
    return dom


# --- python -m pystrobe ----------------------------------------------------------------

MODULE_DIR = Path(os.environ.get("PYSTROBE_BUILD", ROOT / "build")) / "python"
HOST_PYTHON = "/usr/bin/python3"


def python_m(args, **env):
    """`python3 -m pystrobe ARGS` with the built package, env as given
    (PATH without pystrobe unless given)."""
    assert (MODULE_DIR / "pystrobe" / "__main__.py").is_file(), "make module first"
    full = {"PYTHONPATH": str(MODULE_DIR), "PATH": "/usr/bin:/bin", **env}
    return subprocess.run([HOST_PYTHON, "-m", "pystrobe", *map(str, args)], env=full,
                          capture_output=True, timeout=120)


def test_python_m_runs_the_command(pystrobe, habit_target, habits):
    """python -m pystrobe dump -p PID prints the target's stacks, finding
    the binary through PYSTROBE_BIN or PATH; its exit status is the
    command's."""
    for env in ({"PYSTROBE_BIN": str(pystrobe)}, {"PATH": f"{pystrobe.parent}:/usr/bin:/bin"}):
        res = python_m(["dump", "-p", habits.pid], **env)
        assert res.returncode == 0, res.stderr
        assert b"busy_fn" in res.stdout and b"waiter_fn" in res.stdout
        assert python_m(["--version"], **env).stdout == run_pystrobe(pystrobe, "--version").stdout
        assert python_m(["attach", "nope"], **env).returncode == 2


def test_python_m_says_when_the_binary_is_missing(tmp_path):
    res = python_m(["--version"])
    assert res.returncode == 127 and b"PYSTROBE_BIN" in res.stderr, res
    res = python_m(["--version"], PYSTROBE_BIN=str(tmp_path / "nope"))
    assert res.returncode == 127 and b"not an executable" in res.stderr, res
