"""Targets in another PID namespace, as in a container: `unshare -p -f
--mount-proc python ...` (for the sid root, chroot inside unshare, with the
namespace's /proc mounted in the root).

The interpreter knows its threads by their ids in its own namespace
(threading.get_native_id()); the host's /proc names them by the host's. So
`--mode cpu`, which asks /proc/PID/task/TID/stat whether a thread runs, must
map one to the other (NSpid), and the outputs show both ids: the collapsed
stacks' root frame `tid:HOST (ns NS)`, dump's `Thread HOST (ns NS)` and its
JSON's `host_thread_id` next to `native_thread_id`.
"""
import json
import os
import subprocess

import pytest

from conftest import SessionProcesses, run_pystrobe, wait_ready
from targets import supported_targets
from test_sampling import Work, load_collapsed, strobes  # noqa: F401 (fixture)

TARGETS = [t for t in supported_targets() if t.name in ("pyenv-3.12.1", "sid-3.15")]
CHILD_TIMEOUT = 30.0   # seconds for unshare's child to appear
SAMPLE_SECONDS = 2     # -d of the runs below
RUN_TIMEOUT = 60.0


def unshare_argv(target, args):
    """Run the target's interpreter on args as pid 1 of a new PID namespace
    with its own /proc (inside the sid root for a chroot target)."""
    proc = "--mount-proc" if target.chroot is None else f"--mount-proc={target.chroot}/proc"
    return ["unshare", "-p", "-f", proc, *target.argv, *args]


def child_of(pid, timeout=CHILD_TIMEOUT):
    """The first child of pid (unshare's, which becomes the interpreter)."""
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            kids = open(f"/proc/{pid}/task/{pid}/children").read().split()
        except OSError:
            kids = []
        if kids:
            return int(kids[0])
        time.sleep(0.05)
    pytest.fail(f"unshare ({pid}) started no child in {timeout} s")


def host_tids(pid):
    """{id in the process's namespace: host id} of its threads, from NSpid."""
    ids = {}
    for name in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{name}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    fields = [int(x) for x in line.split()[1:]]
                    ids[fields[-1]] = fields[0]
    return ids


@pytest.fixture(scope="module", params=TARGETS, ids=repr)
def ns_target(request):
    """(target, host pid of its interpreter, {"main"|"busy": (host, ns)})."""
    target = request.param
    work = Work(target)
    procs = SessionProcesses()
    try:
        p = procs.start(unshare_argv(target, [work.path("ns_busy.py"), "600"]),
                        stdout=subprocess.PIPE)
        ns = json.loads(wait_ready(p))
        pid = child_of(p.pid)
        ids = host_tids(pid)
        threads = {k: (ids[v], v) for k, v in ns.items()}
        # The namespace is real: the ids differ.
        assert all(h != n for h, n in threads.values()), threads
        yield target, pid, threads
    finally:
        procs.close()
        work.close()


def check_busy_thread(stacks, threads, where):
    host, ns = threads["busy"]
    busy = [s for s in stacks if "busy_loop" in s.names]
    assert busy, f"no busy_loop stack in {where}: the busy thread was never seen on CPU"
    for s in busy:
        assert (s.tid, s.ns_tid) == (host, ns), \
            f"busy_loop under tid:{s.tid} (ns {s.ns_tid}), expected tid:{host} (ns {ns})"
    assert sum(s.count for s in busy) >= 10, f"too few busy_loop samples in {where}"


def test_cpu_mode_attach(pystrobe, ns_target, tmp_path):
    """--mode cpu sees the namespace's running thread, under both ids."""
    target, pid, threads = ns_target
    out = tmp_path / "cpu.txt"
    res = run_pystrobe(pystrobe, "attach", "--mode", "cpu", "-d", SAMPLE_SECONDS,
                       "--collapsed", "-o", out, pid, timeout=RUN_TIMEOUT)
    assert res.returncode == 0, res.stderr.decode(errors="replace")
    stacks = load_collapsed(out)
    check_busy_thread(stacks, threads, out)
    # The main thread sleeps: never on CPU long enough to dominate.
    busy = sum(s.count for s in stacks if "busy_loop" in s.names)
    assert busy >= sum(s.count for s in stacks) / 2, stacks


def test_wall_mode_ids(pystrobe, ns_target, tmp_path):
    """Every thread's stacks carry its host id and its own."""
    target, pid, threads = ns_target
    out = tmp_path / "wall.txt"
    res = run_pystrobe(pystrobe, "attach", "-d", SAMPLE_SECONDS, "--collapsed", "-o", out, pid,
                       timeout=RUN_TIMEOUT)
    assert res.returncode == 0, res.stderr.decode(errors="replace")
    stacks = load_collapsed(out)
    seen = {(s.tid, s.ns_tid) for s in stacks}
    assert seen == set(threads.values()), f"thread ids {seen}, expected {threads}"


def test_dump_shows_both_ids(pystrobe, ns_target):
    target, pid, threads = ns_target
    res = run_pystrobe(pystrobe, "dump", pid)
    assert res.returncode == 0, res.stderr.decode(errors="replace")
    text = res.stdout.decode()
    for name, (host, ns) in threads.items():
        assert f"Thread {host} (ns {ns})" in text, f"{name} thread not as {host} (ns {ns}):\n{text}"
    res = run_pystrobe(pystrobe, "dump", "--json", pid)
    assert res.returncode == 0, res.stderr.decode(errors="replace")
    doc = json.loads(res.stdout)
    got = {(t["host_thread_id"], t["native_thread_id"])
           for i in doc["interpreters"] for t in i["threads"]}
    assert got == set(threads.values()), f"{got}, expected {threads}"
    busy = [t for i in doc["interpreters"] for t in i["threads"]
            if t["native_thread_id"] == threads["busy"][1]]
    # dump reads the task state too: the spinning thread is found in /proc.
    assert busy and busy[0]["status"]["on_cpu"] is not None, busy


@pytest.mark.parametrize("tgt", [t for t in TARGETS if t.chroot is None], ids=repr)
def test_cpu_mode_run(strobes, tgt, tmp_path):  # noqa: F811
    """`run -- unshare ... python` follows the command into the namespace."""
    work = Work(tgt)
    try:
        out = tmp_path / "run.txt"
        st = strobes(["run", "--mode", "cpu", "-d", SAMPLE_SECONDS, "--collapsed", "-o", out,
                      "--", *unshare_argv(tgt, [work.path("ns_busy.py"), "600"])])
        st.check(timeout=RUN_TIMEOUT)
        stacks = load_collapsed(out)
        busy = [s for s in stacks if "busy_loop" in s.names]
        assert busy and sum(s.count for s in busy) >= 10, st.describe()
        assert all(s.ns_tid is not None and s.ns_tid != s.tid for s in busy), \
            [(s.tid, s.ns_tid) for s in busy]
    finally:
        work.close()
