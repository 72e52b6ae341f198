"""Recordings (docs/format.md; docs/cli.md, "Recordings"): `--binary` and
`--record FILE` write every sample as it is taken, `pystrobe replay` turns a
recording into the outputs byte for byte as sampling live wrote them, a
pystrobe killed with SIGKILL leaves a file readable up to its last complete
block, and a damaged or foreign file is refused or read up to the damage
with one clear line. recording_format.py, a reader written from
docs/format.md alone, checks the files against the specification."""
import os
import re
import signal
import subprocess
import time

import pytest

import recording_format
from conftest import consumer_only_once, run_pystrobe, wait_ready
from targets import ROOT, supported_targets

WORKLOADS = ROOT / "tests" / "integration" / "workloads"
CHAINS = WORKLOADS / "random_chains.py"
DEEP = WORKLOADS / "deep.py"
# pyenv 3.8 (frame objects), 3.12, sid 3.15 (the frame cache, <GC> frames).
TARGETS = [t for t in supported_targets() if t.name in ("pyenv-3.8.18", "pyenv-3.12.1", "sid-3.15")]
FAST = [t for t in TARGETS if t.name in ("pyenv-3.12.1", "sid-3.15")]

pytestmark = pytest.mark.skipif(not TARGETS, reason="no CPython 3.8/3.12/3.15 target")


@pytest.fixture
def chains(spawn):
    """start(target) -> pid of random_chains.py on target, ready."""
    def start(target, *args):
        script = target.stage(CHAINS)
        p = spawn(target.argv + ["-B", script, "600", *args], stdout=subprocess.PIPE)
        assert wait_ready(p) == "ready"
        return p
    return start


def replay(pystrobe, *args):
    return run_pystrobe(pystrobe, "replay", *args)


WROTE_RECORDING = re.compile(rb"^Wrote recording to (.+) \((\d+) bytes, ", re.M)


def assert_size_told(stderr, rec):
    """The end line "Wrote recording to FILE (N bytes, ...)" names rec and
    its size on disk."""
    m = WROTE_RECORDING.search(stderr)
    assert m and os.path.basename(m.group(1).decode()) == rec.name, stderr.decode()
    assert int(m.group(2)) == rec.stat().st_size, \
        f"told {int(m.group(2))} bytes, the file has {rec.stat().st_size}"


FORMATS = {"collapsed": ("--collapsed",), "flamegraph": ("--flamegraph",),
           "pstats": ("--pstats",), "table": ()}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("target", TARGETS, ids=repr)
def test_replay_writes_the_same_bytes(pystrobe, chains, tmp_path, target, fmt):
    """One run writes its profile and, beside it, a recording; replaying the
    recording writes the same bytes (the pstats table on stdout too)."""
    p = chains(target)
    rec = tmp_path / "rec.pysr"
    out = [] if fmt == "table" else ["-o", tmp_path / "live"]
    r = run_pystrobe(pystrobe, "attach", "-d", "2", "-r", "2000", *FORMATS[fmt], *out,
                     "--record", rec, p.pid)
    assert r.returncode == 0, r.stderr.decode()
    assert_size_told(r.stderr, rec)
    out2 = [] if fmt == "table" else ["-o", tmp_path / "replayed"]
    r2 = replay(pystrobe, *FORMATS[fmt], *out2, rec)
    assert r2.returncode == 0, r2.stderr.decode()
    if fmt == "table":
        live, again = r.stdout, r2.stdout
    else:
        live, again = (tmp_path / "live").read_bytes(), (tmp_path / "replayed").read_bytes()
    assert len(live) > 100
    assert live == again
    n = int(re.search(rb"Captured (\d+) samples", r.stderr).group(1))
    assert f"Replayed {n} samples of process {p.pid}".encode() in r2.stderr


@pytest.mark.parametrize("target", FAST, ids=repr)
def test_binary_file_as_specified(pystrobe, chains, tmp_path, target):
    """--binary -o FILE: the independent reader finds the run's facts, one
    sample per sample taken with its time, thread ids and whole stacks."""
    p = chains(target)
    rec = tmp_path / "rec.pysr"
    before = time.time_ns()
    r = run_pystrobe(pystrobe, "attach", "-d", "2.5", "--binary", "-o", rec, p.pid)
    assert r.returncode == 0, r.stderr.decode()
    assert_size_told(r.stderr, rec)
    d = recording_format.read(rec)
    assert d["complete"] and not d["cut"] and d["blocks"] >= 2
    m, st = d["meta"], d["stats"]
    assert m["pid"] == p.pid and m["mode"] == "wall" and m["interval_ns"] == 1000000
    assert m["python_version_text"].startswith("%d.%d" % target.version)
    assert m["tool"].startswith("pystrobe ")
    assert before - 60e9 < m["start_realtime_ns"] < time.time_ns() + 60e9
    assert st["final"] == 1
    n = int(re.search(rb"Captured (\d+) samples", r.stderr).group(1))
    assert st["samples"] == n == len(d["samples"]) > 100
    times = [s[0] for s in d["samples"]]
    assert times == sorted(times)
    assert times[-1] - times[0] < 2.5e9 + 1e8
    stacks = [th for s in d["samples"] for th in s[2]]
    assert stacks and all(th[0] for th in stacks)
    funcs = {f[1] for th in stacks for f in th[3]}
    assert "f0" in funcs or any(re.fullmatch(r"f\d+", f) for f in funcs)
    main = [th for th in stacks if th[2] & 32]
    assert main, "no sample has the main-thread status bit"


