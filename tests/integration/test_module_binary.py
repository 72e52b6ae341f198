"""The module's BinaryReader and zstd_available (the API of CPython 3.15's
_remote_debugging, docs/python.md), over pystrobe's reader of CPython's
binary profiles (output/tach.c), from the host's Python: a profile CPython
3.15's own profiler takes of a real target in the sid root, read by the
real _remote_debugging.BinaryReader there and by pystrobe's here, gives the
same metadata and the same samples."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from targets import ROOT, supported_targets

BUILD = Path(os.environ.get("PYSTROBE_BUILD", ROOT / "build"))
MODULE_DIR = BUILD / "python"
WORKLOAD = ROOT / "tests" / "integration" / "workloads" / "diff_target.py"
SID = next((t for t in supported_targets() if t.name == "sid-3.15"), None)
pytestmark = pytest.mark.skipif(SID is None, reason="no sid-root CPython 3.15")

# Read with the real module: its get_info() and {stack: samples}, stacks as
# "file:func:line;..." outermost first, a status and a timestamp each.
READ_REAL = r"""
import json, sys
import _remote_debugging as r
class C:
    def __init__(self): self.c, self.n, self.ts = {}, 0, []
    def collect(self, frames, timestamps_us=None):
        for interp in frames:
            for th in interp.threads:
                k = ";".join(f"{x.filename}:{x.funcname}:{x.location[0] if x.location else '-'}"
                             for x in reversed(th.frame_info)) + f"|{th.status}"
                self.c[k] = self.c.get(k, 0) + len(timestamps_us)
                self.ts.extend(timestamps_us)
rd = r.BinaryReader(sys.argv[1])
c = C()
n = rd.replay(c)
info = rd.get_info()
info["python_version"] = list(info["python_version"])
json.dump({"n": n, "info": info, "stacks": c.c, "ts": sorted(c.ts)}, sys.stdout)
"""


class Collector:
    def __init__(self):
        self.c, self.ts = {}, []

    def collect(self, frames, timestamps_us=None):
        for interp in frames:
            for th in interp.threads:
                k = ";".join(f"{x.filename}:{x.funcname}:{x.location[0] if x.location else '-'}"
                             for x in reversed(th.frame_info)) + f"|{th.status}"
                self.c[k] = self.c.get(k, 0) + len(timestamps_us)
                self.ts.extend(timestamps_us)


@pytest.fixture(scope="module")
def mod():
    so = MODULE_DIR / "pystrobe" / "_pystrobe.abi3.so"
    if not so.is_file():
        pytest.fail(f"{so} not found: make module", pytrace=False)
    sys.path.insert(0, str(MODULE_DIR))
    try:
        import pystrobe
    finally:
        sys.path.remove(str(MODULE_DIR))
    return pystrobe


@pytest.fixture(scope="module")
def sid_proc():
    """/proc mounted in the sid root (the reference profiler reads
    /proc/PID/maps); unmounted at teardown if mounted here."""
    root = SID.chroot
    env = dict(os.environ, PYSTROBE_SIDROOT=str(root)) if root else None
    mounted_here = root is not None and not os.path.ismount(Path(root) / "proc")
    if mounted_here:
        subprocess.run([str(ROOT / "scripts" / "sidroot.sh"), "mount"], check=True, env=env)
    try:
        yield
    finally:
        if mounted_here:
            subprocess.run([str(ROOT / "scripts" / "sidroot.sh"), "umount"], env=env)


@pytest.fixture(scope="module", params=["none", "zstd"])
def cpython_profile(request, sid_proc):
    """(host path, what the real reader found) of a binary profile
    CPython 3.15's profiler took of diff_target.py (2 s), compressed or not."""
    host_dir, target_dir = SID.stage_dir()
    script = SID.stage(WORKLOAD)
    r = SID.run(["-m", "profiling.sampling", "run", "-d", "2", "-r", "2000", "--binary",
                 "--compression", request.param, "-o", f"{target_dir}/t.bin", script, "base"],
                capture_output=True, timeout=120)
    assert (Path(host_dir) / "t.bin").stat().st_size > 200, r.stderr.decode()[-2000:]
    r = SID.run(["-c", READ_REAL, f"{target_dir}/t.bin"], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    yield Path(host_dir) / "t.bin", json.loads(r.stdout)
    shutil.rmtree(host_dir, ignore_errors=True)


def test_reader_gives_what_cpython_reads(mod, cpython_profile):
    path, want = cpython_profile
    assert want["n"] > 100
    with mod.BinaryReader(str(path)) as rd:
        info = rd.get_info()
        info["python_version"] = list(info["python_version"])
        assert info == want["info"]
        assert rd.sample_count == want["info"]["sample_count"] == want["n"]
        assert rd.sample_interval_us == want["info"]["sample_interval_us"] == 500
        c = Collector()
        progress = []
        assert rd.replay(c, lambda cur, total: progress.append((cur, total))) == want["n"]
        assert rd.get_stats()["total_samples"] == want["n"]
    assert c.c == want["stacks"]
    assert sorted(c.ts) == want["ts"]
    assert progress[-1] == (want["n"], want["n"])
    assert any("diff_target.py:old_only:" in k for k in c.c)


def test_zstd_available(mod):
    assert mod.zstd_available() is True


def test_reader_refuses_damage(mod, cpython_profile, tmp_path):
    path, _ = cpython_profile
    data = path.read_bytes()
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"JUNK" + data[4:])
    with pytest.raises(ValueError, match="Invalid magic number"):
        mod.BinaryReader(str(bad))
    bad.write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError):
        mod.BinaryReader(str(bad)).replay(Collector())
    with pytest.raises(FileNotFoundError):
        mod.BinaryReader(str(tmp_path / "missing.bin"))

    class Boom:
        def collect(self, frames, timestamps_us=None):
            raise KeyError("from the collector")
    with pytest.raises(KeyError, match="from the collector"):
        mod.BinaryReader(str(path)).replay(Boom())


