"""Command-line habits of the reference: options after attach's PID,
everything after run's script belongs to the script, --no-summary (warnings
still shown) and --browser (the HTML output opened by $BROWSER)."""
import os
import sys
import time

import pytest

from conftest import run_pystrobe
from targets import supported_targets

TARGET = next((t for t in supported_targets() if t.chroot is None), None)
DEEP_CODE = ("import sys, time\nsys.setrecursionlimit(10000)\n"
             "def down(n):\n    return down(n - 1) if n else time.sleep(600)\n"
             "print('ready', flush=True)\ndown(100)\n")


@pytest.fixture
def sleeper(python_sleeper):
    if TARGET is None:
        pytest.skip("no interpreter outside a chroot")
    proc, _ = python_sleeper(TARGET)
    return proc


def test_attach_options_after_pid(pystrobe, sleeper, tmp_path):
    out = tmp_path / "after.txt"
    res = run_pystrobe(pystrobe, "attach", sleeper.pid, "-d", "0.3", "--collapsed", "-o", out)
    assert res.returncode == 0, res.stderr.decode()
    assert "time.sleep" in out.read_text() or "<module>" in out.read_text()
    # a second operand is still an error
    res = run_pystrobe(pystrobe, "attach", sleeper.pid, "-d", "0.3", "7")
    assert res.returncode == 2 and b"exactly one process id" in res.stderr


def test_run_script_owns_what_follows(pystrobe, tmp_path):
    if TARGET is None:
        pytest.skip("no interpreter outside a chroot")
    script = tmp_path / "args.py"
    seen = tmp_path / "argv.txt"
    script.write_text("import sys, time\n"
                      f"open({str(seen)!r}, 'w').write(repr(sys.argv[1:]))\n"
                      "time.sleep(0.3)\n")
    res = run_pystrobe(pystrobe, "run", "--python", TARGET.argv[0], "--collapsed", "-o",
                       tmp_path / "run.txt", script, "-d", "0.01", "--flamegraph", "-o", "x")
    assert res.returncode == 0, res.stderr.decode()
    assert seen.read_text() == repr(["-d", "0.01", "--flamegraph", "-o", "x"])
    assert (tmp_path / "run.txt").exists() and not (tmp_path / "x").exists()


def test_no_summary_keeps_warnings(pystrobe, python_sleeper, tmp_path):
    if TARGET is None:
        pytest.skip("no interpreter outside a chroot")
    proc, _ = python_sleeper(TARGET, DEEP_CODE)
    out = tmp_path / "deep.txt"
    res = run_pystrobe(pystrobe, "attach", proc.pid, "-d", "0.3", "--max-frames", "16",
                       "--collapsed", "-o", out, "--no-summary")
    err = res.stderr.decode()
    assert res.returncode == 0, err
    assert "Captured" not in err and "Sample rate" not in err and "Failed samples" not in err, err
    assert "Truncated samples" in err, err
    res = run_pystrobe(pystrobe, "attach", proc.pid, "-d", "0.3", "--collapsed", "-o", out)
    assert "Captured" in res.stderr.decode()


def test_browser_opens_html(pystrobe, sleeper, tmp_path):
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {opened}.tmp && mv {opened}.tmp {opened}\n")
    browser.chmod(0o755)
    out = tmp_path / "fg.html"
    res = run_pystrobe(pystrobe, "attach", sleeper.pid, "-d", "0.3", "--flamegraph", "-o", out,
                       "--browser", env={"BROWSER": f"{browser}:firefox"})
    assert res.returncode == 0, res.stderr.decode()
    deadline = time.monotonic() + 30
    while not opened.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert opened.read_text().splitlines() == [str(out.resolve())]


def test_browser_opens_heatmap_index(pystrobe, sleeper, tmp_path):
    """A heatmap is a directory of pages: its index.html is opened."""
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {opened}.tmp && mv {opened}.tmp {opened}\n")
    browser.chmod(0o755)
    out = tmp_path / "hm"
    res = run_pystrobe(pystrobe, "attach", sleeper.pid, "-d", "0.3", "--heatmap", "-o", out,
                       "--browser", env={"BROWSER": str(browser)})
    assert res.returncode == 0, res.stderr.decode()
    deadline = time.monotonic() + 30
    while not opened.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    index = out.resolve() / "index.html"
    assert index.is_file() and opened.read_text().splitlines() == [str(index)]


def test_browser_missing_is_a_warning(pystrobe, sleeper, tmp_path):
    out = tmp_path / "fg.html"
    res = run_pystrobe(pystrobe, "attach", sleeper.pid, "-d", "0.2", "--flamegraph", "-o", out,
                       "--browser", env={"BROWSER": str(tmp_path / "no-such-browser")})
    assert res.returncode == 0 and out.exists()
    assert b"--browser: cannot run" in res.stderr


def test_browser_needs_html(pystrobe, sleeper):
    res = run_pystrobe(pystrobe, "attach", sleeper.pid, "-d", "0.2", "--collapsed", "--browser")
    assert res.returncode == 2 and b"--browser" in res.stderr
