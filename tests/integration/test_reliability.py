"""Bad situations in `pystrobe run` and `pystrobe attach` get a clear answer
and lose nothing (docs/cli.md: "Ending", "Output files", exit statuses):

- the output is checked before sampling (and before `run` starts the
  command); a write that still fails at the end goes to a fallback file;
- SIGHUP ends sampling like SIGINT; the command never outlives pystrobe
  (a second signal, or SIGKILL of pystrobe itself) unless --detach; the stop
  sequence is one SIGTERM, then SIGKILL;
- a profile without samples writes no file and says why; tiny durations
  end; new files honour the umask and replaced files keep their mode;
  unknown options are named in pystrobe's words.

Each runs on pyenv's 3.12 and, where the target's version could matter
(what is sampled and found), also on the sid root's 3.15.
"""
import os
import re
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

import recording_format
from conftest import run_pystrobe, wait_session_empty
from targets import python2_target, supported_targets
from test_sampling import (REALTIME, assert_wrote, check_flamegraph, load_collapsed, load_pstats,
                           parse_summary, strobes)  # noqa: F401 (strobes is a fixture)

EXIT_OK, EXIT_USAGE, EXIT_ERROR, EXIT_NO_SAMPLES, EXIT_FALLBACK, EXIT_ABORT = 0, 2, 8, 9, 10, 130
WAIT = 30.0      # generous bound for anything that should happen "soon"

# The target of `run`: writes its pid to argv[1] once running, then works
# forever. Flags in argv[2]: "ignore-int" ignores SIGINT; "count-term"
# appends a line to argv[1] + ".term" for each SIGTERM and goes on.
LOOPER = """\
import os, signal, sys, time
flags = sys.argv[2] if len(sys.argv) > 2 else ""
if "ignore-int" in flags:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
if "count-term" in flags:
    def on_term(sig, frame):
        with open(sys.argv[1] + ".term", "a") as f:
            f.write("TERM\\n")
    signal.signal(signal.SIGTERM, on_term)
def work():
    n = 0
    for i in range(20000):
        n += i
    return n
with open(sys.argv[1] + ".new", "w") as f:
    f.write(str(os.getpid()))
os.rename(sys.argv[1] + ".new", sys.argv[1])
while True:
    work()
    time.sleep(0.001)
"""


def find_target(name):
    for t in supported_targets():
        if t.name == name:
            return t
    pytest.fail(f"interpreter {name} is not installed (scripts/install-deps.sh)")


T312, T315 = "pyenv-3.12.1", "sid-3.15"


class Looper:
    """LOOPER staged where target sees it: run_args() for `pystrobe run`,
    pid() once it runs."""

    def __init__(self, target):
        self.target = target
        self.host_dir, self.target_dir = target.stage_dir()
        (self.host_dir / "looper.py").write_text(LOOPER)
        self.pid_host = self.host_dir / "pid"
        self.proc = None

    def run_args(self, *flags, shell=False):
        """`pystrobe run` arguments; shell: run by a shell script that is
        not Python itself (sh -c, which waits for it)."""
        script = [f"{self.target_dir}/looper.py", f"{self.target_dir}/pid", ",".join(flags)]
        if shell:
            cmd = " ".join([*self.target.argv, *script]) + "; exit $?"
            return ["--", "/bin/sh", "-c", cmd]
        if self.target.chroot is None:
            return ["--python", self.target.argv[0], *script]
        return ["--", *self.target.argv, *script]

    def pid(self, strobe):
        """The pid of the looper strobe (a Strobe, or a Popen) runs."""
        proc = getattr(strobe, "proc", strobe)
        deadline = time.monotonic() + WAIT
        while not self.pid_host.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                what = strobe.describe() if proc is not strobe else proc.args
                pytest.fail(f"the looper never started\n{what}")
            time.sleep(0.05)
        return int(self.pid_host.read_text())

    def start(self):
        """Run the looper without pystrobe; its pid once it runs."""
        self.proc = self.target.popen(self.run_args()[-3:], stdin=subprocess.DEVNULL)
        return self.pid(self.proc)

    def terms(self):
        p = Path(f"{self.pid_host}.term")
        return p.read_text().splitlines() if p.exists() else []

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.host_dir, ignore_errors=True)


@pytest.fixture
def looper(request):
    lp = Looper(find_target(request.param))
    yield lp
    lp.close()


