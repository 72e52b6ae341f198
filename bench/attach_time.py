"""Time attach (pys_session_attach + pys_session_free) on a target that maps
many shared libraries, and on one that maps few.

    /usr/bin/python3 bench/attach_time.py [--build DIR ...] [--libs N] [--runs R]

The target is pyenv's 3.12 loading N libraries from /usr/lib/x86_64-linux-gnu
with ctypes (sanitizer runtimes and a few with side effects left out), then
spinning. Each build's libpystrobe.so attaches R times, interleaved with the
other builds; the median per build is printed, and each build's ratio to the
first build.
"""
import argparse
import ctypes
import statistics
import subprocess
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


def pyenv_python():
    out = subprocess.run(["pyenv", "prefix", "3.12.1"], capture_output=True, text=True,
                         check=True).stdout.strip()
    return Path(out) / "bin" / "python3.12"


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
    for nlibs in (0, a.libs):
        p = subprocess.Popen([str(pyenv_python()), "-c", TARGET, str(nlibs)],
                             stdout=subprocess.PIPE, text=True)
        try:
            loaded, files = p.stdout.readline().split()
            times = [[] for _ in builds]
            err = ctypes.create_string_buffer(512)
            for _ in range(a.runs):
                for i, lib in enumerate(libs):
                    s = ctypes.c_void_p()
                    t0 = time.perf_counter()
                    rc = lib.pys_session_attach(ctypes.byref(s), p.pid, None, err, 512)
                    t1 = time.perf_counter()
                    lib.pys_session_free(s)
                    if rc != 0:
                        raise SystemExit(f"{builds[i]}: attach failed: {err.value.decode()}")
                    times[i].append(t1 - t0)
            base = statistics.median(times[0])
            print(f"target: {loaded} libraries loaded, {files} files mapped")
            for b, t in zip(builds, times):
                m = statistics.median(t)
                print(f"  {b}: median {m * 1e3:.3f} ms over {a.runs} ({m / base:.2f}x)")
        finally:
            p.kill()
            p.wait()


if __name__ == "__main__":
    main()
