"""A Python process at a known, perfectly still stack, for `pystrobe dump`.

    python stack_target.py REPORT_PATH

Starts one thread per kind of frame chain a stack walker must handle, lets
each of them (and the main thread) block forever in threading.Event().wait()
(no timeout, so nothing moves), then a reporter thread writes to REPORT_PATH
what this interpreter says about itself: for every thread but the reporter,
its ids and status and its frames from sys._current_frames(), outermost
first, with the same fields `pystrobe dump --json` prints. The report is
written atomically (temporary file, then rename) and the reporter thread
then exits, so once its TID has left /proc/PID/task the threads pystrobe sees
are exactly those in the report.

The threads, by tag:
  main       the main thread
  gen        a generator being iterated by a for loop, blocking in its body
  coro       a coroutine run by asyncio.run(), awaiting a coroutine that blocks
  nested     Outer.Inner.method
  lambda     a lambda
  unicode    função_λ in módulo_ünï.py (module written next to the report)
  recursion  200 frames of one recursive function
  except     blocking inside an `except ValueError:` block

Runs on CPython 3.8 and later: co_qualname (3.11) falls back to co_name and
co_positions (3.11) to None.
"""
import asyncio
import importlib
import json
import os
import sys
import threading
import time

sys.dont_write_bytecode = True

RECURSION_DEPTH = 200
# The non-ASCII names, spelled with escapes so that this file's own encoding
# and normalisation cannot change them.
UNICODE_MODULE = "m\u00f3dulo_\u00fcn\u00ef"
UNICODE_FUNCTION = "fun\u00e7\u00e3o_\u03bb"
# How long the reporter waits for every thread to be still.
READY_TIMEOUT = 20.0
POLL_INTERVAL = 0.02
STILL_POLLS = 5          # consecutive identical snapshots required

# ident -> {"tag", "native_thread_id"}, filled by each thread before it blocks.
REGISTERED = {}
REGISTERED_LOCK = threading.Lock()
EXPECTED_TAGS = ["main", "gen", "coro", "nested", "lambda", "unicode",
                 "recursion", "except"]
# Function that calls threading.Event().wait() in each thread.
FINAL_CALLER = {tag: "block" for tag in EXPECTED_TAGS}
FINAL_CALLER["unicode"] = UNICODE_FUNCTION
# Thread idents in the order their thread states were created (main first).
START_ORDER = []


def native_id():
    """The thread's kernel id: threading.get_native_id (3.8+), else gettid
    (3.7; 186 is its x86-64 system call number)."""
    if hasattr(threading, "get_native_id"):
        return threading.get_native_id()
    import ctypes
    return ctypes.CDLL(None, use_errno=True).syscall(186)


def register(tag):
    with REGISTERED_LOCK:
        REGISTERED[threading.get_ident()] = {"tag": tag, "native_thread_id": native_id()}


def block():
    return threading.Event().wait()


# --- the threads --------------------------------------------------------------

def gen():
    block()
    yield 1


def thread_gen():
    register("gen")
    for _ in gen():
        pass


async def coro_inner():
    return block()


async def coro_main():
    return await coro_inner()


def thread_coro():
    register("coro")
    asyncio.run(coro_main())


class Outer:
    class Inner:
        def method(self):
            return block()


def thread_nested():
    register("nested")
    Outer.Inner().method()


def thread_lambda():
    register("lambda")
    f = lambda: block()  # noqa: E731 (the lambda is the point)
    f()


def thread_unicode(module_dir):
    register("unicode")
    sys.path.insert(0, module_dir)
    module = importlib.import_module(UNICODE_MODULE)
    getattr(module, UNICODE_FUNCTION)()


def recurse(n):
    if n > 1:
        return recurse(n - 1)
    return block()


def thread_recursion():
    register("recursion")
    recurse(RECURSION_DEPTH)


def thread_except():
    register("except")
    try:
        raise ValueError("expected")
    except ValueError:
        block()


def write_unicode_module(directory):
    path = os.path.join(directory, UNICODE_MODULE + ".py")
    with open(path, "w", encoding="utf-8") as f:
        f.write("# A module whose file and function names are not ASCII.\n"
                "import threading\n"
                "\n"
                "\n"
                "def %s():\n"
                "    return threading.Event().wait()\n" % UNICODE_FUNCTION)


# --- the report ---------------------------------------------------------------

def _condition_wait_block_line():
    """Line of the blocking `waiter.acquire()` in Condition.wait, or None."""
    try:
        import inspect
        lines, first = inspect.getsourcelines(threading.Condition.wait)
    except (OSError, TypeError):
        return None
    for i in range(len(lines) - 1):
        if (lines[i].strip() == "if timeout is None:"
                and lines[i + 1].strip() == "waiter.acquire()"):
            return first + i + 1
    return None


BLOCK_LINE = _condition_wait_block_line()


def qualname(code):
    return getattr(code, "co_qualname", code.co_name)


def positions(code, lasti, f_lineno):
    if not hasattr(code, "co_positions"):
        # Before 3.11 a frame has a line and no columns.
        return (f_lineno, f_lineno, None, None)
    if lasti < 0:
        return (None, None, None, None)
    pos = list(code.co_positions())
    i = lasti // 2
    return tuple(pos[i]) if i < len(pos) else (None, None, None, None)


def chain(frame):
    """The frames from frame outwards, innermost first."""
    out = []
    while frame is not None and len(out) < 10000:
        out.append(frame)
        frame = frame.f_back
    return out


