"""Time attach (pys_session_attach + pys_session_free) on a target that maps
many shared libraries, and on one that maps few; then on the many-library
target renamed (python3.12 copied as myapp, libpython3.12 as libmyrt), where
no file name says python and attach has to look into every file.

    /usr/bin/python3 bench/attach_time.py [--build DIR ...] [--libs N] [--runs R]

The target is pyenv's 3.12 loading N libraries from /usr/lib/x86_64-linux-gnu
with ctypes (sanitizer runtimes and a few with side effects left out), then
spinning. Each build's libpystrobe.so attaches R times, interleaved with the
other builds; the median wall and CPU time (of this process: attach
waits for nothing, so on a busy machine CPU time is the steadier figure) per
build is printed, with each build's ratio to the first build that attached.
"""
import argparse
import ctypes
import os
import statistics
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = r"""
import ctypes, glob, os, sys
skip = ("asan", "tsan", "lsan", "ubsan", "SegFault", "memusage", "pcprofile",
        "malloc_debug", "vtv", "libpthread", "libGL", "libEGL", "gtk", "gdk")
n = 0
for p in sorted(glob.glob("/usr/lib/x86_64-linux-gnu/lib*.so.*[0-9]")):
    if n >= int(sys.argv[1]):
        break
    if os.path.islink(p) or any(s in p for s in skip):
        continue
    try:
        ctypes.CDLL(p, mode=os.RTLD_LAZY | os.RTLD_LOCAL)
        n += 1
    except OSError:
        pass
files = set(l.split(None, 5)[5].strip() for l in open("/proc/self/maps")
            if len(l.split(None, 5)) == 6 and l.split(None, 5)[5].startswith("/"))
print(n, len(files), flush=True)
while True:
    pass
"""


def pyenv_prefix():
    out = subprocess.run(["pyenv", "prefix", "3.12.1"], capture_output=True, text=True,
                         check=True).stdout.strip()
    return Path(out)


def renamed_python(d):
    """python3.12 as d/bin/myapp with its libpython as d/lib/libmyrt.so.1.0:
    (argv prefix, environment)."""
    prefix = pyenv_prefix()
    (d / "bin").mkdir()
    (d / "lib").mkdir()
    shutil.copy2(prefix / "bin" / "python3.12", d / "bin" / "myapp")
    shutil.copy2(prefix / "lib" / "libpython3.12.so.1.0", d / "lib" / "libmyrt.so.1.0")
    (d / "lib" / "libpython3.12.so.1.0").symlink_to("libmyrt.so.1.0")
    return [str(d / "bin" / "myapp")], {"LD_LIBRARY_PATH": str(d / "lib"),
                                         "PYTHONHOME": str(prefix)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", action="append", default=None)
    ap.add_argument("--libs", type=int, default=400)
    ap.add_argument("--runs", type=int, default=30)
    a = ap.parse_args()
    builds = a.build or [str(ROOT / "build")]
    libs = []
    for b in builds:
        lib = ctypes.CDLL(str(Path(b) / "libpystrobe.so"))
        lib.pys_session_attach.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                                           ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        lib.pys_session_free.argtypes = [ctypes.c_void_p]
        libs.append(lib)
    tmp = Path(tempfile.mkdtemp(prefix="pystrobe-attach-time-"))
    named = ([str(pyenv_prefix() / "bin" / "python3.12")], {})
    renamed = renamed_python(tmp)
    for (argv, env), nlibs, what in ((named, 0, "python3.12"), (named, a.libs, "python3.12"),
                                     (renamed, a.libs, "renamed")):
        p = subprocess.Popen(argv + ["-c", TARGET, str(nlibs)], stdout=subprocess.PIPE,
                             text=True, env=dict(os.environ, **env))
        try:
            loaded, files = p.stdout.readline().split()
            times = [[] for _ in builds]
            failed = [None for _ in builds]
            cpu = [[] for _ in builds]
            err = ctypes.create_string_buffer(512)
            for _ in range(a.runs):
                for i, lib in enumerate(libs):
                    s = ctypes.c_void_p()
                    c0, t0 = time.process_time(), time.perf_counter()
                    rc = lib.pys_session_attach(ctypes.byref(s), p.pid, None, err, 512)
                    t1, c1 = time.perf_counter(), time.process_time()
                    lib.pys_session_free(s)
                    if rc != 0:
                        failed[i] = err.value.decode()
                    times[i].append(t1 - t0)
                    cpu[i].append(c1 - c0)
            print(f"target {what}: {loaded} libraries loaded, {files} files mapped")
            base = None
            for b, t, c, f in zip(builds, times, cpu, failed):
                if f:
                    print(f"  {b}: attach failed: {f}")
                    continue
                m, mc = statistics.median(t), statistics.median(c)
                base = base or (m, mc)
                print(f"  {b}: median over {a.runs}: {m * 1e3:.3f} ms wall "
                      f"({m / base[0]:.2f}x), {mc * 1e3:.3f} ms CPU ({mc / base[1]:.2f}x)")
        finally:
            p.kill()
            p.wait()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