def alive(pid):
    """The process runs (exists and is not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return False


def wait_gone(pid, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def wait_stderr(strobe, needle, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while needle not in strobe.stderr:
        if strobe.proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"pystrobe never said {needle!r}\n{strobe.describe()}")
        time.sleep(0.05)


@pytest.fixture
def sleeper312(python_sleeper):
    p, _ = python_sleeper(find_target(T312))
    return p


# --- 4. the output path ------------------------------------------------------------

@pytest.mark.parametrize("looper", [T312], indirect=True)
def test_unwritable_output_fails_before_sampling(strobes, sleeper312, looper, tmp_path):
    """`attach -d 60 -o /no/such/dir/...` ends at once with 8, before a
    sample; `run` does not even start the command."""
    bad = tmp_path / "no" / "such" / "dir" / "p.pstats"
    a = strobes(["attach", "-d", "60", "-o", bad, sleeper312.pid])
    r = strobes(["run", "-o", bad, *looper.run_args()])
    for s in (a, r):
        s.wait(timeout=WAIT)
        assert s.proc.returncode == EXIT_ERROR, s.describe()
        first = s.stderr.splitlines()[0]
        assert first == f"pystrobe: cannot write to {bad}: No such file or directory", \
            s.describe()
        assert "Captured" not in s.stderr, s.describe()
    time.sleep(0.3)
    assert not looper.pid_host.exists(), "run started the command anyway"


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KiB tmpfs with no space left: its path."""
    d = tmp_path / "full"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(d)], check=True)
    try:
        fd = os.open(d / "fill", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while os.write(fd, b"\0" * 4096) > 0:
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)


FALLBACK = re.compile(r"^pystrobe: wrote (.+) to (\S+) instead$", re.M)


def test_full_disk_falls_back(strobes, sleeper312, full_disk, tmp_path):
    """On a full disk each format names the cause (the flame graph said
    "I/O error") and writes the profile to a fallback file in $TMPDIR
    instead: exit 10; nothing is left on the full disk."""
    spare = tmp_path / "spare"
    spare.mkdir()
    runs = {fmt: strobes(["attach", "-d", "0.5", f"--{fmt}", "-o", full_disk / f"p.{fmt}",
                          sleeper312.pid], env={"TMPDIR": str(spare)})
            for fmt in ("flamegraph", "pstats", "collapsed")}
    for fmt, s in runs.items():
        s.wait(timeout=WAIT)
        assert s.proc.returncode == EXIT_FALLBACK, s.describe()
        assert f"pystrobe: writing {full_disk}/p.{fmt} failed: No space left on device" \
            in s.stderr, s.describe()
        m = FALLBACK.search(s.stderr)
        assert m, s.describe()
        path = Path(m.group(2))
        assert path.parent == spare and f"_{sleeper312.pid}_" in path.name, path
        if fmt == "flamegraph":
            check_flamegraph(path, [f"pid {sleeper312.pid}"])  # in the title
        elif fmt == "pstats":
            load_pstats(path)
        else:
            load_collapsed(path)
    assert sorted(os.listdir(full_disk)) == ["fill"], os.listdir(full_disk)


def test_output_directory_removed_meanwhile(strobes, sleeper312, tmp_path):
    """The output's directory goes away during sampling: the profile goes
    to the fallback file, exit 10."""
    d = tmp_path / "out"
    d.mkdir()
    spare = tmp_path / "spare"
    spare.mkdir()
    s = strobes(["attach", *REALTIME, "-o", d / "p.pstats", sleeper312.pid],
                env={"TMPDIR": str(spare)})
    s.wait_samples()
    shutil.rmtree(d)
    s.interrupt()
    s.wait(timeout=WAIT)
    assert s.proc.returncode == EXIT_FALLBACK, s.describe()
    m = FALLBACK.search(s.stderr)
    assert m and Path(m.group(2)).parent == spare, s.describe()
    load_pstats(m.group(2))


# --- 5. signals under run ------------------------------------------------------------

@pytest.mark.parametrize("looper", [T312, T315], indirect=True)
def test_sighup_ends_run_and_writes(strobes, looper, tmp_path):
    """SIGHUP to pystrobe: the profile is written, exit 0, the command is
    ended (SIGTERM), nothing is left running."""
    out, rec = tmp_path / "hup.pstats", tmp_path / "hup.pysr"
    s = strobes(["run", *REALTIME, "-o", out, "--record", rec, *looper.run_args()])
    pid = looper.pid(s)
    # Samples of the loop: work() is about half of its time.
    s.wait_samples(s.wait_samples(s.samples_so_far()) + 100)
    os.kill(s.pid, signal.SIGHUP)
    summary = s.check(timeout=WAIT)
    assert_wrote(s, summary, out)
    assert any(k[2] == "work" for k in load_pstats(out)), "no work() in the profile"
    # The recording beside it is finished too.
    assert recording_format.read(rec)["complete"], s.describe()
    assert wait_gone(pid), f"the command {pid} outlived pystrobe"
    assert not wait_session_empty(s.pid, 5)


