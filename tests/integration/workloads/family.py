"""A parent that starts Python children, for --subprocesses.

    family.py MODE DIR

The parent prints "ready", spins in parent_before() for a moment, starts its children the
way MODE says, waits for them, and spins in parent_after(). Each child
spins in a function named after the way it was started (child_fork,
child_mp_spawn, ...) and writes its pid to DIR/<that name>.pid first, so a
test knows which profile file is whose. Modes:

  fork, mp-fork, mp-spawn, mp-forkserver  os.fork, multiprocessing's methods
  subprocess     subprocess running this script again (sys.executable)
  shell          /bin/sh -c running it (the shell stays: a non-Python parent)
  grandchild     a subprocess whose own subprocess does the work
  early          a child that exits early, the parent going on a second more
  orphan         a child that forks the worker and exits at once (the worker,
                 an orphan, outlives the parent too)
  split          a spawned child running split_3_1.py's 3:1 alpha/beta split
  async          (3.14+) the parent's asyncio task spins, then starts a
                 subprocess whose asyncio task (child_async_task) spins
  source         a subprocess that imports DIR/rewritten.py (the test
                 writes it first), spins in it for SOURCE_EARLY seconds, rewrites
                 its first line and spins in the code it loaded LATE more
  timing-METHOD  (METHOD: fork, spawn, subprocess) the child spins in
                 child_early_phase until START + EARLY (1) seconds, START being
                 when the parent started it, then in child_late_phase (LATE, 0.5 s): how
                 many early samples a profile has tells how soon the child
                 was first sampled

Runs on Python 3.8+.
"""
import multiprocessing
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD_SECONDS = 1.0
EARLY = 1.0
LATE = 0.5
# Long enough for a loaded machine's first sample of the child to come
# before the rewrite.
SOURCE_EARLY = 3.0


def spin_until(t):
    x = 0
    while time.monotonic() < t:
        x += 1
    return x


def note(d, name):
    with open(os.path.join(d, name + ".pid"), "w") as f:
        f.write(str(os.getpid()))


def child_fork(d):
    note(d, "child_fork")
    spin_until(time.monotonic() + CHILD_SECONDS)


def child_mp_fork(d):
    note(d, "child_mp_fork")
    spin_until(time.monotonic() + CHILD_SECONDS)


def child_mp_spawn(d):
    note(d, "child_mp_spawn")
    spin_until(time.monotonic() + CHILD_SECONDS)


def child_mp_forkserver(d):
    note(d, "child_mp_forkserver")
    spin_until(time.monotonic() + CHILD_SECONDS)


def child_subprocess(d):
    note(d, "child_subprocess")
    spin_until(time.monotonic() + CHILD_SECONDS)


def child_shell(d):
    note(d, "child_shell")
    spin_until(time.monotonic() + CHILD_SECONDS)


def child_grandchild(d):
    note(d, "child_grandchild")
    spin_until(time.monotonic() + CHILD_SECONDS)


def child_early(d):
    note(d, "child_early")
    spin_until(time.monotonic() + 0.2)


def child_orphan(d):
    note(d, "child_orphan")
    spin_until(time.monotonic() + CHILD_SECONDS)


def orphan_middle(d):
    """Fork the worker and exit at once: the worker's parent is gone."""
    if os.fork() == 0:
        try:
            child_orphan(d)
        finally:
            os._exit(0)


def child_split(d):
    note(d, "child_split")
    sys.path.insert(0, HERE)
    import split_3_1
    split_3_1.main(2.0)


def child_async(d):
    import asyncio
    note(d, "child_async")

    async def child_async_task():
        spin_until(time.monotonic() + CHILD_SECONDS)

    async def child_async_main():
        await asyncio.create_task(child_async_task())

    asyncio.run(child_async_main())


def parent_async(d):
    import asyncio

    async def parent_async_task():
        spin_until(time.monotonic() + 0.3)
        proc = await asyncio.create_subprocess_exec(*again("child", "child_async", d))
        assert await proc.wait() == 0

    async def parent_async_main():
        await asyncio.create_task(parent_async_task())

    asyncio.run(parent_async_main())


