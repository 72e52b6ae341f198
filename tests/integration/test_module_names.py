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
