"""`pystrobe dump` against real interpreters.

The stack tests compare pystrobe's answer field by field with what the target
interpreter reported about itself (stack_target.py); the error tests check
each exit status of the CLI contract and the substance of its message.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import run_pystrobe
from targets import feature_targets, python2_target, unsupported_targets

FRAME_FIELDS = ["filename", "qualname", "firstlineno", "lasti",
                "lineno", "end_lineno", "col_offset", "end_col_offset"]
UNICODE_QUALNAME = "fun\u00e7\u00e3o_\u03bb"
UNICODE_FILE = "m\u00f3dulo_\u00fcn\u00ef.py"

EXIT_OK, EXIT_USAGE, EXIT_NO_PROCESS, EXIT_NOT_PYTHON = 0, 2, 3, 4
EXIT_PERMISSION, EXIT_UNSUPPORTED, EXIT_EXITED = 5, 6, 7


# --- helpers ------------------------------------------------------------------

def dump_json(pystrobe, pid):
    res = run_pystrobe(pystrobe, "dump", "--json", pid)
    assert res.returncode == EXIT_OK, \
        f"dump --json {pid} exited {res.returncode}: {res.stderr.decode(errors='replace')}"
    return json.loads(res.stdout.decode("utf-8"))


def main_interpreter_threads(doc):
    interps = doc["interpreters"]
    assert [i["id"] for i in interps] == [0], "expected only the main interpreter"
    return interps[0]["threads"]


def report_threads(stack):
    return {t["native_thread_id"]: t for t in stack.report["threads"]}


def dumped_threads(doc):
    threads = main_interpreter_threads(doc)
    by_tid = {t["native_thread_id"]: t for t in threads}
    assert len(by_tid) == len(threads), \
        f"duplicate native_thread_id in {[t['native_thread_id'] for t in threads]}"
    return by_tid


def describe(t):
    return f"thread {t['tag']} (tid {t['native_thread_id']})"


def assert_error(res, status, *needles, one_line=True):
    """Exit status is status; stderr starts with "pystrobe: " and contains
    every needle (case-insensitive); with one_line, stderr is one line."""
    err = res.stderr.decode("utf-8", errors="replace")
    assert res.returncode == status, \
        f"exit status {res.returncode}, expected {status}; stderr: {err!r}"
    assert err.startswith("pystrobe: "), f"stderr does not start with 'pystrobe: ': {err!r}"
    if one_line:
        assert err.endswith("\n") and err.count("\n") == 1, \
            f"stderr is not exactly one line: {err!r}"
    for n in needles:
        assert n.lower() in err.lower(), f"{n!r} not in stderr {err!r}"
    return err


def all_strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from all_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from all_strings(v)


# --- the target's own report is what we think it is ---------------------------
# (so that a wrong stack target cannot make the comparisons below vacuous)

def test_report_has_the_known_stacks(stack):
    threads = {t["tag"]: t for t in stack.report["threads"]}
    assert sorted(threads) == sorted(["main", "gen", "coro", "nested", "lambda",
                                      "unicode", "recursion", "except"])
    version = tuple(int(x) for x in stack.report["python_version"].split(".")[:2])

    def names(*qualnames):
        # Before 3.11 code objects have no co_qualname: only the last part.
        return [q if version >= (3, 11) else q.split(".")[-1] for q in qualnames]

    qualnames = {tag: [f["qualname"] for f in t["frames"]] for tag, t in threads.items()}
    tail = names("Event.wait", "Condition.wait")
    assert qualnames["main"] == names("<module>", "main", "block") + tail
    assert qualnames["gen"][-5:] == names("thread_gen", "gen", "block") + tail
    assert qualnames["coro"][-5:] == names("coro_main", "coro_inner", "block") + tail
    assert names("Handle._run")[0] in qualnames["coro"] and "run" in qualnames["coro"]
    assert qualnames["nested"][-5:] == names("thread_nested", "Outer.Inner.method",
                                             "block") + tail
    assert qualnames["lambda"][-5:] == names(
        "thread_lambda", "thread_lambda.<locals>.<lambda>", "block") + tail
    assert qualnames["unicode"][-4:] == names("thread_unicode", UNICODE_QUALNAME) + tail
    assert threads["unicode"]["frames"][-3]["filename"].endswith("/" + UNICODE_FILE)
    assert qualnames["recursion"][-204:] == ["thread_recursion"] + ["recurse"] * 200 \
        + ["block"] + tail
    assert qualnames["except"][-4:] == ["thread_except", "block"] + tail
    assert [t["main_thread"] for t in threads.values()].count(True) == 1
    assert threads["main"]["main_thread"] is True
    assert threads["except"]["has_exception"] is True


# --- dump --json against the report -------------------------------------------

def test_dump_header(pystrobe, stack):
    doc = dump_json(pystrobe, stack.pid)
    assert doc["pid"] == stack.pid
    assert doc["python_version"] == stack.report["python_version"]
    image = doc["image"]
    major, minor = stack.target.version
    assert re.fullmatch(rf"(lib)?python{major}\.{minor}m?(\.so.*)?",
                        os.path.basename(image)), f"unexpected image {image!r}"
    assert Path(image).exists() or stack.target.host_path(image).exists(), \
        f"image {image!r} does not exist"


def test_dump_threads(pystrobe, stack):
    doc = dump_json(pystrobe, stack.pid)
    got = dumped_threads(doc)
    want = report_threads(stack)
    assert sorted(got) == sorted(want), "native thread ids differ"
    # Newest first: the reverse of the order the threads were started in.
    newest_first = [t["native_thread_id"] for t in
                    sorted(want.values(), key=lambda t: t["start_index"], reverse=True)]
    assert [t["native_thread_id"] for t in main_interpreter_threads(doc)] == newest_first
    for tid, w in want.items():
        assert got[tid]["thread_id"] == w["thread_id"], f"{describe(w)}: thread_id"


def test_dump_thread_status(pystrobe, stack):
    doc = dump_json(pystrobe, stack.pid)
    got = dumped_threads(doc)
    problems = []
    for tid, w in report_threads(stack).items():
        g = got.get(tid)
        if g is None:
            problems.append(f"{describe(w)}: missing from the dump")
            continue
        want_status = {"main_thread": w["main_thread"], "holds_gil": False,
                       "gil_requested": False, "on_cpu": False,
                       "has_exception": w["has_exception"]}
        for k, v in want_status.items():
            if g["status"].get(k, "<absent>") != v:
                problems.append(f"{describe(w)}: status.{k} expected {v!r}, "
                                f"got {g['status'].get(k, '<absent>')!r}")
        if g["error"] is not None:
            problems.append(f"{describe(w)}: error {g['error']!r}")
    assert not problems, "\n".join(problems)


def test_dump_frames(pystrobe, stack):
    doc = dump_json(pystrobe, stack.pid)
    got = dumped_threads(doc)
    problems = []
    for tid, w in report_threads(stack).items():
        g = got.get(tid)
        if g is None:
            problems.append(f"{describe(w)}: missing from the dump")
            continue
        problems += frame_problems(w, g["frames"])
    assert not problems, "\n".join(problems[:60])


def frame_problems(w, gf):
    """How the dumped frames gf differ from the ones thread w reported."""
    wf = w["frames"]
    if [f["qualname"] for f in wf] != [f.get("qualname") for f in gf]:
        return [f"{describe(w)}: frames differ ({len(gf)}, expected {len(wf)})\n"
                f"  expected: {[f['qualname'] for f in wf]}\n"
                f"  got:      {[f.get('qualname') for f in gf]}"]
    return [f"{describe(w)}: frame {i} ({a['qualname']}): "
            f"{k} expected {a[k]!r}, got {b.get(k, '<absent>')!r}"
            for i, (a, b) in enumerate(zip(wf, gf))
            for k in FRAME_FIELDS if b.get(k, "<absent>") != a[k]]


def test_dump_json_is_utf8_and_names_arrive_intact(pystrobe, stack):
    res = run_pystrobe(pystrobe, "dump", "--json", stack.pid)
    assert res.returncode == EXIT_OK, res.stderr.decode(errors="replace")
    text = res.stdout.decode("utf-8")              # strict: fails on bad UTF-8
    doc = json.loads(text)
    for s in all_strings(doc):
        s.encode("utf-8")                          # fails on lone surrogates (\udcxx)
    want = next(t for t in stack.report["threads"] if t["tag"] == "unicode")
    want_frame = next(f for f in want["frames"] if f["qualname"] == UNICODE_QUALNAME)
    got = dumped_threads(doc)[want["native_thread_id"]]
    got_frames = [f for f in got["frames"] if f["qualname"] == UNICODE_QUALNAME]
    assert len(got_frames) == 1, [f["qualname"] for f in got["frames"]]
    assert got_frames[0]["filename"] == want_frame["filename"]
    assert got_frames[0]["filename"].endswith("/" + UNICODE_FILE)


# --- the text form -----------------------------------------------------------

THREAD_LINE = re.compile(r"^\s*Thread (\d+)\b(.*)$")
FRAME_LINE = re.compile(r'^\s*File "(.*)", line (\S+), in (.+)$')


def test_dump_text(pystrobe, stack):
    res = run_pystrobe(pystrobe, "dump", stack.pid)
    assert res.returncode == EXIT_OK, res.stderr.decode(errors="replace")
    lines = res.stdout.decode("utf-8").splitlines()
    assert lines[0].startswith(
        f"Process {stack.pid}: Python {stack.report['python_version']} ("), lines[0]
    assert any(l.strip() == "Interpreter 0:" for l in lines), "no 'Interpreter 0:' line"
    # Per thread: its header text and its frame lines as (line, qualname).
    headers, frames, current = {}, {}, None
    for line in lines:
        m = THREAD_LINE.match(line)
        if m:
            current = int(m.group(1))
            headers[current] = m.group(2)
            frames[current] = []
            continue
        m = FRAME_LINE.match(line)
        if m and current is not None:
            frames[current].append((m.group(2), m.group(3)))
    want = report_threads(stack)
    assert sorted(frames) == sorted(want), "thread ids in the text form differ"
    for tid, w in want.items():
        # Loosely: "in QUALNAME" may be followed by more (e.g. columns), and a
        # frame whose line is unknown (None) may print any placeholder.
        expected = [(got[0] if f["lineno"] is None else str(f["lineno"]),
                     got[1] if got[1].startswith(f["qualname"] + " ") else f["qualname"])
                    for f, got in zip(w["frames"], frames[tid])]
        assert len(frames[tid]) == len(w["frames"]) and frames[tid] == expected, \
            f"{describe(w)}: text frames differ"
        assert ("main thread" in headers[tid]) == w["main_thread"], \
            f"{describe(w)}: header {headers[tid]!r}"


# --- errors --------------------------------------------------------------------

def test_usage_no_pid(pystrobe):
    assert_error(run_pystrobe(pystrobe, "dump"), EXIT_USAGE, one_line=False)


@pytest.mark.parametrize("arg", ["abc", "12x", ""])
def test_usage_bad_pid(pystrobe, arg):
    assert_error(run_pystrobe(pystrobe, "dump", arg), EXIT_USAGE, one_line=False)


def test_no_such_process(pystrobe):
    p = subprocess.Popen(["/bin/true"])
    p.wait()
    pid = p.pid
    assert not os.path.exists(f"/proc/{pid}")
    assert_error(run_pystrobe(pystrobe, "dump", pid), EXIT_NO_PROCESS,
                 "no such process", str(pid))


def test_not_python(pystrobe, spawn):
    p = spawn(["/usr/bin/sleep", "600"])
    assert os.readlink(f"/proc/{p.pid}/exe") == "/usr/bin/sleep"
    assert_error(run_pystrobe(pystrobe, "dump", p.pid), EXIT_NOT_PYTHON,
                 f"process {p.pid}", "not Python", "/usr/bin/sleep")


@pytest.fixture
def pystrobe_for_nobody(pystrobe):
    """A copy of the binary that user nobody can reach and run."""
    d = Path(tempfile.mkdtemp(prefix="pystrobe-nobody-"))
    try:
        d.chmod(0o755)
        copy = d / "pystrobe"
        shutil.copy2(pystrobe, copy)
        copy.chmod(0o755)
        yield copy
    finally:
        shutil.rmtree(d, ignore_errors=True)


# Tests of how dump meets a process (rights, exit, zombie), not of how a
# version's stacks are read: one interpreter of each frame layout.
@pytest.mark.parametrize("target", feature_targets(), ids=repr)
def test_permission_denied(pystrobe_for_nobody, python_sleeper, target):
    if os.geteuid() != 0:
        pytest.fail("the permission test needs root: it runs pystrobe as nobody "
                    "against a root-owned target")
    p, _ = python_sleeper(target)
    assert os.stat(f"/proc/{p.pid}").st_uid == 0
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    res = run_pystrobe(pystrobe_for_nobody, "dump", p.pid, prefix=as_nobody)
    assert_error(res, EXIT_PERMISSION, "permission denied", f"process {p.pid}",
                 "CAP_SYS_PTRACE")


@pytest.mark.parametrize("old", unsupported_targets(), ids=repr)
def test_unsupported_python3(pystrobe, python_sleeper, old):
    p, _ = python_sleeper(old)
    major, minor = old.version
    err = assert_error(run_pystrobe(pystrobe, "dump", p.pid), EXIT_UNSUPPORTED,
                       f"process {p.pid}", "not supported")
    assert re.search(rf"Python {major}\.{minor}\b", err), err
    # Why, and what is: one line.
    assert "have no _PyRuntime" in err and "supported: 3.7 to 3.15" in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_unsupported_python2(pystrobe, python_sleeper):
    py2 = python2_target()
    if py2 is None:
        pytest.fail("pyenv Python 2.7.18 is not installed (scripts/install-deps.sh)")
    code = "import sys, time; sys.stdout.write('ready\\n'); sys.stdout.flush(); time.sleep(600)"
    p, _ = python_sleeper(py2, code)
    err = assert_error(run_pystrobe(pystrobe, "dump", p.pid), EXIT_UNSUPPORTED,
                       f"process {p.pid}", "not supported")
    assert re.search(r"\b2\.7\b", err), err
    assert "Python 2 has no _PyRuntime" in err and "supported: 3.7 to 3.15" in err, err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("target", feature_targets(), ids=repr)
def test_exited_during_dump(pystrobe, python_sleeper, target):
    p, _ = python_sleeper(target)
    env = dict(os.environ, PYSTROBE_TEST_DELAY_AFTER_ATTACH_MS="4000")
    dumper = subprocess.Popen([str(pystrobe), "dump", str(p.pid)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # Once pystrobe says it has attached and waits, the target goes.
        said = dumper.stderr.readline().decode(errors="replace")
        assert "attached, waiting" in said, "pystrobe did not wait after attaching: " + said
        p.kill()
        p.wait()
        out, err = dumper.communicate(timeout=60)
    finally:
        if dumper.poll() is None:
            dumper.kill()
            dumper.wait()
    res = subprocess.CompletedProcess(dumper.args, dumper.returncode, out, err)
    assert_error(res, EXIT_EXITED, f"process {p.pid}", "exited during the dump")


ZOMBIE_PARENT = """\
import os, time
pid = os.fork()
if pid == 0:
    os._exit(0)
print(pid, flush=True)
time.sleep(600)
"""


def _state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


@pytest.mark.parametrize("target", feature_targets(), ids=repr)
def test_zombie(pystrobe, python_sleeper, target):
    parent, line = python_sleeper(target, ZOMBIE_PARENT)
    child = int(line)
    deadline = time.monotonic() + 10
    while _state(child) != "Z":
        assert time.monotonic() < deadline, f"child {child} never became a zombie"
        time.sleep(0.02)
    res = run_pystrobe(pystrobe, "dump", child)
    err = res.stderr.decode(errors="replace")
    assert res.returncode in (EXIT_NO_PROCESS, EXIT_EXITED), \
        f"exit status {res.returncode}, expected 3 or 7; stderr: {err!r}"
    assert_error(res, res.returncode, str(child))
    assert re.search(r"exited|zombie", err, re.I), err
    assert _state(child) == "Z"     # pystrobe did not reap or disturb it