@pytest.fixture(scope="module")
def host_target():
    t = next((t for t in supported_targets() if t.name == "pyenv-3.12.1"), None)
    if t is None:
        pytest.skip("no pyenv 3.12.1")
    p = subprocess.Popen(t.argv + [str(WORKLOAD), "new"], stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline().strip() == b"ready"
        yield p
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("compression", [0, 1], ids=["none", "zstd"])
def test_writer_files_read_by_cpython(mod, host_target, sid_proc, compression):
    """Samples of a real target (RemoteUnwinder, opcodes on), written with
    BinaryWriter from the host's Python: CPython 3.15's own BinaryReader
    finds the same stacks, statuses and timestamps, and its get_info() the
    header, mode, features and stats that were written; pystrobe's reader
    and `pystrobe replay` read the file too."""
    host_dir, target_dir = SID.stage_dir()
    try:
        u = mod.RemoteUnwinder(host_target.pid, all_threads=True, opcodes=True)
        path = Path(host_dir) / "w.bin"
        want, ts = {}, []
        with mod.BinaryWriter(str(path), 1000, 7_000_000, compression=compression, mode=1,
                              capture_features=0b101) as w:
            t = 7_000_000
            for i in range(300):
                t += 1000 + i % 3
                stack = u.get_stack_trace()
                w.write_sample(stack, t)
                for interp in stack:
                    for th in interp.threads:
                        k = ";".join(f"{x.filename}:{x.funcname}:{x.location[0] if x.location else '-'}"
                                     for x in reversed(th.frame_info)) + f"|{th.status}"
                        want[k] = want.get(k, 0) + 1
                        ts.append(t)
            w.set_stats(0.3, 1000.0, missed_samples=2.0)
            assert w.total_samples == len(ts)
        r = SID.run(["-c", READ_REAL, f"{target_dir}/w.bin"], capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr.decode()
        got = json.loads(r.stdout)
        assert got["n"] == len(ts)
        assert got["stacks"] == want
        assert got["ts"] == sorted(ts)
        info = got["info"]
        assert info["sample_interval_us"] == 1000 and info["start_time_us"] == 7_000_000
        assert info["compression_type"] == compression
        assert info["mode"] == 1 and info["capture_features"] == 0b101
        assert info["duration_sec"] == 0.3 and info["sample_rate"] == 1000.0
        assert info["missed_samples"] == 2.0 and info["error_rate"] is None
        assert any("diff_target.py:spin:" in k for k in want), want
        c = Collector()
        with mod.BinaryReader(str(path)) as rd:
            assert rd.replay(c) == len(ts)
        assert c.c == want
    finally:
        shutil.rmtree(host_dir, ignore_errors=True)
