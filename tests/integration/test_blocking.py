"""--blocking: every thread of the target stopped (ptrace) for each sample.
On the generator pipeline no sample fails and every stack is one the
program can have (no torn walk); threads started while the others are being
stopped are caught; a thread that cannot be stopped (another tracer) is an
error the user sees; --stats shows the time the target spent stopped."""
import ast
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from conftest import run_pystrobe, wait_ready
from targets import supported_targets

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = os.path.join(HERE, "workloads")
VERSIONS = [(3, 8), (3, 12), (3, 15)]
TARGETS = [t for t in supported_targets() if t.version in VERSIONS]
# generators.py: root first, every stack is a prefix of this chain.
CHAIN = ["<module>", "main", "outer", "inner", "leaf"]
EXIT_PERM = 5


def start(spawn, target, workload):
    path = target.stage(os.path.join(WORKLOADS, workload))
    p = spawn(target.argv + [path, "600"], stdout=subprocess.PIPE)
    wait_ready(p)
    return p


def qualnames(line):
    stack = line.rsplit(" ", 1)[0].split(";")
    return [f.split(":")[-2].split(".")[-1] for f in stack[1:]]


def samples(stderr, key):
    m = re.search(key + r"[: ]+(\d+)", stderr)
    assert m, stderr
    return int(m.group(1))


@pytest.mark.parametrize("target", TARGETS, ids=repr)
def test_generators_whole_stacks(pystrobe, spawn, target, tmp_path):
    p = start(spawn, target, "generators.py")
    out = tmp_path / "gen.txt"
    res = run_pystrobe(pystrobe, "attach", p.pid, "-d", "2", "-r", "500", "--blocking",
                       "--stats", "--collapsed", "-o", out)
    err = res.stderr.decode()
    assert res.returncode == 0, err
    assert samples(err, "Captured") > 50, err
    assert samples(err, "Failed samples") == 0, err
    assert re.search(r"stopped \(--blocking\): [\d.]+ us per sample", err), err
    n = 0
    for line in out.read_text().splitlines():
        names = qualnames(line)
        assert names == CHAIN[:len(names)] and len(names) >= 2, f"torn stack: {line}"
        n += int(line.rsplit(" ", 1)[1])
    assert n == samples(err, "Captured")
    assert p.poll() is None, "the target did not survive being stopped"


def test_threads_started_while_stopping(pystrobe, spawn, tmp_path):
    target = TARGETS[0] if TARGETS else pytest.skip("no target")
    p = start(spawn, target, "churn.py")
    out = tmp_path / "churn.txt"
    res = run_pystrobe(pystrobe, "attach", p.pid, "-d", "2", "-r", "500", "--blocking",
                       "--collapsed", "-o", out)
    err = res.stderr.decode()
    assert res.returncode == 0, err
    assert samples(err, "Failed samples") == 0, err
    assert "lives_briefly" in out.read_text()
    assert p.poll() is None


def test_dump_blocking(pystrobe, spawn):
    target = TARGETS[-1] if TARGETS else pytest.skip("no target")
    p = start(spawn, target, "generators.py")

    def dump():
        res = run_pystrobe(pystrobe, "dump", "--blocking", "--no-source", p.pid)
        text = res.stdout.decode()
        assert res.returncode == 0, res.stderr.decode()
        assert "stack unreadable" not in text, text
        return text

    # "ready" comes just before main() is called: a stop before its frame
    # is pushed shows <module> alone, as it is. From main on, every stop.
    deadline = time.monotonic() + 30
    while " in main " not in dump():
        assert time.monotonic() < deadline, "main never entered"
    for _ in range(20):
        text = dump()
        assert " in main " in text, text


HOLD = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
PTRACE_SEIZE = 0x4206
tid = int(sys.argv[1])
if libc.ptrace(PTRACE_SEIZE, tid, None, None) != 0:
    print("seize failed", ctypes.get_errno(), flush=True)
    sys.exit(1)
