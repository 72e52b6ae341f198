"""tests/tools/record_image, the recorder of the images test_images.c walks
(tools/record_images.sh): with --stopped (a target gdb stopped at the moment
wanted) it records that moment or says why not and exits 1, leaving the
target stopped; it never lets the target go on to record a later moment."""
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import wait_ready
from targets import ROOT, feature_targets

BUILD = Path(os.environ.get("PYSTROBE_BUILD", ROOT / "build"))
RECORDER = BUILD / "tests" / "record_image"
# "ready" from inside spin(): stopped after it, spin is on top.
SPIN = "def spin():\n    print('ready', flush=True)\n    while True: pass\nspin()\n"
TARGETS = [t for t in feature_targets() if t.name == "pyenv-3.12.1"]

pytestmark = pytest.mark.skipif(not TARGETS, reason="no CPython 3.12 target")


def state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def stop(pid):
    """SIGSTOP pid and wait until it is stopped."""
    os.kill(pid, signal.SIGSTOP)
    for _ in range(500):
        if state(pid) == "T":
            return
        time.sleep(0.01)
    pytest.fail(f"process {pid} did not stop")


def record(*args):
    if not RECORDER.exists():
        pytest.fail("%s not built (make, or set PYSTROBE_BUILD)" % RECORDER)
    return subprocess.run([str(RECORDER), *map(str, args)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=60)


@pytest.fixture
def spinner(spawn):
    p = spawn(TARGETS[0].argv + ["-c", SPIN], stdout=subprocess.PIPE)
    assert wait_ready(p) == "ready"
    return p


def test_stopped_moment_that_does_not_fit_fails_at_once(spinner, tmp_path):
    """The stopped moment has spin on top, not the function asked: exit 1
    saying so, no image, the target still stopped (never let go to try a
    later moment)."""
    stop(spinner.pid)
    out = tmp_path / "x.img"
    r = record("--stopped", spinner.pid, f"{out}:no_such_function")
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert "nothing recorded" in err and "no thread's stack starts with" in err, err
    assert not out.exists()
    assert state(spinner.pid) == "T"


def test_stopped_moment_is_recorded(spinner, tmp_path):
    stop(spinner.pid)
    out = tmp_path / "x.img"
    r = record("--stopped", spinner.pid, f"{out}:spin")
    assert r.returncode == 0, r.stderr.decode()
    assert out.stat().st_size > 0
    assert state(spinner.pid) == "T"


def test_not_stopped_is_refused(spinner, tmp_path):
    """--stopped on a running target (gdb missed its breakpoint): exit 1,
    said, nothing recorded."""
    out = tmp_path / "x.img"
    r = record("--stopped", spinner.pid, out)
    err = r.stderr.decode()
    assert r.returncode == 1 and "is not stopped" in err, err
    assert not out.exists()
