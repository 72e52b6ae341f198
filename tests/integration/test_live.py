"""The live view, `pystrobe run|attach --live`, driven through tmux.

Each test starts pystrobe in a detached tmux session of a known size (its
own tmux server, on a socket in a temporary directory), types keys into it
(send-keys) and reads the screen (capture-pane). The target is
split_3_1.py, whose alpha() takes three times the time of beta().

A frozen terminal is a pseudo-terminal nobody reads whose buffer the test
has filled: the view's next write blocks, and sampling must go on.

Bounds are generous: the machine is a busy 2-core one, and the suite also
runs under ASan+UBSan.
"""
import fcntl
import os
import pty
import re
import select
import shlex
import shutil
import signal
import struct
import subprocess
import tempfile
import termios
import threading
import time
from pathlib import Path

import pytest

from conftest import consumer_only_once, pystrobe_path
from targets import feature_targets, supported_targets

WORKLOADS = Path(__file__).resolve().parent / "workloads"
SCREEN_TIMEOUT = 60.0   # seconds for the screen to show what is awaited
ROW = re.compile(r"^\s*(\d+)\s+[\d.]+\s+(\d+)\s")
SAMPLES = re.compile(r"samples (\d+) \(run (\d+)\)")

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux missing")


def _key_target():
    """The interpreter the key tests run on: a pyenv 3.12 if there, else the
    newest supported one."""
    ts = supported_targets()
    for t in ts:
        if t.name.startswith("pyenv-3.12"):
            return t
    return ts[-1] if ts else None


def stage_split(target, tmp_path):
    """split_3_1.py where the target sees it, and the `run` arguments that
    run the target's interpreter on what follows."""
    if target.chroot is None:
        return str(WORKLOADS / "split_3_1.py"), ["--python", target.argv[0]]
    return target.stage(WORKLOADS / "split_3_1.py"), ["--", *target.argv]


