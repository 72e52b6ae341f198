"""Figures the feature issues ask for, beside bench/run.py's table: what
each sits on is measured in one sitting, the two sides alternating, and
printed as ratios (bench/RESULTS-features.md holds a run with its load).

    /usr/bin/python3 bench/features.py SECTION... [--build DIR]

Sections:
  async      a 100-task asyncio target (tests/integration/workloads/
             async_split.py 100): µs per module call (bench/async_cost.py)
             and samples/s flat out (-r 1000khz) with and without
             --async-aware (running, all), pystrobe and CPython 3.15's
             profiling.sampling.
  live       the live view's screen at 120x40 and 80x24 (tmux capture-pane,
             into bench/screens/), and the achieved rate at 1 kHz and 10 kHz
             with and without --live, pystrobe's and the reference's.
  recording  bytes per sample of --binary against the reference's --binary
             on deep at 1 kHz (and of --old-build's pystrobe, alternating);
             what replay reads of a recording whose writer got kill -9.
  rss        peak RSS of a 10 kHz x 6 min recording against 10 kHz x 36 s.
  screens    the live view's screens alone (as in live).
  outputs    the heatmap, flame graph, speedscope and pprof outputs of
             split_3_1.py as their consumers see them (headless Chromium's
             screenshots, speedscope's app, go tool pprof -top beside pstats
             of the same samples), into bench/screens/.
  versions   --pprof, --speedscope and --heatmap of split_3_1.py on every
             interpreter 3.8+, from run and from attach, each checked by its
             reader (pprof -top beside pstats of the same samples).

Needs root (chroot, ptrace) and the sid root (.cache/sid-root, or
PYSTROBE_SIDROOT); mounts /proc there in a private mount namespace.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests" / "integration"))
ROOT = Path(os.environ.get("PYSTROBE_SIDROOT", REPO / ".cache" / "sid-root")).resolve()
PY = "/usr/bin/python3.15"
SCREENS = HERE / "screens"
INTEG = REPO / "tests" / "integration"
NUM = r"([\d,]+(?:\.\d+)?)"


def log(*a):
    print(*a, flush=True)


def loadavg():
    return open("/proc/loadavg").read().split()[0]


class Stage:
    """A directory inside the root, seen as /tmp/NAME from inside."""

    def __init__(self, build):
        self.inside = f"/tmp/pystrobe-features-{os.getpid()}"
        self.host = ROOT / self.inside.lstrip("/")
        self.host.mkdir(parents=True)
        self.build = build
        for f in list((HERE / "workloads").glob("*.py")) + [
                INTEG / "workloads" / "async_split.py", INTEG / "workloads" / "split_3_1.py",
                HERE / "async_cost.py"]:
            shutil.copy2(f, self.host / f.name)
        shutil.copytree(build / "python" / "pystrobe", self.host / "module" / "pystrobe",
                        ignore=shutil.ignore_patterns("__pycache__"))

    def close(self):
        shutil.rmtree(self.host, ignore_errors=True)

    def start(self, script, *args):
        """A python3.15 target in the root; returns it once it said ready."""
        p = subprocess.Popen(["chroot", str(ROOT), PY, "-B", f"{self.inside}/{script}", *args],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        line = p.stdout.readline()
        if not line.startswith("ready"):
            raise SystemExit(f"{script}: said {line!r}")
        time.sleep(0.5)
        return p

    @staticmethod
    def stop(p):
        if p.poll() is None:
            p.kill()
        p.wait()

    def ref(self, *args):
        return ["chroot", str(ROOT), PY, "-m", "profiling.sampling", *args]


def summary(text):
    """(rate, failed %) from pystrobe's or the reference's end summary."""
    r = re.search(r"Sample rate: " + NUM, text)
    f = (re.search(r"Failed samples: [\d,]+ \(" + NUM + r"%\)", text)
         or re.search(r"Error rate: " + NUM, text))
    val = (lambda m: float(m.group(1).replace(",", "")) if m else None)
    return val(r), val(f)


def run_wait4(argv, timeout):
    """Run argv; its stdout and stderr as text."""
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    return r.stdout.decode("utf-8", "replace")


# --- async ----------------------------------------------------------------------

def section_async(st, pystrobe, args):
    log(f"## async (load {loadavg()})")
    t = st.start("async_split.py", "100")
    try:
        for order in ("", "reverse"):
            r = subprocess.run(["chroot", str(ROOT), PY, "-B", f"{st.inside}/async_cost.py",
                                f"{st.inside}/module", str(t.pid), "2", order],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            log(r.stdout.rstrip())
        modes = [None, "running", "all"]
        res = {}
        for rep in range(args.reps):
            tools = ["pystrobe", "reference"] if rep % 2 == 0 else ["reference", "pystrobe"]
            for mode in modes:
                for tool in tools:
                    extra = [] if mode is None else ["--async-aware", "--async-mode", mode]
                    out = st.host / f"a-{tool}-{mode}-{rep}.txt"
                    if tool == "pystrobe":
                        argv = [str(pystrobe), "attach", "-r", "1000khz", "-d", "3", *extra,
                                "--collapsed", "-o", str(out), str(t.pid)]
                    else:
                        argv = st.ref("attach", "-r", "1000khz", "-d", "3", *extra,
                                      "--collapsed", "-o", f"{st.inside}/{out.name}", str(t.pid))
                    text = run_wait4(argv, 120)
                    rate, failed = summary(text)
                    stacks = sum(int(l.rsplit(None, 1)[1]) for l in out.read_text().splitlines()
                                 if l.strip()) if out.exists() else 0
                    res.setdefault((tool, mode), []).append((rate, failed, stacks / 3.0))
                    log(f"{tool:9} {str(mode):8} rep {rep}: {rate} samples/s, failed {failed}%,"
                        f" {stacks / 3.0:,.0f} stacks/s (load {loadavg()})")
        log("\nmean samples/s and µs per sample; ratio to the same tool's plain sampling:")
        for tool in ("pystrobe", "reference"):
            base = sum(x[0] for x in res[(tool, None)]) / len(res[(tool, None)])
            for mode in modes:
                rate = sum(x[0] for x in res[(tool, mode)]) / len(res[(tool, mode)])
                log(f"{tool:9} {str(mode):8} {rate:10,.0f}/s {1e6 / rate:8.1f} µs/sample "
                    f"x{base / rate:.2f} the plain sample's cost")
    finally:
        st.stop(t)


# --- live -----------------------------------------------------------------------

class Tmux:
    def __init__(self, cmd, width, height):
        self.dir = tempfile.mkdtemp(prefix="pystrobe-feat-")
        self.sock = os.path.join(self.dir, "s")
        self.tmux("new-session", "-d", "-s", "f", "-x", str(width), "-y", str(height),
                  "sh", "-c", f"{cmd}; sleep 600")
        self.tmux("set-option", "-t", "f", "window-size", "manual")

    def tmux(self, *a):
        return subprocess.run(["tmux", "-S", self.sock, "-f", "/dev/null", *a], text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", "f").stdout

    def wait(self, pattern, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            s = self.screen()
            if re.search(pattern, s):
                return s
            time.sleep(0.2)
        return None

    def close(self):
        self.tmux("kill-server")
        shutil.rmtree(self.dir, ignore_errors=True)


def live_captures(st, pystrobe):
    t = st.start("split_3_1.py", "3600")
    try:
        tm = Tmux(f"TERM=screen {pystrobe} attach --live -r 1khz {t.pid}", 120, 40)
        try:
            time.sleep(8)
            SCREENS.mkdir(exist_ok=True)
            (SCREENS / "live-120x40.txt").write_text(tm.screen())
            tm.tmux("resize-window", "-t", "f", "-x", "80", "-y", "24")
            time.sleep(2)
            (SCREENS / "live-80x24.txt").write_text(tm.screen())
            tm.tmux("send-keys", "-t", "f", "q")
        finally:
            tm.close()
    finally:
        st.stop(t)
    log(f"wrote {SCREENS}/live-120x40.txt and live-80x24.txt")


def live_rate(st, pystrobe, tool, rate, live, seconds):
    t = st.start("deep.py")
    try:
        err = st.host / f"live-{tool}-{rate}-{live}.err"
        if tool == "pystrobe":
            argv = [str(pystrobe), "attach", "-r", rate, "-d", str(seconds)]
            argv += ["--live"] if live else ["--collapsed", "-o", str(st.host / "l.txt")]
            argv.append(str(t.pid))
        else:
            argv = st.ref("attach", "-r", rate, "-d", str(seconds),
                          *(["--live"] if live else ["--collapsed", "-o",
                                                     f"{st.inside}/l.txt"]), str(t.pid))
        if not live:
            text = run_wait4(argv, seconds + 60)
            return summary(text)[0]
        cmd = " ".join(f"'{a}'" for a in argv) + f" 2>'{err}'"
        tm = Tmux(f"TERM=screen {cmd}", 120, 40)
        try:
            s = tm.wait(r"Press q|Press 'q'|PROFILING FINISHED", seconds + 60)
            tm.tmux("send-keys", "-t", "f", "q")
            if tool == "reference":
                m = s and re.search(r"Samples:\s+(\d+) total\s+\(\s*" + NUM + r"/s\)", s)
                return float(m.group(2).replace(",", "")) if m else None
            time.sleep(1.5)
            return summary(err.read_text() if err.exists() else "")[0]
        finally:
            tm.close()
    finally:
        st.stop(t)


def section_live(st, pystrobe, args):
    log(f"## live (load {loadavg()})")
    live_captures(st, pystrobe)
    for rate in ("1khz", "10khz"):
        res = {}
        for rep in range(args.reps):
            conds = [(tool, live) for tool in ("pystrobe", "reference") for live in (True, False)]
            if rep % 2:
                conds.reverse()
            for tool, live in conds:
                r = live_rate(st, pystrobe, tool, rate, live, 5)
                res.setdefault((tool, live), []).append(r)
                log(f"{rate} {tool:9} {'--live' if live else 'plain':6} rep {rep}: {r} samples/s"
                    f" (load {loadavg()})")
        for tool in ("pystrobe", "reference"):
            on = [x for x in res[(tool, True)] if x]
            off = [x for x in res[(tool, False)] if x]
            if on and off:
                a, b = sum(on) / len(on), sum(off) / len(off)
                log(f"{rate} {tool:9} --live {a:,.0f}/s, plain {b:,.0f}/s: x{a / b:.3f}")


# --- recording ------------------------------------------------------------------

def section_recording(st, pystrobe, args):
    log(f"## recording (load {loadavg()})")
    # 1. bytes per sample at 1 kHz on deep, the recorders alternating
    tools = ["pystrobe", "reference"] + (["pystrobe-old"] if args.old_build else [])
    for rep in range(args.reps):
        for tool in (tools if rep % 2 == 0 else tools[::-1]):
            t = st.start("deep.py")
            try:
                out = st.host / f"rec-{tool}-{rep}.bin"
                if tool.startswith("pystrobe"):
                    exe = pystrobe if tool == "pystrobe" else pystrobe.with_name("pystrobe-old")
                    argv = [str(exe), "attach", "--binary", "-r", "1khz", "-d", "10",
                            "-o", str(out), str(t.pid)]
                else:
                    argv = st.ref("attach", "--binary", "-r", "1khz", "-d", "10",
                                  "-o", f"{st.inside}/{out.name}", str(t.pid))
                text = run_wait4(argv, 120)
            finally:
                st.stop(t)
            if tool.startswith("pystrobe"):
                m = re.search(r"\(([\d,]+) bytes, " + NUM + r" bytes per sample\)", text)
                log(f"{tool} rep {rep}: {m.group(0) if m else text[-300:]}")
                r = subprocess.run([sys.executable, str(HERE / "recording_size.py"), str(out)],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                log(f"  same samples through the reference's BinaryWriter: {r.stdout.strip()}")
            else:
                n = re.search(r"Captured " + NUM + r" samples?", text)
                size = out.stat().st_size if out.exists() else 0
                if n:
                    k = float(n.group(1).replace(",", ""))
                    log(f"reference rep {rep}: {size} bytes, {k:.0f} samples, "
                        f"{size / k:.2f} bytes per sample")
                else:
                    log(f"reference rep {rep}: {size} bytes; summary: {text[-400:]!r}")
    # 3. kill -9 in the middle
    section_kill(st, pystrobe, args)


def section_rss(st, pystrobe, args):
    log(f"## rss (load {loadavg()})")
    # peak RSS: 10 kHz for 36 s and for 6 minutes
    for secs in (36, args.long_seconds):
        t = st.start("deep.py")
        try:
            out = st.host / f"long-{secs}.pysr"
            p = subprocess.Popen([str(pystrobe), "attach", "--binary", "-r", "10khz", "-d",
                                  str(secs), "-o", str(out), str(t.pid)],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            rss = []
            t0 = time.monotonic()
            while True:
                pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    break
                try:
                    for line in open(f"/proc/{p.pid}/status"):
                        if line.startswith("VmRSS:"):
                            rss.append((time.monotonic() - t0, int(line.split()[1])))
                except OSError:
                    pass
                time.sleep(1.0)
            p.returncode = os.waitstatus_to_exitcode(status)
            text = p.stdout.read().decode("utf-8", "replace")
            peak = ru.ru_maxrss
            early = [k for s, k in rss if s < 30]
            late = [k for s, k in rss if s > secs - 30]
            log(f"10 kHz x {secs} s: peak RSS (wait4) {peak} KiB; VmRSS first 30 s max {max(early or [0])}"
                f" KiB, last 30 s max {max(late or [0])} KiB; file {out.stat().st_size} bytes;"
                f" {' '.join(l for l in text.splitlines() if 'Sample rate' in l or 'Wrote' in l)}")
            out.unlink()
        finally:
            st.stop(t)


def section_screens(st, pystrobe, args):
    live_captures(st, pystrobe)


def section_kill(st, pystrobe, args):
    for rep in range(args.reps):
        t = st.start("deep.py")
        try:
            out = st.host / f"killed-{rep}.pysr"
            p = subprocess.Popen([str(pystrobe), "attach", "--binary", "-r", "1khz", "-d", "60",
                                  "-o", str(out), str(t.pid)], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            time.sleep(7.3 + 0.4 * rep)
            os.kill(p.pid, signal.SIGKILL)
            killed_at = time.monotonic()
            p.wait()
        finally:
            st.stop(t)
        import recording_format
        d = recording_format.read(out)
        r = subprocess.run([str(pystrobe), "replay", "--collapsed", "-o",
                            str(st.host / "k.txt"), str(out)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        start = d["meta"]["start_monotonic_ns"] / 1e9
        last = d["samples"][-1][0] / 1e9 if d["samples"] else start
        log(f"kill -9 rep {rep}: {out.stat().st_size} bytes, {d['blocks']} complete blocks, "
            f"{len(d['samples'])} samples, last at {last - start:.2f} s of the run; killed at "
            f"{killed_at - start:.2f} s: {killed_at - last:.2f} s lost; replay exit "
            f"{r.returncode}: {' | '.join(r.stdout.strip().splitlines())}")


# --- outputs --------------------------------------------------------------------

def section_outputs(st, pystrobe, args):
    log(f"## outputs (load {loadavg()})")
    import test_flamegraph
    import test_speedscope
    SCREENS.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="pystrobe-feat-out-"))
    py = args.python
    script = INTEG / "workloads" / "split_3_1.py"
    try:
        for fmt, out in (("--heatmap", work / "heatmap"), ("--speedscope", work / "s.json"),
                         ("--pprof", work / "p.pb.gz"), ("--flamegraph", work / "f.html")):
            # pprof's samples are also replayed as pstats: the same samples.
            rec = ["--record", str(work / "p.pysr")] if fmt == "--pprof" else []
            r = subprocess.run([str(pystrobe), "run", "-r", "1khz", "-d", "6", fmt, "-o",
                                str(out), *rec, "--python", py, str(script), "3600"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            log(f"{fmt}: exit {r.returncode}")
        subprocess.run([str(pystrobe), "replay", "--pstats", "-o", str(work / "p.pstats"),
                        str(work / "p.pysr")], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        # heatmap: the page of split_3_1.py, screenshot
        pages = sorted((work / "heatmap").glob("*.html"))
        page = next(p for p in pages if "split_3_1.py" in p.read_text(errors="replace")[:4000])
        log(f"heatmap pages: {[p.name for p in pages]}")
        png = SCREENS / "heatmap-split_3_1.png"
        subprocess.run([test_flamegraph.chromium_binary(), "--headless", "--no-sandbox",
                        "--disable-gpu", "--no-first-run", "--hide-scrollbars",
                        f"--user-data-dir={work / 'chr'}", "--window-size=1100,900",
                        "--virtual-time-budget=3000", f"--screenshot={png}",
                        page.resolve().as_uri()], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
        subprocess.run([test_flamegraph.chromium_binary(), "--headless", "--no-sandbox",
                        "--disable-gpu", "--no-first-run", "--hide-scrollbars",
                        f"--user-data-dir={work / 'chr'}", "--window-size=1100,700",
                        "--virtual-time-budget=3000",
                        f"--screenshot={SCREENS / 'heatmap-index.png'}",
                        (work / "heatmap" / "index.html").resolve().as_uri()],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        log(f"heatmap screenshots: {png} ({png.stat().st_size if png.exists() else 0} bytes)")
        fg = SCREENS / "flamegraph-split_3_1.png"
        subprocess.run([test_flamegraph.chromium_binary(), "--headless", "--no-sandbox",
                        "--disable-gpu", "--no-first-run", "--hide-scrollbars",
                        f"--user-data-dir={work / 'chr'}", "--window-size=1100,900",
                        "--virtual-time-budget=3000", f"--screenshot={fg}",
                        (work / "f.html").resolve().as_uri()],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        log(f"flame graph screenshot: {fg} ({fg.stat().st_size if fg.exists() else 0} bytes)")
        # speedscope: its web app imports the file
        ss = test_speedscope.PACKAGE / "dist" / "release"
        if not (ss / "index.html").exists():
            subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix",
                            str(test_speedscope.NPM_PREFIX),
                            f"speedscope@{test_speedscope.SPEEDSCOPE_VERSION}"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        title, rows, console = test_speedscope.open_in_app(ss, work / "s.json", work)
        lines = [l for l in console.splitlines() if "Importing" in l or "rror" in l]
        log(f"speedscope app: title {title!r}; console: {lines}")
        log("speedscope sandwich rows (total, self): " + ", ".join(
            f"{k} {v}" for k, v in rows.items() if k in ("alpha", "beta", "main")))
        # pprof: go tool pprof -top
        tops = []
        for extra in ([], ["-sample_index=samples"]):
            r = subprocess.run(["go", "tool", "pprof", "-top", *extra, str(work / "p.pb.gz")],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            tops.append(f"$ go tool pprof -top {' '.join(extra)} p.pb.gz\n{r.stdout}")
        (SCREENS / "pprof-top.txt").write_text("\n".join(tops))
        log("\n".join(tops))
        import pstats
        s = pstats.Stats(str(work / "p.pstats")).stats
        for k, v in s.items():
            if k[2] in ("alpha", "beta"):
                log(f"pstats {k[2]}: {v[0]} own samples")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def section_versions(st, pystrobe, args):
    log(f"## versions (load {loadavg()})")
    work = Path(tempfile.mkdtemp(prefix="pystrobe-feat-ver-"))
    try:
        every_version(st, pystrobe, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def every_version(st, pystrobe, work):
    """`run` and `attach` of split_3_1.py under every interpreter 3.8+ of
    tests/integration/targets.py, writing --pprof (with a recording, replayed
    as pstats: the same samples), --speedscope and --heatmap, each read by
    its consumer: go tool pprof -top beside pstats' counts, speedscope's
    schema, the heatmap's page of split_3_1.py."""
    import test_speedscope
    from targets import all_targets
    schema = json.loads((test_speedscope.PACKAGE / "dist" / "release" /
                         "file-format-schema.json").read_text())
    for t in all_targets():
        if t.version < (3, 8):
            continue
        if t.chroot:
            script = f"{st.inside}/split_3_1.py"
        else:
            script = str(INTEG / "workloads" / "split_3_1.py")
        for how in ("run", "attach"):
            got = [one_format(pystrobe, t, how, script, fmt, work / f"{t.name}-{how}", schema)
                   for fmt in ("--pprof", "--speedscope", "--heatmap")]
            log(f"{t.name} {how}: " + "; ".join(got))


