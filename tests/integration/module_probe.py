"""Run RemoteUnwinder calls in another host interpreter and print the results.

    python module_probe.py MODULE_DIR < JOBS_JSON

test_module.py uses it for what cannot run inside pytest's own interpreter:
pystrobe and CPython's _remote_debugging side by side under python3.15 in
the sid root, pystrobe under every other host interpreter, and pystrobe as
another user. MODULE_DIR holds the built `pystrobe` package. Standard input
is a JSON list of jobs, each a dict:

    module     "pystrobe" (default) or "_remote_debugging"
    call       "get_stack_trace" (default), "get_all_awaited_by",
               "get_async_stack_trace", "get_stats", "construct",
               "is_python_process", "get_child_pids", "info", or "exited":
               start a Python child, attach, kill it (options["reap"]:
               reap it, default True, or leave a zombie), then call
               get_stack_trace() twice: the result is the two outcomes
    pid        the target
    options    keyword arguments of RemoteUnwinder (or of the function)
    retries    how many transient failures of get_stack_trace to retry (5)
    repeat     for get_stack_trace: take this many samples with the same
               unwinder and return the list of them

Standard output is one JSON list, one entry per job: {"ok": value} with
structseqs turned into lists, or {"error": {"type", "oserror", "message",
"cause"}}. Runs on Python 3.8 and later.
"""
import importlib
import json
import subprocess
import sys
import time


def plain(value):
    """Structseqs and tuples as lists, recursively (JSON has no tuples)."""
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def describe_error(e):
    cause = e.__cause__
    return {"type": type(e).__name__,
            "oserror": isinstance(e, OSError),
            "message": str(e),
            "cause": type(cause).__name__ if cause is not None else None}


def run_job(job):
    mod = importlib.import_module(job.get("module", "pystrobe"))
    call = job.get("call", "get_stack_trace")
    options = job.get("options", {})
    pid = job.get("pid")
    if call == "info":
        return {"file": mod.__file__, "version": list(sys.version_info[:3]),
                "names": sorted(n for n in dir(mod) if not n.startswith("_"))}
    if call == "is_python_process":
        return mod.is_python_process(pid)
    if call == "get_child_pids":
        return mod.get_child_pids(pid, **options)
    if call == "exited":
        return exited(mod, dict(options))
    unwinder = mod.RemoteUnwinder(pid, **options)
    if call == "construct":
        return None
    if call in ("get_all_awaited_by", "get_async_stack_trace"):
        return getattr(unwinder, call)()
    if call == "get_stats":
        unwinder.get_stack_trace()
        stats = unwinder.get_stats()
        return [[k, type(v).__name__] for k, v in stats.items()]
    if "repeat" in job:
        return [sample(unwinder, job.get("retries", 5)) for _ in range(job["repeat"])]
    return sample(unwinder, job.get("retries", 5))


def sample(unwinder, retries):
    while True:
        try:
            return unwinder.get_stack_trace()
        except ProcessLookupError:
            raise
        except (OSError, RuntimeError, UnicodeDecodeError):
            if retries <= 0:
                raise
            retries -= 1
            time.sleep(0.01)


def state(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def exited(mod, options):
    reap = options.pop("reap", True)
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(600)"],
        stdout=subprocess.PIPE)
    try:
        child.stdout.readline()
        unwinder = mod.RemoteUnwinder(child.pid, **options)
        unwinder.get_stack_trace()
        child.kill()
        if reap:
            child.wait()
        else:
            deadline = time.monotonic() + 10
            while state(child.pid) != "Z" and time.monotonic() < deadline:
                time.sleep(0.01)
        outcomes = []
        for _ in range(2):
            try:
                unwinder.get_stack_trace()
                outcomes.append(None)
            except Exception as e:
                outcomes.append(describe_error(e))
        return outcomes
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()


def main():
    sys.path.insert(0, sys.argv[1])
    jobs = json.load(sys.stdin)
    out = []
    for job in jobs:
        try:
            out.append({"ok": plain(run_job(job))})
        except Exception as e:  # the test looks at the type
            out.append({"error": describe_error(e)})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
