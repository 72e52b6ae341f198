"""Sampling over time: `pystrobe run` and `pystrobe attach` on every supported
interpreter.

The workloads (tests/integration/workloads/) have known profiles: split_3_1.py
spends 3/4 of its time in alpha() and 1/4 in beta() and measures that itself;
modes.py has threads spinning, asleep, and asleep in an `except` block;
pkgdemo is run with -m; the shell scripts exec Python or start it as a child.
Every profile is read back in full (pstats through /usr/bin/python3's pstats
module, every collapsed line parsed, flame graphs to their `</html>`), and the
end-of-run summary is checked on every successful run.

pystrobe always runs in a session of its own, so that a signal reaches only
the process it is sent to, and whatever it leaves behind is killed by pid.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (HERE, SessionProcesses, run_pystrobe,
                      session_members, wait_ready, wait_session_empty)
from targets import feature_targets, python2_target, supported_targets, unsupported_targets

# What the command does with samples, on one interpreter of each frame
# layout (targets.FEATURE_TARGETS); how each version's stacks are read is
# tested on all of them elsewhere.
@pytest.fixture(scope="module", params=feature_targets(), ids=repr)
def target(request):
    return request.param


WORKLOADS = HERE / "workloads"
SYSTEM_PYTHON = "/usr/bin/python3"
EXIT_OK, EXIT_USAGE, EXIT_NO_PROCESS, EXIT_NOT_PYTHON, EXIT_UNSUPPORTED = 0, 2, 3, 4, 6
RUN_TIMEOUT = 60.0          # seconds for one pystrobe run that should end by itself
STOP_TIMEOUT = 15.0         # seconds for pystrobe to finish after Ctrl-C / target exit
SPLIT_SHARE = 0.75          # alpha's share of alpha + beta in split_3_1.py
# How far the profile's share may lie from it: wide enough for the sampling
# error of a few thousand samples on a loaded machine, a point wider in the
# sanitizer build, which takes several times fewer samples.
SPLIT_TOLERANCE = 0.05 if os.environ.get("PYSTROBE_SANITIZED") else 0.04
# How much further it may lie above the truth than below: `run` on 3.8 leans
# towards alpha by a cause not yet found (not aliasing with the sampling
# period, not failed samples; bench/RESULTS.md has the figures), and a bias
# that only raises alpha's share must not fail a correct build.
SPLIT_BIAS_UP = 0.03 if os.environ.get("PYSTROBE_SANITIZED") else 0.01
WORKERS = ("spin", "sleeper", "handler", "via_c")
ENV = {"PYTHONDONTWRITEBYTECODE": "1"}
# For measurements of the split and the rate: pystrobe and the workload it
# runs ahead of whatever else the machine does, since a wall-clock profile
# measures the scheduler too. (A host that steals the virtual CPUs still
# shows: check_split allows for what the workload measured of it.)
AHEAD = ["nice", "-n", "-15"]


# --- running pystrobe ----------------------------------------------------------

# What a test waits on before it signals a pystrobe that must have sampled:
# the live line (every 250 ms, after a sample) with the samples so far.
REALTIME = ["--realtime-stats"]
REALTIME_SAMPLES = re.compile(r"samples (\d+), failed \d+")

class Strobe:
    """One pystrobe process, in its own session, stdout and stderr in files."""

    def __init__(self, procs, binary, args, cwd, logs, name, env=None, prefix=()):
        logs.mkdir(parents=True, exist_ok=True)
        self.args = [*prefix, str(binary), *map(str, args)]
        self.out_path = logs / f"{name}.stdout"
        self.err_path = logs / f"{name}.stderr"
        full_env = dict(os.environ, **ENV)
        full_env.update(env or {})
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = procs.start(self.args, cwd=str(cwd), env=full_env,
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        self.pid = self.proc.pid
        self.cwd = Path(cwd)
        self.started = time.monotonic()
        self.elapsed = None

    @property
    def stdout(self):
        return self.out_path.read_text(errors="replace")

    @property
    def stderr(self):
        return self.err_path.read_text(errors="replace")

    def describe(self):
        return (f"`{' '.join(self.args)}` exited {self.proc.returncode}\n"
                f"--- stderr:\n{self.stderr}--- stdout (last 2000 chars):\n"
                f"{self.stdout[-2000:]}")

    def wait(self, timeout=RUN_TIMEOUT):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"pystrobe still running after {timeout} s: "
                        f"`{' '.join(self.args)}`\n--- stderr:\n{self.stderr}")
        if self.elapsed is None:
            self.elapsed = time.monotonic() - self.started
        return self

    def check(self, status=EXIT_OK, timeout=RUN_TIMEOUT):
        """Wait; the exit status is status and the summary is complete."""
        self.wait(timeout)
        assert self.proc.returncode == status, \
            f"expected exit status {status}\n{self.describe()}"
        return parse_summary(self)

    def interrupt(self):
        os.kill(self.pid, signal.SIGINT)

    def samples_so_far(self):
        """The samples taken so far by a pystrobe run with REALTIME (its
        latest line; 0 before the first)."""
        counts = REALTIME_SAMPLES.findall(self.stderr)
        return int(counts[-1]) if counts else 0

    def wait_samples(self, more_than=0, timeout=RUN_TIMEOUT):
        """Wait until a pystrobe run with REALTIME has taken more than
        more_than samples (fails if it ends first); their number."""
        deadline = time.monotonic() + timeout
        while (n := self.samples_so_far()) <= more_than:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"pystrobe took no more than {more_than} samples\n{self.describe()}")
            time.sleep(0.05)
        return n

    def wait_samples_from_now(self, timeout=RUN_TIMEOUT):
        """Wait until a pystrobe run with REALTIME has taken a sample that
        began after this call: a line printed after one printed after the
        call (a line follows the sample that made it)."""
        self.wait_samples(self.wait_samples(self.samples_so_far(), timeout), timeout)


@pytest.fixture
def strobes(pystrobe, tmp_path):
    """strobes(args, cwd=None, env=None, prefix=()) -> a started Strobe;
    cleaned up."""
    procs = SessionProcesses()
    n = [0]

    def start(args, cwd=None, env=None, prefix=()):
        n[0] += 1
        return Strobe(procs, pystrobe, args, cwd or tmp_path, tmp_path / "logs",
                      f"pystrobe-{n[0]}", env, prefix)

    yield start
    procs.close()


# --- the end-of-run summary ----------------------------------------------------

SUMMARY = {
    "captured": re.compile(r"^Captured (\d+) samples in ([0-9.]+) seconds\s*$", re.M),
    "rate": re.compile(r"^Sample rate: ([0-9.]+) samples/sec \(requested ([^)]*)\)\s*$", re.M),
    "failed": re.compile(r"^Failed samples: (\d+) \(([0-9.]+)%\)\s*$", re.M),
    "missed": re.compile(r"^Missed samples: (\d+) \(([0-9.]+)%\)\s*$", re.M),
}
WROTE = re.compile(r"^Wrote (\S.*) to (.+?)\s*$", re.M)


def parse_summary(strobe):
    err = strobe.stderr
    found = {}
    for key, rx in SUMMARY.items():
        m = rx.search(err)
        assert m, f"no {key!r} line in the summary\n{strobe.describe()}"
        found[key] = m.groups()
    return {"samples": int(found["captured"][0]), "seconds": float(found["captured"][1]),
            "rate": float(found["rate"][0]), "requested": parse_rate(found["rate"][1]),
            "failed": int(found["failed"][0]), "failed_pct": float(found["failed"][1]),
            "missed": int(found["missed"][0]), "missed_pct": float(found["missed"][1]),
            "wrote": WROTE.findall(err)}


def parse_rate(text):
    m = re.fullmatch(r"\s*([0-9.]+)\s*(k|m)?(hz)?\s*(samples/sec)?\s*", text, re.I)
    assert m, f"cannot read the requested rate {text!r}"
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6}[(m.group(2) or "").lower()]


def assert_wrote(strobe, summary, path):
    """A `Wrote FORMAT to PATH` line names path (a relative PATH is taken
    from pystrobe's working directory)."""
    paths = [(strobe.cwd / p).resolve() for _, p in summary["wrote"]]
    assert Path(path).resolve() in paths, \
        f"no 'Wrote ... to {path}' line\n{strobe.describe()}"


# --- the output formats --------------------------------------------------------

COLLAPSED_LINE = re.compile(r"^(tid:\d+( \(ns \d+\))?( \([^;]*\))?;)?[^ ].* \d+$")
# A thread's root frame: its id, and its own where the target runs in
# another PID namespace.
TID_FRAME = re.compile(r"^tid:(\d+)(?: \(ns (\d+)\))?(?: \(([^;]*)\))?$")
MARKERS = ("<native>", "<GC>")


class Stack:
    def __init__(self, tid, frames, count, ns_tid=None):
        self.tid = tid            # int, or None with --no-tid
        self.ns_tid = ns_tid      # int where the thread's own id differs, else None
        self.frames = frames      # [(file, qualname, line)], root first; markers (None, m, None)
        self.count = count

    @property
    def names(self):
        return [q for _, q, _ in self.frames]

    def leaf_python(self):
        """The leaf-most Python frame's qualname."""
        for _, q, _ in reversed(self.frames):
            if q not in MARKERS:
                return q
        return None


def parse_collapsed(text, where):
    stacks = []
    for n, line in enumerate(text.splitlines(), 1):
        assert COLLAPSED_LINE.match(line), f"{where}:{n}: bad collapsed line {line!r}"
        stack, count = line.rsplit(" ", 1)
        parts = stack.split(";")
        tid = ns_tid = None
        if parts[0].startswith("tid:"):
            m = TID_FRAME.match(parts[0])
            assert m, f"{where}:{n}: bad thread frame {parts[0]!r}"
            tid = int(m.group(1))
            ns_tid = int(m.group(2)) if m.group(2) else None
            parts = parts[1:]
        frames = []
        for p in parts:
            if p in MARKERS:
                frames.append((None, p, None))
                continue
            fields = p.rsplit(":", 2)
            assert len(fields) == 3 and fields[0] and fields[1] and fields[2].isdigit(), \
                f"{where}:{n}: frame {p!r} is not FILE:QUALNAME:LINE in {line!r}"
            frames.append((fields[0], fields[1], int(fields[2])))
        assert frames, f"{where}:{n}: a stack without frames: {line!r}"
        stacks.append(Stack(tid, frames, int(count), ns_tid))
    return stacks


def load_collapsed(path):
    path = Path(path)
    assert path.is_file(), f"no collapsed output at {path}"
    stacks = parse_collapsed(path.read_text(encoding="utf-8"), path)
    assert stacks, f"{path} is empty"
    return stacks


PSTATS_LOADER = r"""
import io, json, pstats, sys
s = pstats.Stats(sys.argv[1], stream=io.StringIO())
# Run pstats' own readers over everything: a caller key missing from the
# table or a zero call count fails here as it would for a user.
s.sort_stats("tottime").print_stats()
s.print_callers()
funcs = []
for (fn, line, name), (cc, nc, tt, ct, callers) in s.stats.items():
    funcs.append({"key": [fn, line, name], "direct": cc, "cumulative": nc,
                  "tottime": tt, "cumtime": ct,
                  "callers": [[list(k), v] for k, v in callers.items()]})
json.dump(funcs, sys.stdout)
"""


def load_pstats(path):
    """{(file, firstlineno, qualname): entry} as /usr/bin/python3's pstats reads it."""
    path = Path(path)
    assert path.is_file() and path.stat().st_size > 0, f"no pstats output at {path}"
    res = subprocess.run([SYSTEM_PYTHON, "-c", PSTATS_LOADER, str(path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert res.returncode == 0, \
        f"pstats.Stats({path}) failed:\n{res.stderr.decode(errors='replace')}"
    funcs = {tuple(f["key"]): f for f in json.loads(res.stdout)}
    assert funcs, f"{path} holds no functions"
    return funcs


def pstats_by_name(funcs, qualname):
    found = [f for k, f in funcs.items() if k[2] == qualname]
    assert len(found) == 1, \
        f"expected one {qualname!r} in the pstats file, got {[f['key'] for f in found]}"
    return found[0]


def check_flamegraph(path, names):
    path = Path(path)
    assert path.is_file(), f"no flame graph at {path}"
    text = path.read_text(encoding="utf-8")
    head = text.lstrip()[:200].lower()
    assert head.startswith("<!doctype html") or head.startswith("<html"), \
        f"{path} does not start as HTML: {text[:200]!r}"
    assert text.rstrip().endswith("</html>"), f"{path} is cut short: ...{text[-200:]!r}"
    for n in names:
        assert n in text, f"{n!r} is not in the flame graph {path}"


def def_line(script, name):
    """The line of `def name(` in script (a host path)."""
    for n, line in enumerate(Path(script).read_text().splitlines(), 1):
        if line.startswith(f"def {name}("):
            return n
    raise AssertionError(f"no def {name} in {script}")


# --- workloads and how to start them on a target ------------------------------

class Work:
    """The workloads staged where a target sees them."""

    def __init__(self, target):
        self.target = target
        self.host_dir, self.target_dir = target.stage_dir()
        shutil.copytree(WORKLOADS, self.host_dir, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))

    def path(self, name):
        """The path the target sees of workload file name."""
        return f"{self.target_dir}/{name}"

    def host(self, name):
        return self.host_dir / name

    def python_run_args(self):
        """`pystrobe run` arguments that run this target's interpreter on what
        follows them: `--python EXE` on the host, `-- chroot ROOT EXE` in the
        sid root (pystrobe follows chroot's exec)."""
        if self.target.chroot is None:
            return ["--python", self.target.argv[0]]
        return ["--", *self.target.argv]

    def shell_run_args(self, script):
        """`pystrobe run -- ...` arguments that run the shell script, which
        is given the interpreter and runs it on what follows."""
        *prefix, python = self.target.argv
        return ["--", *prefix, self.path(script), python]

    def close(self):
        shutil.rmtree(self.host_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def work(target):
    w = Work(target)
    yield w
    w.close()


def read_report(path, proc=None, timeout=30.0):
    """The JSON report split_3_1.py keeps at path (host path); fails early
    if proc, the process that runs it, has ended without one."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return json.loads(Path(path).read_text())
        except (FileNotFoundError, ValueError):
            if time.monotonic() > deadline or (proc is not None and proc.poll() is not None):
                raise AssertionError(f"no report from split_3_1.py at {path}")
            time.sleep(0.02)


def measured_share(r0, r1):
    """alpha's share of alpha + beta in wall time between two reports (r0
    None: from the start)."""
    a = r1["alpha_wall"] - (r0["alpha_wall"] if r0 else 0.0)
    b = r1["beta_wall"] - (r0["beta_wall"] if r0 else 0.0)
    return a / (a + b)


def check_split(what, alpha, beta, r0, r1):
    """alpha's share of alpha + beta in a profile is 3:1, within SPLIT_TOLERANCE.

    The workload's CPU split is exactly 3:1 (split_3_1.py --selftest); its
    wall-clock split, which wall-mode sampling sees, is 3:1 on a quiet
    machine, and drifts on a loaded one, by as much as the scheduler (the
    guest's, or the host's stealing a virtual CPU) stalled it more in one
    function than in the other. The workload measures that wall split over
    the same window, and the profile must lie between the two truths, 3:1
    and the measured wall split, give or take SPLIT_TOLERANCE."""
    assert alpha > 0 and beta > 0, f"{what}: alpha {alpha}, beta {beta}"
    share = alpha / (alpha + beta)
    wall = measured_share(r0, r1)
    low = min(SPLIT_SHARE, wall) - SPLIT_TOLERANCE
    high = max(SPLIT_SHARE, wall) + SPLIT_TOLERANCE + SPLIT_BIAS_UP
    numbers = (f"{what}: alpha {alpha}, beta {beta}: alpha's share {100 * share:.2f}%; "
               f"the workload measured {100 * wall:.2f}% of wall time; expected "
               f"{100 * low:.2f}% to {100 * high:.2f}%")
    print(numbers)
    assert low <= share <= high, numbers


class LongRunning:
    """A workload process started by the tests themselves (for attach)."""

    def __init__(self, target, argv):
        self.procs = SessionProcesses()
        self.proc = self.procs.start(target.argv + argv, stdout=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL)
        self.pid = self.proc.pid
        try:
            self.first_line = wait_ready(self.proc)
        except BaseException:
            self.close()
            raise

    def close(self):
        self.procs.close()


@pytest.fixture
def split_proc(work):
    """split_3_1.py running for long, keeping its report."""
    report = work.host("split.report.json")
    report.unlink(missing_ok=True)
    p = LongRunning(work.target, [work.path("split_3_1.py"), "600",
                                  "--report", work.path("split.report.json")])
    p.report = report
    read_report(report, p.proc)
    yield p
    p.close()


def thread_activity(pid, tid):
    """(state letter, voluntary + involuntary context switches) of a thread."""
    with open(f"/proc/{pid}/task/{tid}/stat") as f:
        state = f.read().rsplit(")", 1)[1].split()[0]
    with open(f"/proc/{pid}/task/{tid}/status") as f:
        switches = sum(int(l.split()[1]) for l in f if "ctxt_switches" in l)
    return state, switches


def start_modes(work, duration=3600):
    """modes.py, once every thread but spin() has settled into its sleep.
    A thread seen asleep once may only be waiting for the GIL that spin()
    holds (the main thread does, right after it printed its line, and comes
    back on a CPU 5 ms later): settled is asleep, with no context switch
    over QUIET seconds."""
    quiet = 0.1
    p = LongRunning(work.target, [work.path("modes.py"), str(duration)])
    try:
        p.tids = json.loads(p.first_line)
        assert p.tids["pid"] == p.pid, (p.tids, p.pid)
        tids = [p.tids[n] for n in ("main", "sleeper", "handler", "via_c")]
        deadline = time.monotonic() + 10
        while True:
            before = [thread_activity(p.pid, t) for t in tids]
            time.sleep(quiet)
            after = [thread_activity(p.pid, t) for t in tids]
            if before == after and all(st == "S" for st, _ in after):
                break
            assert time.monotonic() < deadline, \
                f"modes.py's threads never settled: {dict(zip(tids, after))}"
    except BaseException:
        p.close()
        raise
    return p


@pytest.fixture
def modes_proc(work):
    p = start_modes(work)
    yield p
    p.close()


# --- the 3:1 split -------------------------------------------------------------

class SplitProfiles:
    pass


@pytest.fixture(scope="module")
def split_profiles(pystrobe, work, tmp_path_factory):
    """split_3_1.py run by `pystrobe run` for 2.5 s at 2 kHz into a pstats
    file and, while it runs, `attach`ed to for 1.5 s at 2 kHz into collapsed
    stacks; with the workload's reports: before and after the attach, and
    its last."""
    sp = SplitProfiles()
    sp.dir = tmp_path_factory.mktemp("split")
    report = work.host("run.report.json")
    report.unlink(missing_ok=True)
    procs = SessionProcesses()
    try:
        sp.run = Strobe(procs, pystrobe,
                        ["run", "-r", "2khz", "-o", sp.dir / "split.pstats",
                         *work.python_run_args(), work.path("split_3_1.py"), "2.5",
                         "--report", work.path("run.report.json")],
                        sp.dir, sp.dir / "logs", "run", prefix=AHEAD)
        sp.before = read_report(report, sp.run.proc)
        sp.attach = Strobe(procs, pystrobe,
                           ["attach", "-r", "2khz", "-d", "1.5", "--collapsed",
                            "-o", sp.dir / "split.txt", sp.before["pid"]],
                           sp.dir, sp.dir / "logs", "attach", prefix=AHEAD)
        sp.attach.wait()
        sp.after = read_report(report)
        sp.run.wait()
        sp.last = read_report(report)
    finally:
        procs.close()
    return sp


def test_split_pstats_with_run(split_profiles, work):
    """`run`: the pstats file shows alpha:beta 3:1, in direct samples and in
    tottime, with exact keys and callers."""
    s, out = split_profiles.run, split_profiles.dir / "split.pstats"
    summary = s.check()
    assert_wrote(s, summary, out)
    report = split_profiles.last
    assert report["done"], report
    funcs = load_pstats(out)
    script = work.path("split_3_1.py")
    host_script = work.host("split_3_1.py")
    keys = {name: (script, def_line(host_script, name), name)
            for name in ("alpha", "beta", "main")}
    for name, key in keys.items():
        assert key in funcs, f"{key} not in the pstats file: {sorted(funcs)}"
    a, b, m = (funcs[keys[n]] for n in ("alpha", "beta", "main"))
    check_split("pstats direct samples", a["direct"], b["direct"], None, report)
    check_split("pstats tottime", a["tottime"], b["tottime"], None, report)
    # Leaves: everything alpha and beta were sampled in is their own time.
    for f in (a, b):
        assert f["cumulative"] == f["direct"], f
    assert m["cumulative"] >= a["direct"] + b["direct"], (m, a, b)
    # Each is called by main().
    for f in (a, b):
        callers = {tuple(k): v for k, v in f["callers"]}
        assert keys["main"] in callers, f"main is not a caller of {f['key']}: {callers}"
    # tottime = direct samples x the sampling interval (0.5 ms), for all.
    for f in funcs.values():
        if f["direct"]:
            interval = f["tottime"] / f["direct"]
            assert 0.0004 <= interval <= 0.0006, f"tottime/direct = {interval}: {f}"
        assert f["cumtime"] >= f["tottime"] - 1e-9, f


def test_split_collapsed_with_attach(split_profiles):
    """`attach`: the collapsed stacks whose leaf is alpha outnumber beta's 3:1."""
    s, out = split_profiles.attach, split_profiles.dir / "split.txt"
    summary = s.check()
    assert_wrote(s, summary, out)
    stacks = load_collapsed(out)
    leaves = {}
    for st in stacks:
        leaves[st.leaf_python()] = leaves.get(st.leaf_python(), 0) + st.count
    check_split("collapsed leaf counts", leaves.get("alpha", 0), leaves.get("beta", 0),
                split_profiles.before, split_profiles.after)
    # One thread, mostly in alpha or beta (the rest is main() reading clocks
    # and writing reports).
    pid = split_profiles.before["pid"]
    assert {st.tid for st in stacks} == {pid}, {st.tid for st in stacks}
    assert leaves["alpha"] + leaves["beta"] > 0.6 * sum(leaves.values()), leaves


def attach_collapsed(work, strobes, out, args, seconds):
    """Collapsed stacks of `attach -r 2khz -d seconds` to the workload args
    (script and its arguments), started for it and stopped after."""
    target = LongRunning(work.target, [work.path(args[0]), *args[1:]])
    try:
        strobes(["attach", "-r", "2khz", "-d", str(seconds), "--collapsed", "-o", out,
                 target.pid]).check()
    finally:
        target.close()
    return load_collapsed(out)


def test_generator_stacks_are_whole(work, strobes, tmp_path):
    """A running generator's caller is in its stack: every sample taken in
    generators.py's generators reads <module>, main, outer, inner[, leaf]."""
    whole = ["<module>", "main", "outer", "inner", "leaf"]
    total, bad = 0, []
    for st in attach_collapsed(work, strobes, tmp_path / "gen.txt", ["generators.py"], 0.6):
        names = st.names
        total += st.count
        if len(names) < 2 or names != whole[:len(names)]:
            bad.append(st)
    lost = sum(st.count for st in bad)
    assert total > 50, f"only {total} samples"
    # A walk can still race with a generator's resume in ways no check sees;
    # such samples must stay rare: the bound leaves a correct build room
    # under load, and a build without the checks exceeds it by far.
    assert lost <= 0.015 * total, (f"{lost} of {total} samples lack callers or have wrong "
                                   f"names, e.g.\n"
                     + "\n".join(f"  {';'.join(st.names)} {st.count}"
                                  for st in sorted(bad, key=lambda st: -st.count)[:5]))


def test_recompiled_code_is_named_anew(work, strobes, tmp_path):
    """Code objects freed and allocated again (at the same addresses, most
    likely) are read anew: no sample taken inside in_second() names a frame
    first, or the other way round."""
    counts = {"in_first": {}, "in_second": {}}
    for st in attach_collapsed(work, strobes, tmp_path / "recompile.txt",
                               ["recompile.py", "0.15"], 2):
        for phase, seen in counts.items():
            if phase in st.names:
                for name in ("first", "second"):
                    if name in st.names:
                        seen[name] = seen.get(name, 0) + st.count
    numbers = f"samples in first/second, by phase: {counts}"
    # Enough samples in each phase that a mix-up would show; the counts
    # themselves depend on how busy the machine is, so the floor is low.
    assert counts["in_first"].get("first", 0) >= 50, numbers
    assert counts["in_second"].get("second", 0) >= 50, numbers
    wrong = counts["in_first"].get("second", 0) + counts["in_second"].get("first", 0)
    right = counts["in_first"]["first"] + counts["in_second"]["second"]
    if work.target.version >= (3, 14):
        # The interpreter counts freed code objects: no mix-up at all.
        assert wrong == 0, numbers
    else:
        # Without that counter a cached code object is checked after the
        # walk; a profiler descheduled between the two while the program
        # frees the code object and allocates another at its address (a
        # phase change here) can still mix up one sample: at most 1 in 500.
        assert wrong * 500 <= right, numbers


SLEEPERS = 24


def sample_sleepers(work, strobes, tmp_path, *flags):
    """Sample SLEEPERS threads asleep for 0.6 s at 500 Hz; check that every
    sample held every sleeper (the main thread is asleep too). The run."""
    target = LongRunning(work.target, [work.path("sleepers.py"), str(SLEEPERS)])
    try:
        s = strobes(["attach", "-r", "500hz", "-d", "0.6", "--stats", "--collapsed", *flags,
                     "-o", tmp_path / "sleepers.txt", target.pid])
        samples = s.check()["samples"]
    finally:
        target.close()
    stacks = load_collapsed(tmp_path / "sleepers.txt")
    asleep = sum(st.count for st in stacks if st.names[-2:] == ["outer", "inner"])
    assert samples > 20, s.describe()
    assert asleep >= SLEEPERS * samples * 0.95, (asleep, samples, s.describe())
    return s, samples


def test_threads_checked_in_one_read(work, strobes, tmp_path):
    """Every thread's stack is read, and checked, without one more system
    call per thread: with 24 threads asleep, a sample costs a handful of
    reads (the batch, the second read of all chains, the code objects'
    check), not 24 or more."""
    s, _ = sample_sleepers(work, strobes, tmp_path, "--read-every-thread")
    m = re.search(r"memory reads: +\d+ system calls \(([0-9.]+) per sample", s.stderr)
    assert m, s.describe()
    assert float(m.group(1)) < 6, s.describe()


def test_sleeping_threads_taken_over(work, strobes, tmp_path):
    """By default a thread that has not held the GIL since the last sample
    is not read again: with 24 threads asleep, nearly every sleeper's stack
    is taken over, and every sample still holds every sleeper."""
    s, samples = sample_sleepers(work, strobes, tmp_path)
    m = re.search(r"idle threads: +(\d+) thread stacks taken over", s.stderr)
    assert m, s.describe()
    # A full read every 64 samples, and the odd wake of the main thread.
    assert int(m.group(1)) >= SLEEPERS * samples * 0.8, s.describe()


# --- modes ---------------------------------------------------------------------

MODE_RUNS = {
    "cpu": ["--mode", "cpu"],
    "wall": ["--mode", "wall", "-a"],
    "gil": ["--mode", "gil"],
    "exception": ["--mode", "exception"],
    "default": [],
    "native": ["--native-markers"],
    "main-only": ["--main-thread-only"],
    "no-tid": ["--no-tid"],
}


@pytest.fixture(scope="module")
def mode_profiles(pystrobe, work, tmp_path_factory):
    """Every run of MODE_RUNS, at the same time, 1 s at 200 Hz, on one
    modes.py: {name: (Strobe, output path)}, and "tids": the workload's
    thread ids."""
    d = tmp_path_factory.mktemp("modes")
    procs = SessionProcesses()
    runs = {}
    modes_proc = start_modes(work)
    try:
        for name, opts in MODE_RUNS.items():
            runs[name] = Strobe(procs, pystrobe,
                                ["attach", "-r", "200hz", "-d", "1", "--collapsed",
                                 "-o", d / f"{name}.txt", *opts, modes_proc.pid],
                                d, d / "logs", name)
        for s in runs.values():
            s.wait()
    finally:
        procs.close()
        modes_proc.close()
    profiles = {name: (s, d / f"{name}.txt") for name, s in runs.items()}
    profiles["tids"] = modes_proc.tids
    return profiles


def mode_stacks(mode_profiles, name):
    s, out = mode_profiles[name]
    assert s.proc.returncode == EXIT_OK, s.describe()
    parse_summary(s)
    return load_collapsed(out)


def functions_by_tid(stacks):
    by_tid = {}
    for st in stacks:
        by_tid.setdefault(st.tid, set()).update(st.names)
    return by_tid


def only_thread(stacks, tids, worker):
    """Every stack is the worker thread's, inside its function."""
    for st in stacks:
        assert st.tid == tids[worker], \
            f"a stack of thread {st.tid}, expected only {worker} ({tids[worker]}): {st.names}"
        assert worker in st.names, st.names
    names = set().union(*(st.names for st in stacks))
    for other in set(WORKERS) - {worker}:
        assert other not in names, f"{other} in {sorted(names)}"


def test_mode_cpu_only_running_thread(mode_profiles):
    only_thread(mode_stacks(mode_profiles, "cpu"), mode_profiles["tids"], "spin")


def test_mode_gil_only_holder(mode_profiles):
    only_thread(mode_stacks(mode_profiles, "gil"), mode_profiles["tids"], "spin")


def test_mode_exception_only_handler(mode_profiles):
    only_thread(mode_stacks(mode_profiles, "exception"), mode_profiles["tids"], "handler")


@pytest.mark.parametrize("name", ["wall", "default"])
def test_mode_wall_every_thread(mode_profiles, name):
    """Wall mode (also the default, and with -a) samples every thread, each
    in its own function, and no <native> markers without --native."""
    stacks = mode_stacks(mode_profiles, name)
    tids = mode_profiles["tids"]
    by_tid = functions_by_tid(stacks)
    want = {tids[w] for w in WORKERS + ("main",)}
    assert set(by_tid) == want, f"threads {sorted(by_tid)}, expected {sorted(want)}"
    for w in WORKERS + ("main",):
        assert w in by_tid[tids[w]], f"{w} not in thread {tids[w]}'s {by_tid[tids[w]]}"
    assert "nap" in by_tid[tids["via_c"]]
    for st in stacks:
        assert "<native>" not in st.names, f"<native> without --native: {st.names}"
    # Each thread is sampled about as often as the others (all are, each time).
    counts = {}
    for st in stacks:
        counts[st.tid] = counts.get(st.tid, 0) + st.count
    assert max(counts.values()) <= 1.2 * min(counts.values()) + 5, counts


def test_native_marker_between_python_frames(mode_profiles, work):
    """--native-markers: via_c() calls nap() through map(), a C function. Before
    3.11 frames do not say where C code called back into Python (docs/cli.md):
    only the bottom-of-thread marker exists there."""
    if work.target.version < (3, 11):
        pytest.skip("<native> between Python frames needs CPython 3.11+")
    stacks = mode_stacks(mode_profiles, "native")
    tids = mode_profiles["tids"]
    via_c = [st for st in stacks if st.tid == tids["via_c"]]
    assert via_c, "no stacks of the via_c thread"
    for st in via_c:
        n = st.names
        i = n.index("via_c")
        assert n[i:i + 3] == ["via_c", "<native>", "nap"], n
    # No marker where no C code sits between Python frames.
    for st in stacks:
        if st.tid in (tids["sleeper"], tids["spin"]):
            leafward = st.names[st.names.index(
                "sleeper" if st.tid == tids["sleeper"] else "spin"):]
            assert "<native>" not in leafward, st.names


def test_main_thread_only(mode_profiles):
    stacks = mode_stacks(mode_profiles, "main-only")
    assert {st.tid for st in stacks} == {mode_profiles["tids"]["main"]}, \
        {st.tid for st in stacks}
    for st in stacks:
        assert "main" in st.names and not set(WORKERS) & set(st.names), st.names


def test_no_tid(mode_profiles):
    stacks = mode_stacks(mode_profiles, "no-tid")
    assert all(st.tid is None for st in stacks), "tid root with --no-tid"
    names = set().union(*(st.names for st in stacks))
    assert set(WORKERS) <= names, names


# --- the ways to start ---------------------------------------------------------

def test_run_module(work, strobes, tmp_path):
    """`run -m pkgdemo` (through `--` and chroot in the sid root); flame graph."""
    out = tmp_path / "pkg.html"
    s = strobes(["run", "--flamegraph", "-o", out, *work.python_run_args(),
                 "-m", "pkgdemo", "0.6"], env={"PYTHONPATH": work.target_dir})
    summary = s.check()
    assert summary["samples"] > 0, summary
    assert_wrote(s, summary, out)
    check_flamegraph(out, ["crunch", "pkgdemo"])


def test_run_exec_script(work, strobes, tmp_path):
    """`run -- exec_python.sh PYTHON script`: pystrobe follows the exec."""
    out = tmp_path / "exec.txt"
    s = strobes(["run", "--collapsed", "-o", out, *work.shell_run_args("exec_python.sh"),
                 work.path("split_3_1.py"), "0.6"])
    summary = s.check()
    assert_wrote(s, summary, out)
    names = set().union(*(st.names for st in load_collapsed(out)))
    assert {"alpha", "beta", "main", "<module>"} <= names, names


def test_run_spawning_script(work, strobes, tmp_path):
    """`run -- spawn_python.sh PYTHON script`: pystrobe finds the child; the
    default collapsed file is named after it (the Python process), not after
    the shell."""
    s = strobes(["run", "--collapsed", *work.shell_run_args("spawn_python.sh"),
                 work.path("split_3_1.py"), "0.6", "--report",
                 work.path("spawn.report.json")])
    summary = s.check()
    assert "spawn_python.sh: python exited with status 0" in s.stderr, s.describe()
    pid = read_report(work.host("spawn.report.json"))["pid"]
    out = tmp_path / f"collapsed_{pid}.txt"
    assert out.is_file(), f"no {out.name} in {sorted(os.listdir(tmp_path))}\n{s.describe()}"
    assert_wrote(s, summary, out)
    stacks = load_collapsed(out)
    assert {st.tid for st in stacks} == {pid}, {st.tid for st in stacks}
    names = set().union(*(st.names for st in stacks))
    assert {"alpha", "beta"} <= names, names


def test_run_passes_exit_status(work, strobes, tmp_path):
    out = tmp_path / "exit.pstats"
    s = strobes(["run", "-o", out, *work.python_run_args(), work.path("split_3_1.py"),
                 "0.5", "--exit-status", "3"])
    summary = s.check(status=3)
    assert_wrote(s, summary, out)
    pstats_by_name(load_pstats(out), "alpha")


def test_run_duration_ends_child(work, strobes, tmp_path):
    """`run -d 1` on a script that would run a minute: the child is
    terminated, pystrobe exits 0, the profile is complete."""
    out = tmp_path / "d.pstats"
    s = strobes(["run", "-d", "1", "-o", out, *work.python_run_args(),
                 work.path("modes.py"), "60"])
    summary = s.check(timeout=20)
    assert s.elapsed < 10, f"run -d 1 took {s.elapsed:.1f} s"
    left = wait_session_empty(s.pid, 5)
    assert not left, f"processes left after run -d: {left}"
    assert_wrote(s, summary, out)
    # The program's own frames are in it; not necessarily spin(): on a
    # loaded machine the child may spend the whole second importing.
    funcs = load_pstats(out)
    assert any(Path(k[0]).name == "modes.py" for k in funcs), sorted(funcs)


def test_run_python3_from_path(pystrobe, strobes, tmp_path):
    """Without --python, `run` runs the first python3 on PATH."""
    host = [t for t in supported_targets() if t.chroot is None]
    if not host:
        pytest.fail("no host (pyenv) interpreter pystrobe supports is installed")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    newest = max(host, key=lambda t: t.version)
    (bindir / "python3").symlink_to(newest.argv[0])
    out = tmp_path / "path.pstats"
    s = strobes(["run", "-o", out, WORKLOADS / "split_3_1.py", "1"],
                env={"PATH": f"{bindir}:{os.environ.get('PATH', '')}"})
    summary = s.check()
    assert_wrote(s, summary, out)
    a = pstats_by_name(load_pstats(out), "alpha")
    assert a["key"][0] == str(WORKLOADS / "split_3_1.py"), a


# --- ending a run: Ctrl-C, the target exiting ----------------------------------

def attach_all_formats(strobes, tmp_path, pid):
    """Three pystrobe attaches at once: pstats to a file, collapsed and flame
    graph to their default files, each in its own directory; returned once
    each has taken a sample."""
    runs = {}
    for fmt, opts in (("pstats", ["-o", tmp_path / "p" / "out.pstats"]),
                      ("collapsed", ["--collapsed"]), ("flamegraph", ["--flamegraph"])):
        cwd = tmp_path / fmt[0]
        cwd.mkdir(exist_ok=True)
        runs[fmt] = strobes(["attach", *REALTIME, *opts, pid], cwd=cwd)
    for s in runs.values():
        s.wait_samples()
    return runs


def check_all_formats(runs, tmp_path, pid, names):
    for fmt, s in runs.items():
        summary = s.check(timeout=STOP_TIMEOUT)
        assert summary["samples"] > 0, summary
    p = runs["pstats"]
    assert_wrote(p, parse_summary(p), tmp_path / "p" / "out.pstats")
    funcs = load_pstats(tmp_path / "p" / "out.pstats")
    for n in names:
        pstats_by_name(funcs, n)
    c = tmp_path / "c" / f"collapsed_{pid}.txt"
    assert_wrote(runs["collapsed"], parse_summary(runs["collapsed"]), c)
    got = set().union(*(st.names for st in load_collapsed(c)))
    assert set(names) <= got, got
    f = tmp_path / "f" / f"flamegraph_{pid}.html"
    assert_wrote(runs["flamegraph"], parse_summary(runs["flamegraph"]), f)
    check_flamegraph(f, names)


def test_ctrl_c_during_attach(modes_proc, strobes, tmp_path):
    """SIGINT (SIGTERM for the flame graph) to pystrobe only: the profile so
    far is written in each format, exit 0, and the target goes on running."""
    runs = attach_all_formats(strobes, tmp_path, modes_proc.pid)
    for fmt, s in runs.items():
        assert s.proc.poll() is None, f"pystrobe ended early\n{s.describe()}"
        os.kill(s.pid, signal.SIGTERM if fmt == "flamegraph" else signal.SIGINT)
    check_all_formats(runs, tmp_path, modes_proc.pid, ["spin", "sleeper", "handler"])
    assert modes_proc.proc.poll() is None, "the target died with pystrobe's Ctrl-C"


def test_target_exit_during_attach(work, strobes, tmp_path):
    """The target is killed: each pystrobe writes everything and exits 0."""
    target = start_modes(work)
    try:
        runs = attach_all_formats(strobes, tmp_path, target.pid)
        for s in runs.values():
            assert s.proc.poll() is None, f"pystrobe ended early\n{s.describe()}"
        target.proc.kill()
        target.proc.wait()
        check_all_formats(runs, tmp_path, target.pid, ["spin", "sleeper", "handler"])
    finally:
        target.close()


def wait_child_line(s, needle, timeout=30.0):
    """Wait until the child of a `pystrobe run` wrote needle to stdout."""
    deadline = time.monotonic() + timeout
    while needle not in s.stdout:
        if s.proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"the child never printed {needle!r}\n{s.describe()}")
        time.sleep(0.05)


def test_ctrl_c_to_pystrobe_during_run(work, strobes, tmp_path):
    """SIGINT to pystrobe alone during `run`: the run ends as with -d: the
    profile is written, the child terminated, exit 0."""
    out = tmp_path / "c.pstats"
    s = strobes(["run", *REALTIME, "-o", out, *work.python_run_args(), work.path("modes.py"),
                 "60"])
    wait_child_line(s, '"spin"')
    s.wait_samples_from_now()  # of the threads in their states
    s.interrupt()
    summary = s.check(timeout=STOP_TIMEOUT)
    assert_wrote(s, summary, out)
    funcs = load_pstats(out)
    for n in ("spin", "sleeper", "handler", "nap"):
        pstats_by_name(funcs, n)
    left = wait_session_empty(s.pid, 5)
    assert not left, f"processes left after Ctrl-C to pystrobe: {left}"


def test_ctrl_c_to_process_group_during_run(work, strobes, tmp_path):
    """Ctrl-C as a terminal sends it, to the whole process group: the child
    gets it too (modes.py says so and exits 0), pystrobe writes the profile
    and exits 0."""
    out = tmp_path / "g.txt"
    s = strobes(["run", *REALTIME, "--collapsed", "-o", out, *work.python_run_args(),
                 work.path("modes.py"), "60"])
    wait_child_line(s, '"spin"')
    s.wait_samples_from_now()  # of the threads in their states
    members = session_members(s.pid)
    assert len(members) >= 2, f"pystrobe's child is not in its process group: {members}"
    os.killpg(s.pid, signal.SIGINT)
    summary = s.check(timeout=STOP_TIMEOUT)
    assert "modes.py: KeyboardInterrupt" in s.stdout, \
        f"the child did not get Ctrl-C itself\n{s.describe()}"
    assert_wrote(s, summary, out)
    names = set().union(*(st.names for st in load_collapsed(out)))
    assert set(WORKERS) <= names, names


# --- -d, the summary, the pstats table -----------------------------------------

def test_duration_and_summary(split_proc, strobes, tmp_path):
    out = tmp_path / "d.txt"
    s = strobes(["attach", "-d", "1", "-r", "1khz", "--collapsed", "-o", out,
                 split_proc.pid], prefix=AHEAD)
    summary = s.check(timeout=20)
    numbers = f"{summary}, took {s.elapsed:.2f} s"
    assert 0.9 <= s.elapsed < 5, numbers
    assert summary["samples"] > 0, numbers
    assert 0.9 <= summary["seconds"] <= 2.0, numbers
    assert summary["requested"] == 1000, numbers
    # How many samples this machine manages is for bench/, not a test; but
    # every deadline is either sampled or counted as missed.
    assert 0 < summary["rate"] < 1100, numbers
    due = summary["requested"] * summary["seconds"]
    assert abs(summary["samples"] + summary["missed"] - due) <= 0.05 * due + 2, numbers
    assert abs(summary["rate"] * summary["seconds"] - summary["samples"]) \
        <= 0.1 * summary["samples"] + 2, numbers
    assert summary["failed"] <= 0.1 * summary["samples"], numbers
    # The percentage of all samples, whether or not "captured" counts the
    # failed ones.
    pcts = [100 * summary["failed"] / max(1, summary["samples"] + extra)
            for extra in (0, summary["failed"])]
    assert any(abs(summary["failed_pct"] - p) < 0.02 for p in pcts), numbers
    # One thread: one stack per successful sample.
    counted = sum(st.count for st in load_collapsed(out))
    assert summary["samples"] - summary["failed"] <= counted <= summary["samples"], \
        f"the stacks count {counted} samples; {numbers}"


TABLE_ROW = re.compile(r"^\s*(\d+)/(\d+)\s.*\s(\S+):(\d+)\((.+)\)\s*$")


def table_rows(strobe):
    lines = strobe.stdout.splitlines()
    rows = [TABLE_ROW.match(l) for l in lines]
    rows = [(int(m.group(1)), int(m.group(2)), m.group(5)) for m in rows if m]
    assert any("nsamples" in l for l in lines), \
        f"no header line naming nsamples\n{strobe.describe()}"
    return rows


def test_pstats_table(split_proc, strobes):
    """The table on stdout: sorted by direct samples, at most -l rows."""
    limited = strobes(["attach", "-d", "0.7", "-l", "2", split_proc.pid])
    full = strobes(["attach", "-d", "0.7", split_proc.pid])
    limited.check()
    full.check()
    rows = table_rows(limited)
    assert [r[2] for r in rows] == ["alpha", "beta"], f"{rows}\n{limited.describe()}"
    assert rows[0][0] > rows[1][0] > 0
    rows = table_rows(full)
    names = [r[2] for r in rows]
    assert 2 < len(rows) <= 15 and {"alpha", "beta", "main", "<module>"} <= set(names), \
        f"{rows}\n{full.describe()}"
    direct = [r[0] for r in rows]
    assert direct == sorted(direct, reverse=True), rows
    for d, c, n in rows:
        assert d <= c, rows


# --- sampling rate syntax, errors ----------------------------------------------

@pytest.fixture(scope="module")
def any_python():
    """One sleeping Python process of the first supported target."""
    t = supported_targets()[0]
    procs = SessionProcesses()
    p = procs.start(t.argv + ["-c", "import time; print('ready', flush=True); time.sleep(600)"],
                    stdout=subprocess.PIPE)
    try:
        wait_ready(p)
        yield p
    finally:
        procs.close()


def test_sampling_rate_syntax(any_python, strobes):
    runs = {want: strobes(["attach", "-r", arg, "-d", "0.3", any_python.pid])
            for arg, want in (("250hz", 250), ("2k", 2000), ("3000", 3000),
                              ("1khz", 1000))}
    for want, s in runs.items():
        summary = s.check()
        assert summary["requested"] == want, summary


def test_bad_sampling_rate(pystrobe, any_python):
    res = run_pystrobe(pystrobe, "attach", "-r", "fast", "-d", "0.3", any_python.pid,
                       timeout=30)
    assert res.returncode == EXIT_USAGE, res


def test_attach_no_such_process(pystrobe):
    p = subprocess.Popen(["/bin/true"])
    p.wait()
    assert not os.path.exists(f"/proc/{p.pid}")
    res = run_pystrobe(pystrobe, "attach", "-d", "1", p.pid, timeout=30)
    err = res.stderr.decode(errors="replace")
    assert res.returncode == EXIT_NO_PROCESS, f"{res.returncode}: {err}"
    assert err.startswith("pystrobe: ") and str(p.pid) in err, err


def test_attach_not_python(pystrobe, spawn):
    p = spawn(["/usr/bin/sleep", "60"])
    res = run_pystrobe(pystrobe, "attach", "-d", "1", p.pid, timeout=30)
    err = res.stderr.decode(errors="replace")
    assert res.returncode == EXIT_NOT_PYTHON, f"{res.returncode}: {err}"
    assert err.startswith("pystrobe: ") and "/usr/bin/sleep" in err, err


OLD_SLEEPER = ("import sys, time; sys.stdout.write('ready\\n'); sys.stdout.flush(); "
               "time.sleep(60)")


def unsupported_pythons():
    """The host interpreters pystrobe refuses: Python 3 before 3.7 (3.6),
    Python 2.7."""
    old = [t for t in unsupported_targets() if t.chroot is None]
    py2 = python2_target()
    if not old or py2 is None:
        pytest.fail("pyenv 3.6 or 2.7 not installed (scripts/install-deps.sh)")
    return [max(old, key=lambda t: t.version), py2]


def an_unsupported_python():
    """The newest host interpreter pystrobe refuses."""
    return unsupported_pythons()[0]


def refusal_says_why(err, old):
    """One line: the version found, why it is refused, what is supported."""
    assert "Python %d.%d." % old.version in err, err
    assert "no _PyRuntime" in err and "supported: 3.7 to 3.15" in err, err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("which", [0, 1], ids=["3.6", "2.7"])
def test_attach_unsupported(pystrobe, python_sleeper, which):
    old = unsupported_pythons()[which]
    p, _ = python_sleeper(old, OLD_SLEEPER)
    res = run_pystrobe(pystrobe, "attach", "-d", "1", p.pid, timeout=30)
    err = res.stderr.decode(errors="replace")
    assert res.returncode == EXIT_UNSUPPORTED, f"{res.returncode}: {err}"
    refusal_says_why(err, old)


def test_run_unsupported(strobes, tmp_path):
    """`run --python` an interpreter pystrobe does not support: 6, and the
    child is not left running."""
    old = an_unsupported_python()
    script = tmp_path / "old.py"
    script.write_text(OLD_SLEEPER + "\n")
    s = strobes(["run", "--python", old.argv[0], script])
    s.wait(timeout=20)
    assert s.proc.returncode == EXIT_UNSUPPORTED, s.describe()
    refusal_says_why(s.stderr, old)
    left = wait_session_empty(s.pid, 5)
    assert not left, f"processes left after the refused run: {left}"