def blocked_problem(tag, frames):
    """Why this thread is not at its final blocking call, or None."""
    if len(frames) < 3:
        return "%s: only %d frames" % (tag, len(frames))
    cond, event, caller = frames[0], frames[1], frames[2]
    if cond.f_code is not threading.Condition.wait.__code__:
        return "%s: innermost is %s" % (tag, qualname(cond.f_code))
    if BLOCK_LINE is not None and cond.f_lineno != BLOCK_LINE:
        return "%s: Condition.wait at line %d, not %d" % (
            tag, cond.f_lineno, BLOCK_LINE)
    if event.f_code is not threading.Event.wait.__code__:
        return "%s: Condition.wait called from %s" % (tag, qualname(event.f_code))
    if caller.f_code.co_name != FINAL_CALLER[tag]:
        return "%s: Event.wait called from %s, not %s" % (
            tag, caller.f_code.co_name, FINAL_CALLER[tag])
    return None


def snapshot():
    """(problems, {ident: innermost-first frames}) for the registered threads."""
    current = sys._current_frames()
    with REGISTERED_LOCK:
        registered = dict(REGISTERED)
    problems = []
    tags = sorted(r["tag"] for r in registered.values())
    if tags != sorted(EXPECTED_TAGS):
        problems.append("registered threads: %s" % tags)
    stacks = {}
    for ident, r in registered.items():
        frames = chain(current.get(ident))
        stacks[ident] = frames
        p = blocked_problem(r["tag"], frames)
        if p:
            problems.append(p)
    return problems, stacks


def signature(stacks):
    return {ident: [(id(f.f_code), f.f_lasti) for f in frames]
            for ident, frames in stacks.items()}


def opcode_at(code, lasti):
    """The first byte of the instruction holding f_lasti, as the interpreter
    runs it: 3.11+ rewrites instructions in place (code._co_code_adaptive),
    before that co_code. On 3.11 and 3.12 a caller's f_lasti is its call's
    last inline cache unit: the instruction is the last one starting at or
    before it, as dis decodes the code."""
    if lasti < 0:
        return None
    import dis
    kw = {"adaptive": True} if sys.version_info >= (3, 11) else {}
    start = max(i.offset for i in dis.get_instructions(code, **kw) if i.offset <= lasti)
    return getattr(code, "_co_code_adaptive", code.co_code)[start]


def frame_record(f):
    code = f.f_code
    lineno, end_lineno, col, end_col = positions(code, f.f_lasti, f.f_lineno)
    return {"filename": code.co_filename, "qualname": qualname(code),
            "firstlineno": code.co_firstlineno, "lasti": f.f_lasti,
            "lineno": lineno, "end_lineno": end_lineno,
            "col_offset": col, "end_col_offset": end_col,
            "f_lineno": f.f_lineno, "opcode": opcode_at(code, f.f_lasti)}


def version_string():
    v = sys.version_info
    s = "%d.%d.%d" % (v.major, v.minor, v.micro)
    if v.releaselevel != "final":
        s += {"alpha": "a", "beta": "b", "candidate": "rc"}[v.releaselevel] + str(v.serial)
    return s


def wait_until_still():
    """Poll until every thread is blocked and its stack unchanged over
    STILL_POLLS snapshots; return (problems, stacks)."""
    deadline = time.monotonic() + READY_TIMEOUT
    last, still = None, 0
    while True:
        problems, stacks = snapshot()
        sig = signature(stacks)
        if not problems and sig == last:
            still += 1
            if still >= STILL_POLLS:
                return [], stacks
        else:
            still = 0
        last = sig
        if time.monotonic() > deadline:
            return problems or ["stacks still moving"], stacks
        time.sleep(POLL_INTERVAL)


def report(path):
    try:
        problems, stacks = wait_until_still()
        main_ident = threading.main_thread().ident
        threads = []
        with REGISTERED_LOCK:
            registered = dict(REGISTERED)
        for ident, r in registered.items():
            threads.append({
                "tag": r["tag"],
                "native_thread_id": r["native_thread_id"],
                "thread_id": ident,
                "main_thread": ident == main_ident,
                "has_exception": r["tag"] == "except",
                "start_index": START_ORDER.index(ident) if ident in START_ORDER else None,
                "frames": [frame_record(f) for f in reversed(stacks[ident])],
            })
        doc = {"ok": not problems, "problems": problems,
               "pid": os.getpid(), "python_version": version_string(),
               "version_info": list(sys.version_info[:3]),
               "executable": sys.executable,
               "reporter_native_id": native_id(),
               "threads": threads}
    except Exception as e:  # the test must see the failure, not a timeout
        doc = {"ok": False, "problems": ["reporter failed: %r" % (e,)],
               "pid": os.getpid(), "threads": []}
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
    os.replace(tmp, path)


def main():
    report_path = sys.argv[1]
    module_dir = os.path.dirname(os.path.abspath(report_path))
    write_unicode_module(module_dir)
    register("main")
    START_ORDER.append(threading.get_ident())
    for fn, args in [(thread_gen, ()), (thread_coro, ()), (thread_nested, ()),
                     (thread_lambda, ()), (thread_unicode, (module_dir,)),
                     (thread_recursion, ()), (thread_except, ())]:
        t = threading.Thread(target=fn, args=args, name=fn.__name__, daemon=True)
        t.start()
        START_ORDER.append(t.ident)
    threading.Thread(target=report, args=(report_path,), name="reporter",
                     daemon=True).start()
    block()


if __name__ == "__main__":
    main()