@pytest.mark.parametrize("looper", [T312], indirect=True)
def test_second_ctrl_c_kills_command(strobes, looper, tmp_path):
    """A shell running a Python that ignores SIGINT, and two Ctrl-C to
    pystrobe: the second aborts (130) while pystrobe waits for the command,
    and kills the Python process too (the kernel's PR_SET_PDEATHSIG reaches
    only the shell). The Python survives SIGTERM too, so that the wait lasts
    4 s."""
    s = strobes(["run", *REALTIME, "-o", tmp_path / "c.pstats",
                 *looper.run_args("ignore-int", "count-term", shell=True)])
    pid = looper.pid(s)
    s.wait_samples()  # so that there is a profile to write
    s.interrupt()
    wait_stderr(s, "Wrote pstats")  # now in the 2 s it gives the command
    s.interrupt()
    s.wait(timeout=WAIT)
    assert s.proc.returncode == EXIT_ABORT, s.describe()
    assert wait_gone(pid), f"the command {pid} outlived pystrobe's abort"


@pytest.mark.parametrize("looper", [T312], indirect=True)
def test_sigkill_of_pystrobe_kills_command(strobes, looper, tmp_path):
    """Even SIGKILL of pystrobe does not leave the command running, and
    leaves no temporary output file."""
    s = strobes(["run", "-o", tmp_path / "k.pstats", *looper.run_args()])
    pid = looper.pid(s)
    os.kill(s.pid, signal.SIGKILL)
    s.wait(timeout=WAIT)
    assert wait_gone(pid), f"the command {pid} outlived pystrobe's SIGKILL"
    assert not list(tmp_path.glob("k.pstats*")), list(tmp_path.glob("k.pstats*"))


@pytest.mark.parametrize("looper", [T312], indirect=True)
def test_stop_is_one_sigterm_then_sigkill(strobes, looper, tmp_path):
    """`run -d` on a command that survives SIGTERM: it gets one SIGTERM,
    then SIGKILL (docs/cli.md), and pystrobe exits 0 with the profile."""
    out = tmp_path / "t.pstats"
    s = strobes(["run", "-d", "1", "-o", out, *looper.run_args("count-term")])
    pid = looper.pid(s)
    summary = s.check(timeout=WAIT)
    assert_wrote(s, summary, out)
    assert not alive(pid)
    assert looper.terms() == ["TERM"], looper.terms()


@pytest.mark.parametrize("looper", [T312], indirect=True)
def test_detach_leaves_command_running(strobes, looper, tmp_path):
    """`run --detach -d 1`: the profile is written, the command goes on."""
    out = tmp_path / "d.pstats"
    s = strobes(["run", "--detach", "-d", "1", "-o", out, *looper.run_args()])
    pid = looper.pid(s)
    summary = s.check(timeout=WAIT)
    assert_wrote(s, summary, out)
    assert f"process {pid} left running" in s.stderr, s.describe()
    time.sleep(0.5)
    assert alive(pid), "the --detach command was ended"
    os.kill(pid, signal.SIGKILL)


# --- 6. small things ----------------------------------------------------------------

def test_tiny_duration_ends(strobes, sleeper312, tmp_path):
    """-d below a nanosecond is one nanosecond, not "forever": no sample,
    exit 9, no file."""
    s = strobes(["attach", "-d", "1e-10", "-o", tmp_path / "t.pstats", sleeper312.pid])
    s.wait(timeout=WAIT)
    assert s.proc.returncode == EXIT_NO_SAMPLES, s.describe()
    assert "pystrobe: no sample was taken: nothing written" in s.stderr, s.describe()
    assert not list(tmp_path.glob("t.pstats*"))


@pytest.mark.parametrize("looper", [T312, T315], indirect=True)
def test_mode_matching_nothing_writes_nothing(strobes, looper, tmp_path):
    """--mode exception on a program that raises nothing (once it runs: its
    start-up imports do): exit 9, the reason in plain words, no file (an
    empty pstats file does not load), and a file already at the path is left
    as it was."""
    out, rec = tmp_path / "e.pstats", tmp_path / "e.pysr"
    out.write_text("before")
    rec.write_text("recording before")
    s = strobes(["attach", "-d", "1", "--mode", "exception", "-o", out, "--record", rec,
                 looper.start()])
    s.wait(timeout=WAIT)
    assert s.proc.returncode == EXIT_NO_SAMPLES, s.describe()
    summary = parse_summary(s)
    assert not summary["wrote"], s.describe()
    m = re.search(r"^pystrobe: no thread matched --mode exception in (\d+) samples: "
                  r"nothing written$", s.stderr, re.M)
    assert m and 0 < int(m.group(1)) <= summary["samples"], s.describe()
    assert f"pystrobe: no thread stack recorded: {rec} not written" in s.stderr, s.describe()
    assert out.read_text() == "before"
    assert rec.read_text() == "recording before"
    assert sorted(os.listdir(tmp_path)) == ["e.pstats", "e.pysr", "logs"], os.listdir(tmp_path)


