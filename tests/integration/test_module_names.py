"""The module's long names and large line tables as the reference gives
them: a frame whose qualified name and file name have 2,000 characters
comes back from pystrobe's RemoteUnwinder as from CPython 3.15's
_remote_debugging, both cut at 1,024 characters (docs/python.md), and a
frame of code whose line table is over 64 KiB gets location None; from
get_stack_trace() and from the asyncio calls (coroutine frames), on the
same stopped target."""
from test_module import (Stopped, compare_results, procs, py315, side_by_side,  # noqa: F401
                         sid_root, module_dir, start_python, target_315)

NAME = "q" * 2000
FILE = "/tmp/" + "f" * 2000 + ".py"
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


# Coroutines of asyncio tasks (get_all_awaited_by): one with the long names,
# one whose line table is over the limit, a task that finished (kept
# referenced) and one never started (its loop never runs).
ASYNC = r"""
import asyncio
NAME, FILE = @NAME@, @FILE@
def body(n):
    return "".join("    x = 1\n" for _ in range(n))
src = ("async def " + NAME + "(ev):\n    await ev.wait()\n"
       "async def big(ev):\n" + body(14000) + "    await ev.wait()\n"
       "async def quick():\n    return 1\n")
ns = {}
exec(compile(src, FILE, "exec"), ns)
async def main():
    ev = asyncio.Event()
    tasks = [asyncio.create_task(ns[NAME](ev), name="long"),
             asyncio.create_task(ns["big"](ev), name="big"),
             asyncio.create_task(ns["quick"](), name="done")]
    await tasks[-1]
    tasks.append(asyncio.new_event_loop().create_task(ns[NAME](ev), name="unstarted"))
    await asyncio.sleep(0)
    asyncio.get_running_loop().call_soon(lambda: print("ready", flush=True))
    await asyncio.sleep(3600)
asyncio.run(main())
""".replace("@NAME@", repr(NAME)).replace("@FILE@", repr(FILE))


def test_315_async_names_and_line_table_as_reference(py315, procs):  # noqa: F811
    p = start_python(target_315(), ASYNC, procs)
    with Stopped(p.pid):
        ours, ref = py315.run([{"module": m, "pid": p.pid, "call": "get_all_awaited_by"}
                               for m in ("pystrobe", "_remote_debugging")])
    assert "ok" in ours and "ok" in ref, (ours, ref)
    ours, ref = ours["ok"], ref["ok"]
    t_ours = {t[1]: t for i in ours for t in i[1]}
    t_ref = {t[1]: t for i in ref for t in i[1]}
    assert sorted(t_ours) == sorted(t_ref)
    for name in t_ref:
        assert t_ours[name] == t_ref[name], name
    assert ours == ref
    stack = t_ours["long"][2][0][0]
    assert any(f[2] == "q" * 1024 and f[0] == FILE[:1024] for f in stack), stack
    big = [f for f in t_ours["big"][2][0][0] if f[2] == "big"]
    assert len(big) == 1 and big[0][1] is None, big
