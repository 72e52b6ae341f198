"""Bytes per sample of pystrobe's recording against CPython 3.15's own
binary format (TACH) on the same samples: the samples of a pystrobe
recording are written again with the real `_remote_debugging.BinaryWriter`
(zstd, as `--binary` writes) in the sid root, and both sizes printed.

    /usr/bin/python3 bench/recording_size.py FILE.pysr

Needs root (chroot) and the sid root (make sidroot)."""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
import recording_format  # noqa: E402

ROOT = REPO / ".cache" / "sid-root"
WRITE = r"""
import json, sys, _remote_debugging as r
d = json.load(open(sys.argv[1]))
w = r.BinaryWriter(sys.argv[2], d["interval_us"], d["start_us"], compression=1)
for t, threads in d["samples"]:
    ths = []
    for tid, status, frames in threads:
        fr = [r.FrameInfo((f[0], r.LocationInfo(tuple(f[2:6])) if f[6] == 0 else None, f[1], None))
              for f in frames]
        ths.append(r.ThreadInfo((tid, status, fr)))
    w.write_sample([r.InterpreterInfo((0, ths))], t)
w.finalize()
"""


def main():
    rec = Path(sys.argv[1])
    d = recording_format.read(rec)
    samples = [(t // 1000, [(tid, st, [list(f[:7]) for f in frames])
                            for tid, _, st, frames in ths]) for t, _, ths in d["samples"]]
    tmp = Path(tempfile.mkdtemp(dir=ROOT / "tmp"))
    try:
        (tmp / "s.json").write_text(json.dumps({
            "interval_us": d["meta"]["interval_ns"] // 1000,
            "start_us": d["meta"]["start_monotonic_ns"] // 1000, "samples": samples}))
        inside = "/" + str(tmp.relative_to(ROOT))
        subprocess.run(["chroot", str(ROOT), "/usr/bin/python3.15", "-c", WRITE,
                        f"{inside}/s.json", f"{inside}/ref.bin"], check=True)
        ref = (tmp / "ref.bin").stat().st_size
    finally:
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()
    n = len(samples)
    ours = rec.stat().st_size
    print(f"samples {n}: pystrobe {ours} bytes ({ours / n:.2f} per sample), "
          f"CPython 3.15 TACH {ref} bytes ({ref / n:.2f} per sample), ratio {ours / ref:.2f}")


if __name__ == "__main__":
    main()