def test_deep_stack_is_whole(pystrobe, spawn, tmp_path):
    """A 3,000-frame stack is stored whole (the reference cuts at 256), and
    its replay equals the live collapsed output."""
    target = next((t for t in TARGETS if t.name == "pyenv-3.12.1"), None)
    if target is None:
        pytest.skip("no pyenv 3.12.1")
    p = spawn(target.argv + [str(DEEP), "3000"], stdout=subprocess.PIPE)
    assert wait_ready(p) == "ready"
    rec = tmp_path / "rec.pysr"
    r = run_pystrobe(pystrobe, "attach", "-d", "1.5", "--collapsed", "-o", tmp_path / "live",
                     "--record", rec, p.pid)
    assert r.returncode == 0, r.stderr.decode()
    d = recording_format.read(rec)
    depth = max(len(th[3]) for s in d["samples"] for th in s[2])
    assert depth > 3000
    r2 = replay(pystrobe, "--collapsed", "-o", tmp_path / "again", rec)
    assert r2.returncode == 0, r2.stderr.decode()
    assert (tmp_path / "live").read_bytes() == (tmp_path / "again").read_bytes()


# A thread named by the target, and one renamed while it is sampled.
NAMED_CODE = r"""
import threading, time
def work():
    while True:
        sum(range(200))
        time.sleep(0.001)
x = threading.Thread(target=work, name="worker-x", daemon=True)
y = threading.Thread(target=work, name="worker-y", daemon=True)
x.start()
y.start()
print(x.native_id if hasattr(x, "native_id") else 0, flush=True)
time.sleep(0.7)
y.name = "worker-z"
while True:
    time.sleep(0.01)
"""


@pytest.mark.parametrize("target", FAST, ids=repr)
def test_thread_names_replayed(pystrobe, python_sleeper, tmp_path, target):
    """Thread names are recorded (THREAD_NAME records): replay's collapsed
    output names each thread as the live one did, the renamed one by the
    last name the live run saw."""
    p, line = python_sleeper(target, NAMED_CODE)
    rec = tmp_path / "rec.pysr"
    r = run_pystrobe(pystrobe, "attach", "-d", "2", "--collapsed", "-o", tmp_path / "live",
                     "--record", rec, p.pid)
    assert r.returncode == 0, r.stderr.decode()
    live = (tmp_path / "live").read_text()
    assert f"tid:{line} (worker-x);" in live, live[:2000]
    assert recording_format.read(rec)["names"][int(line)] == "worker-x"
    r2 = replay(pystrobe, "--collapsed", "-o", tmp_path / "again", rec)
    assert r2.returncode == 0, r2.stderr.decode()
    assert (tmp_path / "again").read_text() == live


def test_compression_none_and_zstd(pystrobe, chains, tmp_path):
    """--compression none stores blocks as they are; zstd (the default) is
    smaller; both replay to the same samples."""
    target = FAST[0] if FAST else TARGETS[0]
    p = chains(target)
    sizes = {}
    for c in ("none", "zstd"):
        rec = tmp_path / f"{c}.pysr"
        r = run_pystrobe(pystrobe, "attach", "-d", "1.5", "--binary", "--compression", c,
                         "-o", rec, p.pid)
        assert r.returncode == 0, r.stderr.decode()
        assert_size_told(r.stderr, rec)
        comps = {b[1] for b in recording_format.blocks(rec.read_bytes())}
        assert comps == {0 if c == "none" else 1}
        sizes[c] = rec.stat().st_size / len(recording_format.read(rec)["samples"])
    assert sizes["zstd"] < sizes["none"]
    r = run_pystrobe(pystrobe, "attach", "--compression", "lz4", "--binary", p.pid)
    assert r.returncode == 2 and b"bad compression 'lz4'" in r.stderr