print("holding", flush=True)
time.sleep(600)
"""


def test_other_tracer_is_an_error(pystrobe, spawn):
    target = TARGETS[0] if TARGETS else pytest.skip("no target")
    p = start(spawn, target, "churn.py")
    holder = spawn([sys.executable, "-c", HOLD, str(p.pid)], stdout=subprocess.PIPE)
    try:
        assert wait_ready(holder) == "holding"
        for args in (["attach", p.pid, "-d", "1", "--blocking", "--collapsed", "-o", "/dev/null"],
                     ["dump", "--blocking", p.pid]):
            res = run_pystrobe(pystrobe, *args)
            err = res.stderr.decode()
            assert res.returncode == EXIT_PERM, (args, err)
            assert f"thread {p.pid} of process {p.pid} cannot be stopped: process " \
                   f"{holder.pid} traces it already" in err, err
        # without --blocking nothing is stopped: the same target samples fine
        res = run_pystrobe(pystrobe, "attach", p.pid, "-d", "0.5", "--collapsed", "-o",
                           "/dev/null")
        assert res.returncode == 0, res.stderr.decode()
    finally:
        # The tracer goes first: a killed tracee is reaped by its parent
        # only once its tracer has waited for it or is gone.
        holder.kill()
        holder.wait()


@pytest.mark.skipif(bool(os.environ.get("PYSTROBE_SANITIZED")),
                    reason="LeakSanitizer stops a sanitized pystrobe run under strace "
                    "(ptrace) with an error; what is written does not depend on the build")
def test_blocking_read_only_writes_nothing(pystrobe, spawn, tmp_path):
    """--read-only goes with --blocking: stopping the target writes nothing
    into it (no process_vm_writev, no ptrace write of memory or registers,
    as strace sees pystrobe's system calls), where 3.15's frame cache
    writes without --read-only (the check sees writes when there are)."""
    t15 = [t for t in TARGETS if t.version >= (3, 15)]
    strace = shutil.which("strace")
    if not t15 or not strace:
        pytest.skip("needs a 3.15 target and strace")
    p = start(spawn, t15[0], "generators.py")

    def writes(*flags):
        log = tmp_path / ("strace%d.txt" % len(flags))
        res = subprocess.run([strace, "-f", "-qq", "-o", str(log), "-e",
                              "trace=process_vm_writev,ptrace", str(pystrobe), "attach",
                              str(p.pid), "-d", "0.5", "-r", "200", "--blocking", *flags,
                              "--collapsed", "-o", str(tmp_path / "o.txt")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        assert res.returncode == 0, res.stderr.decode()
        calls = log.read_text().splitlines()
        assert any("PTRACE_INTERRUPT" in c for c in calls), calls[:20]  # it did stop it
        return [c for c in calls
                if "process_vm_writev(" in c or re.search(r"PTRACE_(POKE|SETREGS|SETFPREGS)", c)]

    assert writes(), "no write seen without --read-only: the check sees nothing"
    assert writes("--read-only") == []
    assert p.poll() is None


def test_blocking_not_with_cpu_mode(pystrobe, spawn):
    res = run_pystrobe(pystrobe, "attach", "1", "--blocking", "--mode", "cpu")
    assert res.returncode == 2 and b"--mode cpu" in res.stderr


MODULE_CODE = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
import pystrobe
pid = int(sys.argv[2])
def states():
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            out.append(f.read().rsplit(")", 1)[1].split()[0])
    return out
u = pystrobe.RemoteUnwinder(pid, all_threads=True)
assert u.pause_threads() is True
assert u.pause_threads() is False
stopped = states()
stacks = u.get_stack_trace()
assert u.resume_threads() is True
assert u.resume_threads() is False
print(repr((stopped, len(stacks[0].threads), states())))
"""


def test_module_pause_threads(spawn):
    """The Python module's pause_threads()/resume_threads() stop and resume
    every thread (state 't', tracing stop, while paused)."""
    target = TARGETS[0] if TARGETS else pytest.skip("no target")
    build = os.environ.get("PYSTROBE_BUILD", os.path.join(HERE, "..", "..", "build"))
    module_dir = os.path.join(build, "python")
    if not os.path.exists(os.path.join(module_dir, "pystrobe")):
        pytest.fail(f"no module in {module_dir}: make module", pytrace=False)
    p = start(spawn, target, "generators.py")
    res = subprocess.run(["/usr/bin/python3", "-c", MODULE_CODE, module_dir, str(p.pid)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert res.returncode == 0, res.stderr.decode()
    stopped, nthreads, after = ast.literal_eval(res.stdout.decode())
    assert stopped and all(s == "t" for s in stopped), stopped
    assert nthreads == 1 and "t" not in after, (nthreads, after)
