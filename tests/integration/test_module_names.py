"""The module's long names as the reference gives them: a frame whose
qualified name has 2,000 characters and whose file name has 1,505 comes
back from pystrobe's RemoteUnwinder as from CPython 3.15's
_remote_debugging, both cut at 1,024 characters (docs/python.md), on the
same stopped target."""
from test_module import (Stopped, compare_results, procs, py315, side_by_side,  # noqa: F401
                         sid_root, module_dir, start_python, target_315)

NAME = "q" * 2000
FILE = "/tmp/" + "f" * 1500 + ".py"
CODE = f"""
import time
src = "def {NAME}():\\n    print('ready', flush=True)\\n    time.sleep(600)\\n{NAME}()\\n"
exec(compile(src, {FILE!r}, "exec"))
"""


def test_315_long_names_as_reference(py315, procs):  # noqa: F811
    p = start_python(target_315(), CODE, procs)
    with Stopped(p.pid):
        results = side_by_side(py315, p.pid, [{}])
    (opts, ours, ref), = results
    assert not compare_results(ours, ref, opts, "long names")
    frames = [f for i in ours for t in i[1] for f in t[2]]
    assert any(f[2] == "q" * 1024 for f in frames), frames
    assert any(f[0] == FILE[:1024] for f in frames), frames


# Line tables on either side of the reference's limit (64 KiB): 13,000
# one-statement lines take 65,022 bytes, 14,000 take 70,022. The smaller
# one's frame keeps its location; the larger one's frames, one stopped at
# the start of its table (a thread) and one at its end (the main thread),
# get location None from the reference, and from pystrobe's module.
BIG = r"""
import threading, time
def body(n):
    return "".join("    x = 1\n" for _ in range(n))
src = ("def under(ev):\n    ev.set()\n    time.sleep(600)\n" + body(13000) +
       "def early(ev):\n    ev.set()\n    time.sleep(600)\n" + body(14000) +
       "def late():\n" + body(14000) + "    print('ready', flush=True)\n    time.sleep(600)\n")
ns = {"time": time}
exec(compile(src, "/tmp/big_linetable.py", "exec"), ns)
for name in ("under", "early"):
    ev = threading.Event()
    threading.Thread(target=ns[name], args=(ev,), daemon=True).start()
    ev.wait()
ns["late"]()
"""


def test_315_large_line_table_as_reference(py315, procs):  # noqa: F811
    p = start_python(target_315(), BIG, procs)
    with Stopped(p.pid):
        results = side_by_side(py315, p.pid, [{"all_threads": True}])
    (opts, ours, ref), = results
    assert not compare_results(ours, ref, opts, "large line table")
    frames = {f[2]: f for i in ours for t in i[1] for f in t[2]}
    assert frames["under"][1] is not None, frames["under"]
    assert frames["early"][1] is None and frames["late"][1] is None, frames