# Every format's option and the name of its output (a directory for the
# heatmap): what test_failed_start_destroys_nothing puts there first.
FORMAT_OUTPUTS = {"pstats": "p.pstats", "collapsed": "c.txt", "flamegraph": "f.html",
                  "speedscope": "s.json", "pprof": "p.pb.gz", "heatmap": "heat",
                  "jsonl": "j.jsonl", "gecko": "g.json", "svg": "f.svg",
                  "chrometrace": "t.json"}


def test_failed_start_destroys_nothing(strobes, tmp_path):
    """`run` whose command never becomes a Python pystrobe samples (no such
    program, a program that is not Python, Python 2.7): the output of every
    format, and the recording beside it, are left as they were, and no
    temporary file is left behind."""
    commands = [["/no/such/program"], ["/bin/true"]]
    py2 = python2_target()
    if py2:
        commands.append([*py2.argv, "-c", "import time; time.sleep(30)"])
    for cmd in commands:
        runs = {}
        for fmt, name in FORMAT_OUTPUTS.items():
            d = tmp_path / f"{fmt}-{len(runs)}-{os.path.basename(cmd[0])}"
            d.mkdir()
            out, rec = d / name, d / "r.pysr"
            if fmt == "heatmap":
                out.mkdir()
                (out / "index.html").write_text("heatmap before")
            else:
                out.write_text(f"{fmt} before")
            rec.write_text("recording before")
            runs[fmt] = (d, strobes(["run", f"--{fmt}", "-o", out, "--record", rec, "--", *cmd]))
        for fmt, (d, s) in runs.items():
            s.wait(timeout=WAIT)
            assert s.proc.returncode not in (EXIT_OK, EXIT_NO_SAMPLES), s.describe()
            out = d / FORMAT_OUTPUTS[fmt]
            if fmt == "heatmap":
                assert os.listdir(out) == ["index.html"], os.listdir(out)
                out = out / "index.html"
            assert out.read_text().endswith(" before"), (fmt, cmd, s.describe())
            assert (d / "r.pysr").read_text() == "recording before", (fmt, cmd, s.describe())
            assert sorted(os.listdir(d)) == sorted([FORMAT_OUTPUTS[fmt], "r.pysr"]), \
                os.listdir(d)


def test_output_file_modes(strobes, sleeper312, tmp_path):
    """A new file gets 0666 less the umask; a replaced file keeps its mode."""
    old = tmp_path / "old.txt"
    old.write_text("old\n")
    old.chmod(0o640)
    umask = ["sh", "-c", 'umask 077 && exec "$0" "$@"']
    runs = [strobes(["attach", "-d", "0.3", "--collapsed", "-o", p, sleeper312.pid],
                    prefix=umask)
            for p in (tmp_path / "new.txt", old)]
    for s in runs:
        s.check(timeout=WAIT)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o600
    assert stat.S_IMODE(old.stat().st_mode) == 0o640
    load_collapsed(old)


@pytest.mark.parametrize("args", [["run", "--x", "a.py"], ["attach", "--x=1", "1"],
                                  ["attach", "-Z", "1"], ["dump", "--x", "1"]],
                         ids=["run", "attach", "attach-short", "dump"])
def test_unknown_option(pystrobe, args):
    res = run_pystrobe(pystrobe, *args, timeout=WAIT)
    err = res.stderr.decode(errors="replace")
    opt = args[1].split("=")[0]
    assert res.returncode == EXIT_USAGE, err
    assert err.splitlines()[0] == f"pystrobe: unknown option '{opt}'", err


def test_sidroot_mount_keeps_host_dev():
    """scripts/sidroot.sh mount gives the sid root a /dev of its own, with its
    device nodes: a run killed while it is mounted leaves it behind, and
    removing the tree then (rm -rf) must not delete the host's device nodes
    through it, as it did through a bind mount of /dev."""
    from targets import ROOT, SIDROOT
    if not (SIDROOT / "usr" / "bin" / "python3.15").exists():
        pytest.fail("the sid root is missing (make sidroot)", pytrace=False)
    sidroot_sh = ROOT / "scripts" / "sidroot.sh"
    mounted_here = not os.path.ismount(SIDROOT / "dev")
    if mounted_here:
        subprocess.run([str(sidroot_sh), "mount"], check=True)
    marker = SIDROOT / "dev" / f"pystrobe-test-{os.getpid()}"
    try:
        assert os.path.ismount(SIDROOT / "dev")
        assert stat.S_ISCHR(os.stat(SIDROOT / "dev" / "null").st_mode)
        marker.write_text("x")
        assert not (Path("/dev") / marker.name).exists()
    finally:
        marker.unlink(missing_ok=True)
        if mounted_here:
            subprocess.run([str(sidroot_sh), "umount"])