def test_second_recorder_of_a_file_refused(pystrobe, chains, tmp_path):
    """Two `attach --binary` of one process in one directory both name their
    recording recording_PID.pysr: the second is refused at once (exit 8,
    the reason said) and leaves the first's file whole, whose end line
    tells its size. The first records until told to stop (SIGINT), after the
    second has ended: a loaded machine may start the second late."""
    target = FAST[0] if FAST else TARGETS[0]
    p = chains(target)
    rec = tmp_path / f"recording_{p.pid}.pysr"
    first = subprocess.Popen([str(pystrobe), "attach", "--binary", str(p.pid)],
                             cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not rec.exists() or rec.stat().st_size == 0:
            assert first.poll() is None and time.monotonic() < deadline, "no recording begun"
            time.sleep(0.02)
        second = subprocess.run([str(pystrobe), "attach", "-d", "4", "--binary", str(p.pid)],
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                timeout=60)
        assert first.poll() is None, "the first recorder ended before the second did"
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert second.returncode == 8, second.stderr.decode()
    assert (f"pystrobe: recording_{p.pid}.pysr is being written by another process: "
            "not recording").encode() in second.stderr, second.stderr.decode()
    assert first.returncode == 0, err.decode()
    assert_size_told(err, rec)
    assert recording_format.read(rec)["complete"]


def test_sigkill_leaves_a_readable_file(pystrobe, chains, tmp_path):
    """pystrobe killed with SIGKILL in the middle of a recording: replay reads
    every complete block (a warning, exit 0), and the samples it has reach to
    within a few seconds of the kill (blocks close each second; the bound is
    generous for a loaded machine)."""
    target = FAST[0] if FAST else TARGETS[0]
    p = chains(target)
    rec = tmp_path / "rec.pysr"
    proc = subprocess.Popen([str(pystrobe), "attach", "--binary", "-o", str(rec), str(p.pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert time.monotonic() < deadline, "fewer than 3 blocks after 60 s"
            try:
                n = len(recording_format.blocks(rec.read_bytes()))
            except (recording_format.Cut, FileNotFoundError, AssertionError):
                n = 0
            if n >= 3:
                break
            time.sleep(0.1)
        time.sleep(0.5)  # into the next block
        killed_at = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stderr.close()
    d = recording_format.read(rec)
    assert not d["complete"] and d["blocks"] >= 3
    last = d["samples"][-1][0]
    assert killed_at - last < 5e9, f"{(killed_at - last) / 1e9:.2f} s of samples lost"
    r = replay(pystrobe, "--collapsed", "-o", tmp_path / "out.txt", rec)
    assert r.returncode == 0, r.stderr.decode()
    assert b"the recording was not finished" in r.stderr
    assert f"Replayed {len(d['samples'])} samples".encode() in r.stderr
    total = sum(int(line.rsplit(b" ", 1)[1]) for line in (tmp_path / "out.txt").read_bytes().splitlines())
    assert total == sum(len(s[2]) for s in d["samples"])


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """A finished recording of several blocks, made once for the tests of bad
    files."""
    target = FAST[0] if FAST else TARGETS[0]
    d = tmp_path_factory.mktemp("rec")
    script = target.stage(CHAINS)
    p = subprocess.Popen(target.argv + ["-B", script, "600"], stdout=subprocess.PIPE)
    try:
        assert wait_ready(p) == "ready"
        from conftest import pystrobe_path
        rec = d / "rec.pysr"
        r = run_pystrobe(pystrobe_path(), "attach", "-d", "3.5", "-r", "500", "--binary",
                         "-o", rec, p.pid)
        assert r.returncode == 0, r.stderr.decode()
    finally:
        p.kill()
        p.wait()
    return rec


def test_replay_refuses_a_newer_major_version(pystrobe, recording, tmp_path):
    data = bytearray(recording.read_bytes())
    assert data[8:10] == b"\2\0"
    data[8] = 3
    bad = tmp_path / "newer.pysr"
    bad.write_bytes(bytes(data))
    r = replay(pystrobe, "--collapsed", "-o", tmp_path / "out", bad)
    assert r.returncode == 8
    assert re.search(rb"recording format 3\.\d+ is newer than this pystrobe reads \(2\.x\)",
                     r.stderr), r.stderr
    assert not (tmp_path / "out").exists()


SEEDS = ROOT / "tests" / "fuzz" / "seeds" / "fuzz_recording"


def test_replay_reads_format_1(pystrobe, tmp_path):
    """A 1.x file (sample times inside the SAMPLE records) and the 2.0 file of
    the same samples (times in each block's column) replay to the same bytes,
    and the reader written from the specification finds the same samples,
    times included, in both."""
    v1, v2 = SEEDS / "v1_zstd.pysr", SEEDS / "zstd.pysr"
    assert v1.read_bytes()[8:10] == b"\1\0" and v2.read_bytes()[8:10] == b"\2\0"
    a, b = recording_format.read(v1), recording_format.read(v2)
    assert a["complete"] and b["complete"] and len(a["samples"]) > 50
    assert a["samples"] == b["samples"]
    for fmt in ("--collapsed", "--pstats"):
        outs = []
        for f in (v1, v2):
            out = tmp_path / f"{f.stem}{fmt}"
            r = replay(pystrobe, fmt, "-o", out, f)
            assert r.returncode == 0, r.stderr.decode()
            outs.append(out.read_bytes())
        assert outs[0] == outs[1] and outs[0]


@pytest.mark.parametrize("content", [b"", b"PYSTREC", b"not a recording at all\n" * 10,
                                     b"PYSTREC\n\0\0\0\0\0\0\0\0"])
def test_replay_refuses_what_is_not_a_recording(pystrobe, tmp_path, content):
    bad = tmp_path / "bad.pysr"
    bad.write_bytes(content)
    r = replay(pystrobe, "--collapsed", "-o", tmp_path / "out", bad)
    assert r.returncode == 8, r.stderr.decode()
    assert r.stderr.count(b"\n") == 1 and b"not a pystrobe recording" in r.stderr
    assert not (tmp_path / "out").exists()


def test_replay_reads_up_to_a_damaged_block(pystrobe, recording, tmp_path):
    """A byte flipped inside the second block: the first block's samples are
    written, the damage named in one line, exit 8."""
    data = bytearray(recording.read_bytes())
    bl = recording_format.blocks(bytes(data))
    assert len(bl) >= 3
    off = bl[1][0]
    data[off + 20 + 5] ^= 0x55
    bad = tmp_path / "damaged.pysr"
    bad.write_bytes(bytes(data))
    r = replay(pystrobe, "--collapsed", "-o", tmp_path / "out", bad)
    assert r.returncode == 8
    assert f"block 1 at offset {off}: checksum mismatch".encode() in r.stderr
    assert (tmp_path / "out").stat().st_size > 0


def _extra_time(p):
    """The payload with one time more than its samples (a high part 0 and a
    low byte 0 added to the column)."""
    import struct
    n, cl = struct.unpack_from("<II", p, len(p) - 8)
    col0 = len(p) - 8 - cl
    hi_end = col0 + cl - n
    return (p[:hi_end] + b"\0" + p[hi_end:len(p) - 8] + b"\0"
            + struct.pack("<II", n + 1, cl + 2))


def _trailer(dn, dcl):
    def change(p):
        import struct
        n, cl = struct.unpack_from("<II", p, len(p) - 8)
        return p[:len(p) - 8] + struct.pack("<II", n + dn, cl + dcl)
    return change


@pytest.mark.parametrize("change,message", [
    (_extra_time, b"time column longer than its samples"),
    (_trailer(1, 0), b"malformed record"),      # a high part short
    (_trailer(-1, -1), b"malformed record"),    # a time short
    (_trailer(0, 1 << 20), b"bad time column length"),
    (_trailer(1 << 20, 0), b"bad time column length"),
], ids=["extra", "high-short", "time-short", "column-past", "low-past"])
def test_replay_checks_the_time_column(pystrobe, tmp_path, change, message):
    """A block whose time column does not match its samples (a 2.0 file,
    stored, its lengths and checksum made right) is named in one line; the
    samples of the blocks before it are written, exit 8."""
    import struct
    import zlib
    data = (SEEDS / "stored.pysr").read_bytes()
    off, _, payload = recording_format.blocks(data)[1]
    new = change(bytes(payload))
    head = bytearray(data[off:off + 20])
    struct.pack_into("<III", head, 8, len(new), len(new), zlib.crc32(new))
    bad = tmp_path / "bad.pysr"
    bad.write_bytes(data[:off] + bytes(head) + new + data[off + 20 + len(payload):])
    r = replay(pystrobe, "--collapsed", "-o", tmp_path / "out", bad)
    assert r.returncode == 8, r.stderr.decode()
    assert f"block 1 at offset {off}: ".encode() + message in r.stderr, r.stderr
    assert (tmp_path / "out").stat().st_size > 0


@pytest.mark.parametrize("cut", [17, 30, -1, -7])
def test_replay_reads_a_cut_file(pystrobe, recording, tmp_path, cut):
    """A file cut anywhere (as a killed writer leaves it) is read up to its
    last complete block; exit 0 with a warning, or 9 when that is nothing."""
    data = recording.read_bytes()
    bad = tmp_path / "cut.pysr"
    bad.write_bytes(data[:cut])
    r = replay(pystrobe, "--collapsed", "-o", tmp_path / "out", bad)
    assert b"the recording was not finished" in r.stderr
    if cut > 0:
        assert r.returncode == 9, r.stderr.decode()
    else:
        assert r.returncode == 0, r.stderr.decode()
        assert (tmp_path / "out").stat().st_size > 0


# --- JSON lines ---------------------------------------------------------------

def jsonl_records(path):
    import json
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("samples", [False, True], ids=["agg", "samples"])
def test_jsonl_replay_writes_the_same_bytes(pystrobe, chains, tmp_path, samples):
    target = FAST[0] if FAST else TARGETS[0]
    p = chains(target)
    rec = tmp_path / "rec.pysr"
    extra = ["--jsonl-samples"] if samples else []
    r = run_pystrobe(pystrobe, "attach", "-d", "1.5", "--jsonl", *extra, "-o",
                     tmp_path / "live.jsonl", "--record", rec, p.pid)
    assert r.returncode == 0, r.stderr.decode()
    r2 = replay(pystrobe, "--jsonl", *extra, "-o", tmp_path / "again.jsonl", rec)
    assert r2.returncode == 0, r2.stderr.decode()
    live = (tmp_path / "live.jsonl").read_bytes()
    assert live == (tmp_path / "again.jsonl").read_bytes()
    types = [x["type"] for x in jsonl_records(tmp_path / "live.jsonl")]
    assert ("sample" in types) == samples


def test_jsonl_records_as_the_reference(pystrobe, chains, tmp_path):
    """The reference's record types, fields and order (meta, string_table,
    frame_table, agg, end; chunks of at most 256), and counts that agree
    with the collapsed stacks of the same samples: self per frame is the
    leaf count, samples_total the thread stacks."""
    target = FAST[0] if FAST else TARGETS[0]
    p = chains(target)
    rec = tmp_path / "rec.pysr"
    r = run_pystrobe(pystrobe, "attach", "-d", "2", "--binary", "-o", rec, p.pid)
    assert r.returncode == 0, r.stderr.decode()
    assert replay(pystrobe, "--jsonl", "-o", tmp_path / "o.jsonl", rec).returncode == 0
    assert replay(pystrobe, "--collapsed", "-o", tmp_path / "o.txt", rec).returncode == 0
    recs = jsonl_records(tmp_path / "o.jsonl")
    order = {"meta": 0, "string_table": 1, "frame_table": 2, "agg": 3, "end": 4}
    assert [order[x["type"]] for x in recs] == sorted(order[x["type"]] for x in recs)
    assert recs[0]["type"] == "meta" and recs[-1]["type"] == "end"
    run_id = recs[0]["run_id"]
    assert re.fullmatch(r"[0-9a-f]{32}", run_id)
    for x in recs:
        assert x["v"] == 0 and x["run_id"] == run_id
    assert set(recs[0]) == {"type", "v", "run_id", "sample_interval_usec", "mode"}
    assert recs[0]["sample_interval_usec"] == 1000 and recs[0]["mode"] == "wall"
    strings, frames, entries = {}, {}, {}
    for x in recs:
        if x["type"] == "string_table":
            assert 0 < len(x["strings"]) <= 256
            for s in x["strings"]:
                assert set(s) == {"str_id", "value"}
                strings[s["str_id"]] = s["value"]
        elif x["type"] == "frame_table":
            assert 0 < len(x["frames"]) <= 256
            for f in x["frames"]:
                assert {"frame_id", "path_str_id", "func_str_id", "line"} <= set(f) <= {
                    "frame_id", "path_str_id", "func_str_id", "line", "end_line", "col", "end_col"}
                frames[f["frame_id"]] = f
        elif x["type"] == "agg":
            assert x["kind"] == "frame" and x["scope"] == "final"
            assert 0 < len(x["entries"]) <= 256
            for e in x["entries"]:
                assert set(e) == {"frame_id", "self", "cumulative"}
                assert e["cumulative"] >= e["self"]
                entries[e["frame_id"]] = e
    assert sorted(strings) == list(range(len(strings)))
    assert sorted(frames) == sorted(entries) == list(range(len(frames)))
    total = recs[-1]["samples_total"]
    assert sum(e["self"] for e in entries.values()) == total
    # The leaf counts by file:function:line, as the collapsed stacks have them.
    leaf = {}
    for line in (tmp_path / "o.txt").read_text().splitlines():
        stack, n = line.rsplit(" ", 1)
        leaf[stack.split(";")[-1]] = leaf.get(stack.split(";")[-1], 0) + int(n)
    assert sum(leaf.values()) == total
    by_line = {}
    for fid, f in frames.items():
        path, func = strings[f["path_str_id"]], strings[f["func_str_id"]]
        key = f"{path}:{func}:{f['line']}" if path != "~" else func
        by_line[key] = by_line.get(key, 0) + entries[fid]["self"]
    assert {k: v for k, v in by_line.items() if v} == leaf


def test_jsonl_samples_times_and_threads(pystrobe, chains, tmp_path):
    """--jsonl-samples: one sample record per sample, times rising from 0 in
    microseconds over the run, the main thread's id and status, stacks of
    defined frame ids (defined before first use)."""
    target = FAST[0] if FAST else TARGETS[0]
    p = chains(target)
    r = run_pystrobe(pystrobe, "attach", "-d", "1.5", "--jsonl", "--jsonl-samples", "-o",
                     tmp_path / "o.jsonl", p.pid)
    assert r.returncode == 0, r.stderr.decode()
    n = int(re.search(rb"Captured (\d+) samples", r.stderr).group(1))
    defined, samples = set(), []
    for x in jsonl_records(tmp_path / "o.jsonl"):
        if x["type"] == "frame_table":
            defined |= {f["frame_id"] for f in x["frames"]}
        elif x["type"] == "sample":
            for th in x["threads"]:
                assert set(th["frames"]) <= defined
            samples.append(x)
    assert len(samples) == n
    times = [s["t_us"] for s in samples]
    assert times == sorted(times) and 0 <= times[0] and times[-1] < 1.5e6 + 1e5
    tids = {th["tid"] for s in samples for th in s["threads"]}
    assert p.pid in tids
    assert any(th["status"] & 32 for s in samples for th in s["threads"] if th["tid"] == p.pid)


# --- Firefox Profiler ---------------------------------------------------------

PROFILER_CLI = ROOT / ".cache" / "profiler-cli" / "package" / "dist" / "profiler-cli.js"


class ProfilerCli:
    """The Firefox Profiler's own importer (npm @firefox-devtools/profiler-cli
    0.10.0, from scripts/install-deps.sh), with a session directory of the
    test's own; its daemon is stopped at the end."""

    def __init__(self, d):
        self.env = dict(os.environ, PROFILER_CLI_SESSION_DIR=str(d))
        self.used = False

    def run(self, *args):
        self.used = True
        return subprocess.run(["node", str(PROFILER_CLI), *args], capture_output=True,
                              env=self.env, timeout=120)

    def load(self, path):
        # On a loaded machine the daemon may miss the client's first 500 ms
        # wait; it still starts, and the next command finds it.
        r = self.run("load", str(path))
        if r.returncode != 0 and b"did not become ready" in r.stderr + r.stdout:
            for _ in range(20):
                time.sleep(0.5)
                info = self.run("profile", "info")
                if info.returncode == 0:
                    return info
        return r

    def stop(self):
        # Only a command starts the daemon: a test that skipped has none.
        if self.used:
            self.run("stop", "--all")


@pytest.fixture
def profiler_cli(tmp_path):
    consumer_only_once()
    if not PROFILER_CLI.exists():
        pytest.fail(f"{PROFILER_CLI} missing: run scripts/install-deps.sh", pytrace=False)
    cli = ProfilerCli(tmp_path / "sessions")
    yield cli
    cli.stop()


def test_gecko_loads_in_the_firefox_profiler(pystrobe, chains, tmp_path, profiler_cli):
    """--gecko: the profiler's importer loads the file; its per-function
    sample counts (self and total) equal pystrobe's pstats counts of the same
    samples; the start is today's date, the thread the target's main thread
    with its pid; the replay writes the same bytes."""
    import json
    import pstats
    target = FAST[0] if FAST else TARGETS[0]
    p = chains(target)
    rec = tmp_path / "rec.pysr"
    gecko = tmp_path / "g.json"
    r = run_pystrobe(pystrobe, "attach", "-d", "2", "--gecko", "-o", gecko, "--record", rec,
                     p.pid)
    assert r.returncode == 0, r.stderr.decode()
    r2 = replay(pystrobe, "--gecko", "-o", tmp_path / "again.json", rec)
    assert r2.returncode == 0 and gecko.read_bytes() == (tmp_path / "again.json").read_bytes()
    assert replay(pystrobe, "--pstats", "-o", tmp_path / "p.pstats", rec).returncode == 0

    r = profiler_cli.load(gecko)
    assert r.returncode == 0, (r.stdout + r.stderr).decode()
    meta = profiler_cli.run("profile", "meta")
    assert meta.returncode == 0
    started = re.search(rb"Started: (\d{4})-", meta.stdout)
    assert started and int(started.group(1)) == time.gmtime().tm_year, meta.stdout.decode()
    info = profiler_cli.run("profile", "info").stdout.decode()
    assert f"[pid {p.pid}]" in info and f"MainThread {p.pid}" in info, info
    s = profiler_cli.run("thread", "samples", "--json", "--limit", "100000")
    assert s.returncode == 0, s.stderr.decode()
    got = json.loads(s.stdout)
    st = pstats.Stats(str(tmp_path / "p.pstats")).stats
    want = {}
    for (file, _line, func), (direct, cumulative, *_rest) in st.items():
        want[f"{file}!{func}" if file != "~" else func] = (direct, cumulative)
    total = {f["name"]: f["totalSamples"] for f in got["topFunctionsByTotal"]}
    self_ = {f["name"]: f["selfSamples"] for f in got["topFunctionsBySelf"]}
    assert total and self_
    for name, n in total.items():
        assert want[name][1] == n, name
    for name, n in self_.items():
        assert want[name][0] == n, name
    assert got["categoryBreakdown"]["totalSamples"] == sum(d for d, _ in want.values())


def test_gecko_markers(pystrobe, spawn, tmp_path, profiler_cli):
    """Thread-state markers as the profiler reads them: the thread spinning
    with the GIL has "Has GIL" intervals, the one asleep in an except block
    "Has exception"; markers lie inside the run."""
    import json
    target = next((t for t in TARGETS if t.name == "sid-3.15"), FAST[0] if FAST else TARGETS[0])
    script = target.stage(WORKLOADS / "modes.py")
    p = spawn(target.argv + ["-B", script], stdout=subprocess.PIPE)
    wait_ready(p)
    gecko = tmp_path / "g.json"
    r = run_pystrobe(pystrobe, "attach", "-d", "2", "--gecko", "-o", gecko, p.pid)
    assert r.returncode == 0, r.stderr.decode()
    d = json.loads(gecko.read_text())
    strings = d["shared"]["stringArray"]
    names = set()
    for th in d["threads"]:
        mk = th["markers"]
        assert mk["length"] == len(mk["name"]) == len(mk["startTime"]) == len(mk["endTime"])
        last = th["samples"]["time"][-1]
        for i in range(mk["length"]):
            assert 0 <= mk["startTime"][i] <= mk["endTime"][i] <= last
            names.add(strings[mk["name"][i]])
    assert {"Has GIL", "Has exception"} <= names, names
    r = profiler_cli.load(gecko)
    assert r.returncode == 0, (r.stdout + r.stderr).decode()
    seen = b""
    for i in range(len(d["threads"])):
        m = profiler_cli.run("thread", "markers", "--thread", f"t-{i}")
        assert m.returncode == 0, m.stderr.decode()
        seen += m.stdout
    assert b"Has GIL" in seen and b"Has exception" in seen, seen.decode()


# --- CPython 3.15's own binary profiles ------------------------------------------

SID = next((t for t in supported_targets() if t.name == "sid-3.15"), None)

# Writes a TACH file with the real _remote_debugging.BinaryWriter (threads,
# repeats, pops and pushes, a <GC> marker, a 300-frame stack), then reads it
# back with the real profiling.sampling BinaryReader into collapsed counts
# (root first, as pystrobe's --no-tid collapsed output names frames).
TACH_SCRIPT = r"""
import json, sys, _remote_debugging as r
from profiling.sampling.binary_reader import BinaryReader
out, comp = sys.argv[1], int(sys.argv[2])
def fr(f, fn, line):
    return r.FrameInfo((f, r.LocationInfo((line, line, 0, 4)), fn, None))
gc = r.FrameInfo(("~", None, "<GC>", None))
w = r.BinaryWriter(out, 1000, 5000000, compression=comp)
t = 5000000
for i in range(3000):
    t += 1000
    main = [fr("/app/m.py", "leaf", 10 + i % 3), fr("/app/m.py", "mid", 20), fr("/app/m.py", "main", 1)]
    if i % 7 == 0:
        main = [gc] + main[1:]
    other = [fr("/app/w.py", "work", 5 + (i // 500))] + [fr("/app/w.py", "rec", 9)] * (300 if i % 11 == 0 else 3)
    w.write_sample([r.InterpreterInfo((0, [r.ThreadInfo((101, 33, main)), r.ThreadInfo((102, 1, other))]))], t)
w.finalize()
class C:
    def __init__(self): self.c = {}
    def collect(self, frames, timestamps_us=None):
        n = len(timestamps_us) if timestamps_us else 1
        for interp in frames:
            for th in interp.threads:
                names = [x.funcname if x.filename == "~" else f"{x.filename}:{x.funcname}:{x.location[0]}"
                         for x in reversed(th.frame_info)]
                k = ";".join(names)
                self.c[k] = self.c.get(k, 0) + n
    def export(self, *a): pass
c = C()
with BinaryReader(out) as rd:
    rd.replay_samples(c)
json.dump(c.c, sys.stdout)
"""


@pytest.mark.skipif(SID is None, reason="no sid-root CPython 3.15")
@pytest.mark.parametrize("comp", [0, 1], ids=["none", "zstd"])
def test_replay_reads_cpython_binary_profiles(pystrobe, tmp_path, comp):
    """A file CPython 3.15's own writer made replays into the stacks its own
    reader finds in it, sample for sample (deep stacks past its 256 cap are
    not in such files; 300 frames are cut by the writer, and both readers
    agree on what it kept)."""
    import json
    host_dir, target_dir = SID.stage_dir()
    try:
        r = SID.run(["-c", TACH_SCRIPT, f"{target_dir}/t.bin", str(comp)], capture_output=True)
        assert r.returncode == 0, r.stderr.decode()
        want = json.loads(r.stdout)
        out = tmp_path / "c.txt"
        r = replay(pystrobe, "--collapsed", "--no-tid", "-o", out, host_dir / "t.bin")
        assert r.returncode == 0, r.stderr.decode()
        assert b"Replayed 6000 samples" in r.stderr
        got = {}
        for line in out.read_text().splitlines():
            k, n = line.rsplit(" ", 1)
            got[k] = got.get(k, 0) + int(n)
        assert got == want
    finally:
        import shutil
        shutil.rmtree(host_dir, ignore_errors=True)


@pytest.mark.skipif(SID is None, reason="no sid-root CPython 3.15")
def test_replay_refuses_a_damaged_cpython_profile(pystrobe, tmp_path):
    host_dir, target_dir = SID.stage_dir()
    try:
        r = SID.run(["-c", TACH_SCRIPT, f"{target_dir}/t.bin", "1"], capture_output=True)
        assert r.returncode == 0, r.stderr.decode()
        data = (host_dir / "t.bin").read_bytes()
    finally:
        import shutil
        shutil.rmtree(host_dir, ignore_errors=True)
    bad = tmp_path / "cut.bin"
    bad.write_bytes(data[:len(data) // 2])
    r = replay(pystrobe, "--collapsed", "-o", tmp_path / "o", bad)
    assert r.returncode == 8
    assert b"CPython binary profile: bad header or footer" in r.stderr


@pytest.mark.parametrize("args,message", [
    (["--compression", "zstd"], b"--compression is for a recording"),
    (["--jsonl-samples"], b"--jsonl-samples goes with --jsonl"),
    (["--binary", "--record", "x.pysr"], b"--binary writes the recording to -o"),
    (["--collapsed", "-o", "same.x", "--record", "same.x"],
     b"-o and --record both name same.x: the profile would replace the recording"),
])
def test_recording_options_misused(pystrobe, args, message):
    """Options that would be ignored are refused (exit 2) before anything
    starts: the reference accepts --compression silently without --binary."""
    r = run_pystrobe(pystrobe, "attach", *args, "1")
    assert r.returncode == 2 and message in r.stderr, r.stderr.decode()


# Where walks once took a torn frame for an entry frame: on an idle machine
# 1% (3.11) and 2-4% (3.14) of samples showed the main thread with no frame
# (fewer under load, when the profiler reads less often).
EMPTY_TARGETS = [t for t in supported_targets() if t.name in ("pyenv-3.11.7", "sid-3.14")]


@pytest.mark.parametrize("target", EMPTY_TARGETS, ids=repr)
def test_busy_thread_never_shown_without_frames(pystrobe, chains, tmp_path, target):
    """A thread that runs Python code at every moment (random_chains.py's
    main thread) is, in each sample, read with its frames or recorded
    unread: never as a thread with no Python frame, which every output
    takes for a thread that left Python (a sample lost silently, neither
    kept nor failed)."""
    p = chains(target)
    rec = tmp_path / "rec.pysr"
    r = run_pystrobe(pystrobe, "attach", "-d", "1.5", "-r", "2000", "--collapsed",
                     "-o", tmp_path / "c.txt", "--record", rec, p.pid)
    assert r.returncode == 0, r.stderr.decode()
    got = recording_format.read(rec)
    kept = [k for k, (_, rc, _) in enumerate(got["samples"]) if rc == 0]
    empty = [k for k in kept if not got["samples"][k][2] and k not in got["unread"]]
    assert len(kept) > 100 and not empty, (len(kept), empty[:10])