def one_format(pystrobe, t, how, script, fmt, base, schema):
    """One run or attach of split_3_1.py on target t writing fmt; what its
    consumer read of it, in a few words."""
    import jsonschema
    out = Path(f"{base}{fmt}")
    rec = Path(f"{base}.pysr")
    opts = ["-r", "1khz", "-d", "4", fmt, "-o", str(out)]
    if fmt == "--pprof":
        opts += ["--record", str(rec)]
    target = None
    if how == "run":
        prog = (["--", *t.argv, script, "3600"] if t.chroot
                else ["--python", t.argv[0], script, "3600"])
        argv = [str(pystrobe), "run", *opts, *prog]
    else:
        target = subprocess.Popen([*t.argv, script, "3600"], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)
        target.stdout.readline()
        argv = [str(pystrobe), "attach", *opts, str(target.pid)]
    try:
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    finally:
        if target:
            target.kill()
            target.wait()
    if r.returncode != 0:
        return f"{fmt} exit {r.returncode}: {r.stdout.strip().splitlines()[-1:]}"
    n = re.search(r"Captured (\d+) samples", r.stdout)
    failed = re.search(r"Failed samples: \d+ \(([\d.]+)%\)", r.stdout)
    n = f"{n.group(1) if n else '?'} samples ({failed.group(1) if failed else '?'}% failed)"
    if fmt == "--pprof":
        top = subprocess.run(["go", "tool", "pprof", "-top", "-sample_index=samples", str(out)],
                             text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout
        flat = {m.group(2): int(m.group(1)) for m in
                re.finditer(r"^\s*(\d+)\s+[\d.]+%.*\s(alpha|beta)$", top, re.M)}
        a, b = flat.get("alpha", 0), flat.get("beta", 0)
        ps = Path(f"{base}.pstats")
        subprocess.run([str(pystrobe), "replay", "--pstats", "-o", str(ps), str(rec)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import pstats
        own = {k[2]: v[0] for k, v in pstats.Stats(str(ps)).stats.items()
               if k[2] in ("alpha", "beta")}
        return (f"{n}; pprof -top alpha {a} beta {b} ({a / max(b, 1):.2f}:1), pstats "
                f"{own.get('alpha')} : {own.get('beta')}")
    if fmt == "--speedscope":
        try:
            jsonschema.validate(json.loads(out.read_text()), schema)
            return f"{n}; speedscope valid"
        except jsonschema.ValidationError as e:
            return f"speedscope INVALID: {e.message[:80]}"
    pages = [p for p in out.glob("file_*.html")
             if "split_3_1.py" in p.read_text(errors="replace")[:4000]]
    return f"{n}; heatmap page {'yes' if pages else 'MISSING'}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sections", nargs="+",
                    choices=["async", "live", "recording", "rss", "screens", "outputs",
                             "versions"])
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--old-build", help="a second build whose recordings are compared")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--long-seconds", type=int, default=360)
    ap.add_argument("--python", default=os.path.expanduser("~/.pyenv/versions/3.12.1/bin/python3.12"))
    args = ap.parse_args()
    if os.environ.get("PYSTROBE_FEATURES_NS") != "1":
        os.environ["PYSTROBE_FEATURES_NS"] = "1"
        os.execvp("unshare", ["unshare", "--mount", "--propagation", "private",
                              sys.executable, os.path.abspath(__file__), *sys.argv[1:]])
    subprocess.run([str(REPO / "scripts" / "sidroot.sh"), "mount"], check=True,
                   env=dict(os.environ, PYSTROBE_SIDROOT=str(ROOT)))
    build = Path(args.build).resolve()
    bindir = Path(tempfile.mkdtemp(prefix="pystrobe-feat-bin-"))
    pystrobe = bindir / "pystrobe"
    shutil.copy2(build / "pystrobe", pystrobe)
    if args.old_build:
        shutil.copy2(Path(args.old_build) / "pystrobe", bindir / "pystrobe-old")
    st = Stage(build)
    log(f"load average at start: {open('/proc/loadavg').read().strip()}")
    try:
        for s in args.sections:
            globals()[f"section_{s}"](st, pystrobe, args)
    finally:
        st.close()
        shutil.rmtree(bindir, ignore_errors=True)
        log(f"load average at end: {open('/proc/loadavg').read().strip()}")


if __name__ == "__main__":
    main()