class Pane:
    """A tmux session of its own server running one shell command, which
    afterwards reports its exit status and the terminal's modes."""

    def __init__(self, cmd, width=120, height=40):
        consumer_only_once()
        self.dir = tempfile.mkdtemp(prefix="pystrobe-live-")
        self.sock = os.path.join(self.dir, "tmux.sock")
        # The shell outlives a Ctrl-C typed for pystrobe (a trapped signal
        # is not inherited as ignored).
        shell = (f"trap : INT; {cmd}; echo LIVE-EXIT=$?; stty -a | tr '\\n' ' '; echo; "
                 f"echo STTY-DONE; sleep 600")
        # The command runs in the pane's own directory: whatever it writes
        # by default lands there.
        self.tmux("new-session", "-d", "-s", "live", "-x", str(width), "-y", str(height),
                  "-c", self.dir, "sh", "-c", shell)
        # The window follows its size, not a client's (there is none).
        self.tmux("set-option", "-t", "live", "window-size", "manual", check=False)

    def tmux(self, *args, check=True):
        return subprocess.run(["tmux", "-S", self.sock, "-f", "/dev/null", *args],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              check=check, timeout=30)

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", "live").stdout

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "live", *keys)

    def resize(self, w, h):
        self.tmux("resize-window", "-t", "live", "-x", str(w), "-y", str(h))

    def flags(self):
        """(cursor visible, alternate screen on) of the pane."""
        out = self.tmux("display-message", "-p", "-t", "live",
                        "#{cursor_flag} #{alternate_on}").stdout.split()
        return out[0] == "1", out[1] == "1"

    def wait(self, pred, what, timeout=SCREEN_TIMEOUT):
        """The screen once pred(screen) is true; fails after timeout."""
        end = time.monotonic() + timeout
        s = self.screen()
        while not pred(s):
            if time.monotonic() > end:
                raise AssertionError(f"screen never showed {what}:\n{s}")
            time.sleep(0.2)
            s = self.screen()
        return s

    def close(self):
        self.tmux("kill-server", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


def rows(screen):
    """{function name: (position, own, total)} of the table's rows."""
    out = {}
    for i, line in enumerate(screen.splitlines()):
        m = ROW.match(line)
        if not m:
            continue
        for name in ("alpha", "beta", "main"):
            if re.search(rf"\s{name}\s", line + " ") and name not in out:
                out[name] = (i, int(m.group(1)), int(m.group(2)))
    return out


def samples(screen):
    m = SAMPLES.search(screen)
    return int(m.group(1)) if m else -1


def ranked(screen, least=200):
    """alpha above beta, near 3:1, with enough samples to tell."""
    r = rows(screen)
    if "alpha" not in r or "beta" not in r:
        return False
    (pa, a, _), (pb, b, _) = r["alpha"], r["beta"]
    return pa < pb and a + b >= least and b > 0 and 1.8 <= a / b <= 5.0


def restored(pane):
    """The shell after pystrobe: its exit status; the terminal as it was."""
    s = pane.wait(lambda s: "STTY-DONE" in s, "the shell after pystrobe")
    status = int(re.search(r"LIVE-EXIT=(\d+)", s).group(1))
    stty = s[s.index("LIVE-EXIT"):]
    assert re.search(r"(?<![-\w])icanon\b", stty), stty
    assert re.search(r"(?<![-\w])echo\b", stty), stty
    cursor, alternate = pane.flags()
    assert cursor and not alternate, (cursor, alternate)
    return status, s


def live_cmd(target, tmp_path, seconds, *extra):
    script, run_args = stage_split(target, tmp_path)
    argv = [str(pystrobe_path()), "run", "--live", *extra, *run_args, script, str(seconds)]
    return " ".join(shlex.quote(a) for a in argv)


@pytest.fixture
def pane_factory():
    panes = []

    def make(*args, **kw):
        p = Pane(*args, **kw)
        panes.append(p)
        return p
    yield make
    for p in panes:
        p.close()


# The view draws what the sample stream gives it, alike for every version:
# one interpreter of each frame layout.
@pytest.mark.parametrize("target", feature_targets(), ids=repr)
def test_live_ranks_split_and_updates(target, tmp_path, pane_factory, pystrobe):
    """alpha ranks above beta near 3:1 within seconds, the counts keep
    rising, and q ends with status 0 and the terminal as it was."""
    pane = pane_factory(live_cmd(target, tmp_path, 600))
    s = pane.wait(ranked, "alpha above beta at about 3:1")
    first = samples(s)
    assert "thread all" in s and f"Python 3.{target.version[1]}" in s, s
    pane.wait(lambda s: samples(s) > first + 100, "the sample count rising")
    pane.keys("q")
    status, _ = restored(pane)
    assert status == 0


KEY_TARGET = _key_target()


@pytest.fixture
def live_pane(pane_factory, tmp_path, pystrobe):
    if KEY_TARGET is None:
        pytest.skip("no supported interpreter")
    pane = pane_factory(live_cmd(KEY_TARGET, tmp_path, 600))
    pane.wait(ranked, "alpha above beta")
    return pane


def test_live_sort_keys(live_pane):
    """s sorts by total (main, the caller, above alpha), S back by own."""
    p = live_pane
    p.keys("s")
    s = p.wait(lambda s: "sort total" in s and "vtotal" in s
               and {"main", "alpha", "beta"} <= rows(s).keys(), "sort by total")
    r = rows(s)
    assert r["main"][0] < r["alpha"][0] < r["beta"][0], s
    p.keys("S")
    # A redraw may show the header before every row is back.
    s = p.wait(lambda s: "sort own" in s and "vown" in s
               and {"main", "alpha"} <= rows(s).keys(), "sort by own")
    assert rows(s)["alpha"][0] < rows(s)["main"][0], s
    p.keys("q")
    assert restored(p)[0] == 0


def test_live_pause_and_reset(live_pane):
    """p freezes the display while sampling goes on; r starts the counts
    again."""
    p = live_pane
    p.keys("p")
    s = p.wait(lambda s: "[PAUSED]" in s, "the paused tag")
    frozen = samples(s)
    time.sleep(1.5)
    assert samples(p.screen()) == frozen
    p.keys("p")
    s = p.wait(lambda s: "[PAUSED]" not in s and samples(s) > frozen, "the counts again")
    before = samples(s)
    p.keys("r")
    p.wait(lambda s: 0 <= samples(s) < before // 2, "the counts reset")
    p.wait(ranked, "alpha above beta after the reset")
    p.keys("q")
    assert restored(p)[0] == 0


def test_live_refresh_keys(live_pane):
    p = live_pane
    p.wait(lambda s: "refresh 0.5s" in s, "the default refresh")
    p.keys("+")
    p.wait(lambda s: "refresh 0.25s" in s, "a faster refresh")
    p.keys("-", "-")
    p.wait(lambda s: "refresh 1s" in s, "a slower refresh")
    p.keys("q")
    assert restored(p)[0] == 0


def test_live_filter(live_pane):
    """/ filters rows by name; c clears it."""
    p = live_pane
    p.keys("/")
    p.wait(lambda s: "filter: _" in s, "the filter prompt")
    p.keys("b", "e", "t", "a", "Enter")
    s = p.wait(lambda s: "[filter: beta]" in s and "beta" in rows(s), "the filter applied")
    assert "alpha" not in rows(s) and "main" not in rows(s), s
    p.keys("c")
    p.wait(lambda s: "[filter" not in s and "alpha" in rows(s), "the filter cleared")
    p.keys("q")
    assert restored(p)[0] == 0


def test_live_threads(live_pane):
    """t, Right and Left cycle through all threads, then each."""
    p = live_pane
    p.wait(lambda s: "thread all (1)" in s, "all threads")
    p.keys("t")
    s = p.wait(lambda s: re.search(r"thread \d+ \(1/1\)", s), "the one thread")
    assert ranked(s, least=1), s
    p.keys("Right")
    p.wait(lambda s: "thread all (1)" in s, "all threads again")
    p.keys("Left")
    p.wait(lambda s: re.search(r"thread \d+ \(1/1\)", s), "the one thread again")
    p.keys("q")
    assert restored(p)[0] == 0


def test_live_threads_each(pane_factory, pystrobe):
    """Four threads (the main one asleep in main(), three in ticker()):
    cycling through them shows each one's own functions only."""
    if KEY_TARGET is None or KEY_TARGET.chroot is not None:
        pytest.skip("no pyenv interpreter")
    argv = [str(pystrobe), "run", "--live", "--python", KEY_TARGET.argv[0],
            str(WORKLOADS / "tickers.py"), "3"]
    p = pane_factory(" ".join(shlex.quote(a) for a in argv))
    main, ticker = re.compile(r"\smain\s"), re.compile(r"\sticker\s")
    s = p.wait(lambda s: "| threads 4" in s and ticker.search(s) and main.search(s),
               "all four threads")
    # Threads seen over the run (a thread seen only at start counts too).
    n = int(re.search(r"thread all \((\d+)\)", s).group(1))
    assert n >= 4, s
    views, names = [], []
    for i in range(1, n + 1):
        p.keys("t")
        s = p.wait(lambda s, i=i: re.search(rf"thread \d+ (.*?)\({i}/{n}\)", s), f"thread {i}")
        # the thread's Python name, where it has one, after its id
        names.append(re.search(rf"thread \d+ (.*?) ?\({i}/{n}\)", s).group(1))
        time.sleep(1.2)  # a refresh or two
        s = p.screen()
        views.append((bool(ticker.search(s)), bool(main.search(s))))
    assert views.count((False, True)) == 1, views
    assert views.count((True, False)) == 3, views
    assert names[views.index((False, True))] == "MainThread", (names, views)
    assert all(re.fullmatch(r"Thread-\d+( \(ticker\))?", names[k])
               for k, v in enumerate(views) if v == (True, False)), (names, views)
    p.keys("t")
    p.wait(lambda s: f"thread all ({n})" in s, "all threads again")
    p.keys("q")
    assert restored(p)[0] == 0


def test_live_call_tree(live_pane):
    """Down moves to beta; Enter shows its caller main; Escape goes back;
    Up and Enter show alpha's."""
    p = live_pane
    p.keys("Down", "Enter")
    s = p.wait(lambda s: "callers:" in s and "> beta" in s, "beta's callers and callees")
    callers = s[s.index("callers:"):s.index("> beta")]
    assert re.search(r"\smain\s", callers), s
    after = s[s.index("callees:"):]
    assert "(none)" in after, s
    p.keys("Escape")
    p.wait(lambda s: "callers:" not in s and ranked(s), "the table again")
    p.keys("Up", "Enter")
    s = p.wait(lambda s: "> alpha" in s, "alpha's callers")
    assert re.search(r"\smain\s", s[s.index("callers:"):s.index("> alpha")]), s
    p.keys("Escape", "q")
    assert restored(p)[0] == 0


def test_live_help_lines_window(live_pane):
    """h shows the keys (any key closes them); l switches to lines, w to the
    last seconds."""
    p = live_pane
    p.keys("h")
    p.wait(lambda s: "pystrobe live: keys" in s, "the help")
    p.keys("x")
    p.wait(lambda s: "pystrobe live: keys" not in s, "the help closed")
    p.keys("l")
    # A line of alpha's loop, not its first line: the rows of the functions
    # view (each at its first line) can stay up a refresh after the header
    # says lines.
    lines = (WORKLOADS / "split_3_1.py").read_text().splitlines()
    first = lines.index("def alpha(n):") + 1

    def alpha_line(s):
        m = re.search(r"\salpha\s+\S*split_3_1\.py:(\d+)", s)
        return int(m.group(1)) if m else 0

    p.wait(lambda s: "lines | whole run" in s and alpha_line(s) > first, "alpha's loop line")
    p.keys("l", "w")
    p.wait(lambda s: "functions | last 10s" in s and ranked(s, least=50),
           "the last seconds")
    p.keys("w")
    p.wait(lambda s: "whole run" in s, "the whole run")
    p.keys("q")
    assert restored(p)[0] == 0


def test_live_resize(live_pane):
    """Resizing redraws at once: narrow, columns drop; too small, a message;
    back, everything again."""
    p = live_pane
    p.resize(50, 10)
    s = p.wait(lambda s: "alpha" in s and "own%" in s and "total t" not in s, "the 50x10 view")
    lines = s.splitlines()
    assert len(lines) <= 10 and all(len(l) <= 50 for l in lines), s
    p.resize(30, 6)
    p.wait(lambda s: "too small" in s, "the too-small message")
    p.resize(120, 40)
    p.wait(lambda s: "total t" in s and "file:line" in s and ranked(s), "the 120x40 view")
    p.keys("q")
    assert restored(p)[0] == 0


# Each field a header line may show, in full or shortened, whole: one cut at
# the screen's edge matches none.
HEADER_FIELDS = [
    [r"pystrobe( live)?", r"pid \d+", r"(Python|py) 3\.\d+\.\d+\S*", r"up \d+:\d\d:\d\d",
     r"(wall|cpu|gil|exception)( mode)?", r"thread (all \(\d+\)|\d+ (.+ )?\(\d+/\d+\))"],
    None,  # the command line: checked by its end
    [r"samples \d+( \(run \d+\))?", r"rate \d+(/s)? of \d+/s", r"failed (\d+ \()?\d+\.\d%\)?",
     r"missed \d+", r"threads \d+"],
    [r"GIL( held)? \d+\.\d%", r"(GIL )?wait \d+\.\d%", r"(on )?CPU (\d+\.\d%|n/a)",
     r"GC \d+\.\d%", r"exc(eption)? \d+\.\d%"],
    [r"functions|funcs|lines", r"whole run|last \d+s", r"sort (own|total|name|file)",
     r"(refresh )?\d+(\.\d+)?s", r"\[PAUSED\]", r"\[filter: .*\]"],
]
KEY_ITEMS = {"q quit", "s/S sort", "s sort", "p pause", "r reset", "+/- refresh", "/ filter",
             "t/<- -> thread", "t thread", "Enter tree", "l lines", "w window", "h help"}


def layout_faults(screen, width):
    """What is wrong with the header and key lines at this width: a line too
    wide, a field or key that is not whole (cut mid-word at the edge)."""
    lines = screen.splitlines()
    if len(lines) < 6:
        return ["fewer than 6 lines"]
    faults = [f"line {i} wider than {width}" for i, l in enumerate(lines) if len(l) > width]
    for i, pats in enumerate(HEADER_FIELDS):
        line = lines[i].rstrip()
        if pats is None:
            if not (line.startswith("cmd: ") and line.endswith(" 600")):
                faults.append(f"command line not whole: {line!r}")
            continue
        for part in line.split(" | "):
            if not any(re.fullmatch(p, part) for p in pats):
                faults.append(f"line {i}: {part!r} is not a whole field")
    keys = lines[-1].strip()
    for item in keys.split("  "):
        if item not in KEY_ITEMS:
            faults.append(f"key line: {item!r} is not a whole key")
    return faults


def test_live_header_fits_narrow(live_pane):
    """At 80x24 and at the smallest size shown (40x8), every header line and
    the key line fit, in whole fields (less important ones dropped, labels
    shortened), never cut at the edge; the paused tag stays."""
    p = live_pane
    for w, h, key in ((80, 24, None), (80, 24, "p"), (40, 8, None)):
        p.resize(w, h)
        if key:
            p.keys(key)
        try:
            s = p.wait(lambda s: not layout_faults(s, w) and (key is None or "[PAUSED]" in s),
                       f"whole header and key lines at {w}x{h}", timeout=15)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{layout_faults(p.screen(), w)}") from None
        assert "pid " in s and "thread all (1)" in s, s
    p.resize(120, 40)  # room for the shell's report after q
    p.keys("q")
    assert restored(p)[0] == 0


def test_live_target_exit_banner(pane_factory, tmp_path, pystrobe):
    """When the target exits the final counts stay, with a banner, until q;
    -o writes the profile."""
    if KEY_TARGET is None:
        pytest.skip("no supported interpreter")
    out = tmp_path / "out.txt"
    pane = pane_factory(live_cmd(KEY_TARGET, tmp_path, 4, "--collapsed", "-o", str(out)))
    s = pane.wait(lambda s: "the process exited" in s, "the exit banner")
    assert ranked(s), s
    time.sleep(1)
    assert "the process exited" in pane.screen()
    pane.keys("q")
    status, s = restored(pane)
    assert status == 0, s
    text = out.read_text()
    assert "alpha" in text and "beta" in text


@pytest.mark.parametrize("how", ["C-c", "SIGTERM"])
def test_live_signal_restores_terminal(live_pane, how):
    p = live_pane
    if how == "C-c":
        p.keys("C-c")
    else:
        pid = p.tmux("display-message", "-p", "-t", "live", "#{pane_pid}").stdout.strip()
        # The pane runs sh, which runs pystrobe.
        kids = subprocess.run(["pgrep", "-P", pid, "-x", "pystrobe"], stdout=subprocess.PIPE,
                              text=True).stdout.split()
        assert kids, "pystrobe not found under the pane's shell"
        os.kill(int(kids[0]), signal.SIGTERM)
    restored(p)


def children(pid):
    """The processes whose parent is pid."""
    out = []
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{d}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d))
        except OSError:  # gone meanwhile
            pass
    return out