def child_source(d):
    note(d, "child_source")
    sys.path.insert(0, d)
    import rewritten
    rewritten.source_spin(time.monotonic() + SOURCE_EARLY)
    path = os.path.join(d, "rewritten.py")
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text.replace("def source_spin(", "def rewritten_spin(", 1))
    rewritten.source_spin(time.monotonic() + LATE)


def child_early_phase(t):
    spin_until(t)


def child_late_phase(t):
    spin_until(t)


def code_began(d):
    """Write DIR/child_timing.code: ms from this process's start as the
    kernel gives it (/proc/self/stat's starttime, to a clock tick, as
    pystrobe's table has it) to now, on the clock of that start
    (CLOCK_BOOTTIME): the table's FIRST less this is the time from the
    child's own code beginning to its first sample, the tick cancelled.
    Nothing where /proc is not mounted."""
    now = time.clock_gettime(time.CLOCK_BOOTTIME)
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    except OSError:  # no /proc (a chroot without it): nothing to note
        return
    born = ticks / os.sysconf("SC_CLK_TCK")
    with open(os.path.join(d, "child_timing.code"), "w") as f:
        f.write("%.3f" % ((now - born) * 1000))


def child_timing(d, start):
    code_began(d)
    note(d, "child_timing")
    child_early_phase(start + EARLY)
    child_late_phase(start + EARLY + LATE)


def parent_before():
    spin_until(time.monotonic() + 0.2)


def parent_after(seconds=0.2):
    spin_until(time.monotonic() + seconds)


def again(*args):
    """This script run again in a new interpreter, as `python family.py ...`."""
    return [sys.executable, os.path.abspath(__file__), *args]


def mp_child(method, func, d):
    p = multiprocessing.get_context(method).Process(target=func, args=(d,))
    p.start()
    p.join()
    assert p.exitcode == 0, p.exitcode


def fork_child(func, *args):
    pid = os.fork()
    if pid == 0:
        try:
            func(*args)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert status == 0, status


def start(mode, d):
    if mode == "fork":
        fork_child(child_fork, d)
    elif mode.startswith("mp-"):
        method = mode[3:]
        mp_child(method, globals()["child_mp_" + method], d)
    elif mode == "subprocess":
        subprocess.run(again("child", "child_subprocess", d), check=True)
    elif mode == "shell":
        # "; :" keeps the shell from exec'ing python in its place.
        cmd = " ".join('"%s"' % a for a in again("child", "child_shell", d)) + "; :"
        subprocess.run(["/bin/sh", "-c", cmd], check=True)
    elif mode == "grandchild":
        subprocess.run(again("middle", d), check=True)
    elif mode == "early":
        subprocess.run(again("child", "child_early", d), check=True)
        parent_after(1.0)
    elif mode == "orphan":
        fork_child(orphan_middle, d)
    elif mode == "source":
        subprocess.run(again("child", "child_source", d), check=True)
    elif mode == "split":
        mp_child("spawn", child_split, d)
    elif mode == "async":
        parent_async(d)
    elif mode.startswith("timing-"):
        method = mode[7:]
        t = time.monotonic()
        if method == "fork":
            fork_child(child_timing, d, t)
        elif method == "subprocess":
            subprocess.run(again("timing", d, repr(t)), check=True)
        else:
            p = multiprocessing.get_context(method).Process(target=child_timing, args=(d, t))
            p.start()
            p.join()
    else:
        sys.exit("unknown mode " + mode)


def main(argv):
    if argv[0] == "child":
        globals()[argv[1]](argv[2])
        return
    if argv[0] == "middle":
        subprocess.run(again("child", "child_grandchild", argv[1]), check=True)
        return
    if argv[0] == "timing":
        child_timing(argv[1], float(argv[2]))
        return
    print("ready", flush=True)
    parent_before()
    start(argv[0], argv[1])
    parent_after()


if __name__ == "__main__":
    main(sys.argv[1:])
