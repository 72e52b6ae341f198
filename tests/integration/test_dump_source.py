"""dump shows each frame's source line, read as the target sees its files
(/proc/PID/root: the sid targets run in a chroot), with carets under the
executing range where the version has columns (3.11+); a line that cannot be
read is left out; --no-source turns it off."""
import re
import subprocess
import time

import pytest

from conftest import run_pystrobe, wait_ready

# The main thread waits in a call whose range is known; a non-ASCII string
# before it checks that carets count characters, not bytes. `hidden` runs
# code compiled under a file name that does not exist.
SCRIPT = '''import time
def waiter():
    label = "\u00e9t\u00e9\u2014"; x = label + str(time.sleep(600))
def hidden():
    exec(compile("waiter()\\n", "/nonexistent/pystrobe/gone.py", "exec"))
print("ready", flush=True)
hidden()
'''
CALL = "time.sleep(600)"
WAIT_LINE = 'label = "\u00e9t\u00e9\u2014"; x = label + str(time.sleep(600))'
FRAME = re.compile(r'^    File "(.*)", line (\d+), in (\S+)')


def dump_lines(pystrobe, pid, *opts):
    res = run_pystrobe(pystrobe, "dump", *opts, pid)
    assert res.returncode == 0, res.stderr.decode(errors="replace")
    return res.stdout.decode("utf-8").splitlines()


def after(lines, qualname):
    """The lines between the frame line of qualname and the next frame line."""
    for i, line in enumerate(lines):
        m = FRAME.match(line)
        if m and m.group(3) == qualname:
            rest = []
            for nxt in lines[i + 1:]:
                if FRAME.match(nxt) or nxt.startswith("  Thread"):
                    break
                rest.append(nxt)
            return rest
    pytest.fail(f"no frame {qualname}:\n" + "\n".join(lines))


def test_dump_source_lines(pystrobe, target, spawn, tmp_path):
    script = tmp_path / "source_target.py"
    script.write_text(SCRIPT, encoding="utf-8")
    path = target.stage(script)
    p = spawn(target.argv + [path], stdout=subprocess.PIPE)
    wait_ready(p)
    # "ready" comes before the call into waiter: dump until it is there
    deadline = time.monotonic() + 30
    while True:
        lines = dump_lines(pystrobe, p.pid)
        if any(" in waiter " in line for line in lines) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    got = after(lines, "waiter")
    assert got[0] == "      " + WAIT_LINE, got
    if target.version >= (3, 11):
        col = WAIT_LINE.index(CALL)
        assert got[1:] == ["      " + " " * col + "^" * len(CALL)], got
    else:
        assert got[1:] == [], got
    assert after(lines, "hidden")[0] == '      exec(compile("waiter()\\n", ' \
        '"/nonexistent/pystrobe/gone.py", "exec"))'
    # the frame of the file that does not exist has no source line
    assert after(lines, "<module>")[0].strip() in ("hidden()",)
    gone = [i for i, line in enumerate(lines) if "gone.py" in line]
    assert gone and FRAME.match(lines[gone[0] + 1]), lines
    # --no-source: frame lines only
    plain = dump_lines(pystrobe, p.pid, "--no-source")
    assert not any(line.startswith("      ") for line in plain), plain