def thread_nices(pid):
    """{tid: nice} of process pid's threads."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        out[int(tid)] = int(fields[16])  # stat's 19th field, the 17th after comm
    return out


def test_live_attach_cpu_mode(pane_factory, tmp_path, pystrobe):
    """attach --live --mode cpu: the ranking, the on-CPU share known; q
    leaves the target running. The UI thread runs 10 nice steps below the
    sampling (main) thread, capped at 19: pystrobe starts 5 steps above the
    suite's priority (as root) so that the two differ even under nice 19."""
    if KEY_TARGET is None:
        pytest.skip("no supported interpreter")
    script, _ = stage_split(KEY_TARGET, tmp_path)
    target = subprocess.Popen(KEY_TARGET.argv + [script, "600"], stdout=subprocess.PIPE)
    try:
        assert target.stdout.readline().strip() == b"ready"
        boost = ["nice", "-n", "-5"] if os.geteuid() == 0 else []
        cmd = " ".join(shlex.quote(a) for a in [*boost, str(pystrobe), "attach", "--live",
                                                "--mode", "cpu", str(target.pid)])
        pane = pane_factory(cmd)
        s = pane.wait(ranked, "alpha above beta")
        assert f"pid {target.pid}" in s and "cpu mode" in s, s
        assert re.search(r"on CPU \d+\.\d%", s), s
        shell = int(pane.tmux("display-message", "-p", "-t", "live", "#{pane_pid}").stdout)
        (prof,) = children(shell)
        nices = thread_nices(prof)
        main = nices.pop(prof)
        if main < 19:
            assert min(19, main + 10) in nices.values(), (main, nices)
        pane.keys("q")
        assert restored(pane)[0] == 0
        assert target.poll() is None
    finally:
        target.kill()
        target.wait()


def test_live_refuses_without_terminal(pystrobe):
    target = KEY_TARGET
    if target is None:
        pytest.skip("no supported interpreter")
    # A terminal for input, a pipe for output: the output is what is refused.
    master, slave = pty.openpty()
    try:
        r = subprocess.run([str(pystrobe), "run", "--live", "--", *target.argv, "-c", "pass"],
                           stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=60)
    finally:
        os.close(master)
        os.close(slave)
    assert r.returncode == 2
    lines = r.stderr.decode().strip().splitlines()
    assert lines == ["pystrobe: --live needs a terminal: standard output is not one"], lines
    assert r.stdout == b""


def _read_all(fd, until=None, timeout=30.0):
    """Read fd until `until` shows up (or timeout); the bytes read."""
    buf = b""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
            if until is not None and until in buf:
                break
    return buf


def test_live_frozen_terminal_keeps_sampling(tmp_path, pystrobe):
    """With the terminal's reader stopped (a pseudo-terminal nobody reads,
    its buffer full), the view's writes block but sampling goes on: the
    profile gets the samples of the whole duration."""
    if KEY_TARGET is None:
        pytest.skip("no supported interpreter")
    script, run_args = stage_split(KEY_TARGET, tmp_path)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    err = open(tmp_path / "stderr.txt", "wb")
    duration = 15
    t_start = time.monotonic()
    proc = subprocess.Popen([str(pystrobe), "run", "--live", "-d", str(duration),
                             *run_args, script, "600"],
                            stdin=slave, stdout=slave, stderr=err, start_new_session=True)
    err.close()
    writer = -1
    try:
        seen = _read_all(master, until=b"beta", timeout=SCREEN_TIMEOUT)
        assert b"beta" in seen, seen[-2000:]
        # Fill what the pseudo-terminal buffers, and keep it full (the
        # kernel moves what it holds between two buffers, freeing room a
        # little later): the view's next write blocks.
        writer = os.open(os.ttyname(slave), os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
        stop = threading.Event()
        filled = [0]

        def fill():
            while not stop.is_set():
                try:
                    filled[0] += os.write(writer, b"x" * 4096)
                except BlockingIOError:
                    time.sleep(0.01)
        filler = threading.Thread(target=fill, daemon=True)
        filler.start()
        t_frozen = time.monotonic()
        # Frozen past the end of sampling.
        time.sleep(duration + 2 - (t_frozen - t_start))
        assert proc.poll() is None, "pystrobe ended while its terminal was frozen"
        stop.set()
        filler.join()
        # Thaw: read everything, then quit from the final view.
        _read_all(master, until=b"Press q", timeout=SCREEN_TIMEOUT)
        os.write(master, b"q")
        deadline = time.monotonic() + SCREEN_TIMEOUT
        while proc.poll() is None and time.monotonic() < deadline:
            _read_all(master, timeout=0.5)
        assert proc.poll() == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for fd in (writer, master, slave):
            if fd >= 0:
                os.close(fd)
    text = (tmp_path / "stderr.txt").read_text()
    m = re.search(r"Captured (\d+) samples in ([\d.]+) seconds", text)
    assert m, text
    taken = int(m.group(1))
    # At most 1 kHz before the freeze, and the view blocks at its next
    # refresh (0.5 s): a sampler stopped by the frozen view would have no
    # more than this many samples. A working one goes on for the rest of
    # the duration.
    before = 1000 * (t_frozen - t_start + 1.0)
    assert taken >= before + 1000, (taken, before, text)


LOOP = """
import sys, time
def add(a, b):
    return a + b
def work(seconds):
    end = time.time() + seconds
    x = 0
    while time.time() < end:
        for i in range(1000):
            x = add(x, i)
work(float(sys.argv[1]))
"""


def test_live_line_instructions(pane_factory, pystrobe, tmp_path):
    """--opcodes, by line (l): each line's most sampled instruction after
    its name, one of that line's (`return a + b`: its loads, its add,
    specialized on 3.12, its return); by function (l again) none."""
    if KEY_TARGET is None or KEY_TARGET.chroot is not None or KEY_TARGET.version != (3, 12):
        pytest.skip("no pyenv 3.12")
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    argv = [str(pystrobe), "run", "--live", "--opcodes", "--python", KEY_TARGET.argv[0],
            str(script), "600"]
    p = pane_factory(" ".join(shlex.quote(a) for a in argv))
    p.wait(lambda s: re.search(r"\sadd\s", s), "add sampled")
    p.keys("l")
    s = p.wait(lambda s: re.search(r"\sadd  \[[A-Z_]+ \d+%\]\s.*loop\.py:4", s),
               "add's line with its instruction")
    op = re.search(r"\sadd  \[([A-Z_]+) \d+%\]\s.*loop\.py:4", s).group(1)
    assert op.startswith(("LOAD_FAST", "BINARY_OP", "RETURN_", "RESUME")), s
    assert re.search(r"\swork  \[[A-Z_]+ \d+%\]", s), s
    p.keys("l")
    p.wait(lambda s: re.search(r"\sadd\s", s) and not re.search(r"\w  \[[A-Z_]+ \d+%\]", s),
           "functions again, without instructions")
    p.keys("q")
    assert restored(p)[0] == 0


def test_live_subprocesses(pane_factory, pystrobe, tmp_path):
    """--subprocesses: one view of every process, each its own `process PID
    COMMAND` row over its functions; the child's function in the table."""
    if KEY_TARGET is None or KEY_TARGET.chroot is not None:
        pytest.skip("no pyenv interpreter")
    argv = [str(pystrobe), "run", "--live", "--subprocesses", "--python", KEY_TARGET.argv[0],
            str(WORKLOADS / "family.py"), "subprocess", str(tmp_path)]
    p = pane_factory(" ".join(shlex.quote(a) for a in argv), width=160)
    p.wait(lambda s: "the process exited" in s, "the exit banner")
    child = int((tmp_path / "child_subprocess.pid").read_text())
    p.keys("s")  # by total: the processes first
    s = p.wait(lambda s: f" process {child} " in s, "the child's process row")
    assert re.search(r"\sprocess \d+ ", s.replace(f"process {child} ", "")), s
    # The parent's `start` waits for the child's whole life; its short
    # parent_before can go unsampled when a loaded machine starts it late.
    assert re.search(r"\schild_subprocess\s", s) and re.search(r"\sstart\s.*family\.py", s), s
    p.keys("q")
    assert restored(p)[0] == 0
    # Without -o the live view writes no profile, the children's neither.
    assert not [f for f in os.listdir(p.dir) if f.startswith("profile")], os.listdir(p.dir)
