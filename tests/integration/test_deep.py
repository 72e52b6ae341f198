"""Stacks deeper than --max-frames (docs/cli.md, "Deep stacks"): a thread
recursing 10,000 calls down (workloads/deep.py) is sampled, not failed; each
stack keeps its innermost frames, exactly, over a <truncated> frame at the
root end, and the summary counts those samples. With a larger --max-frames
the whole stack is there."""
import json
import re
import subprocess

import pytest

from conftest import run_pystrobe, wait_ready
from targets import ROOT, supported_targets

WORKLOAD = ROOT / "tests" / "integration" / "workloads" / "deep.py"
DEPTH = 10000
DEFAULT_MAX = 8192
# pyenv 3.8 (frame objects), 3.12 (interpreter frames), 3.15 (frame cache).
DEEP_TARGETS = [t for t in supported_targets() if t.version in ((3, 8), (3, 12), (3, 15))]
CASES = [(t, flags) for t in DEEP_TARGETS
         for flags in ([(), ("--read-only",)] if t.version >= (3, 15) else [()])]
# A leaf that keeps calling a recursion of up to 50 frames: a top that moves
# all the time. Not before 3.11, whose frames are read one by one (a walk of
# thousands of them is seldom as fast as the top moves).
MOVING = [(t, flags) for t, flags in CASES if t.version >= (3, 11)]
# Attaches of a second each, at most, to see a moving top on both sides of
# the limit in one of them (test_stack_moving_across_the_limit).
ATTACHES = 8

pytestmark = pytest.mark.skipif(not DEEP_TARGETS, reason="no CPython 3.8/3.12/3.15 target")


def case_id(case):
    t, flags = case
    return repr(t) + "".join(flags)


def line_of(text):
    """The line of the workload that holds text."""
    lines = WORKLOAD.read_text().splitlines()
    found = [i + 1 for i, line in enumerate(lines) if text in line]
    assert len(found) == 1, text
    return found[0]


CALL_DOWN = line_of("return down(n - 1)")
CALL_SPIN = line_of("return spin()")


def start(spawn, target, wiggle=0, depth=DEPTH, hold_us=0):
    script = target.stage(WORKLOAD)
    p = spawn(target.argv + ["-B", script, str(depth), str(wiggle), str(hold_us)],
              stdout=subprocess.PIPE)
    assert wait_ready(p) == "ready"
    return p


def record(pystrobe, pid, tmp_path, *flags):
    """pystrobe attach for a second: its stderr and the collapsed stacks of
    the deep thread (those with `down` in them), root first, tid left out."""
    out = tmp_path / "collapsed.txt"
    r = run_pystrobe(pystrobe, "attach", "-r", "200", "-d", "1", "--stats", "--collapsed",
                     "-o", out, *flags, pid)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0, err
    stacks = []
    for line in out.read_text().splitlines():
        frames, count = line.rsplit(" ", 1)
        frames = frames.split(";")[1:]
        if any(f.endswith(f":down:{CALL_DOWN}") for f in frames):
            stacks.append((frames, int(count)))
    assert stacks, out.read_text()[:2000]
    return err, stacks


def summary(err):
    m = re.search(r"Captured (\d+) samples", err)
    f = re.search(r"Failed samples: (\d+)", err)
    assert m and f, err
    t = re.search(r"Truncated samples: (\d+) \(stacks deeper than (\d+) frames; --max-frames\)",
                  err)
    return int(m.group(1)), int(f.group(1)), t


def name_line(frame):
    _, name, line = frame.rsplit(":", 2)
    return name, int(line)


def check_leaf(frames):
    """frames, root first, end with the recursion's bottom: `down` calling
    spin (its line), then spin, then wiggle frames if any. Returns the
    index of that bottom `down`."""
    k = len(frames) - 1
    while name_line(frames[k])[0] == "wiggle":
        k -= 1
    assert name_line(frames[k])[0] == "spin", frames[k:]
    assert name_line(frames[k - 1]) == ("down", CALL_SPIN), frames[k - 1:]
    return k - 1


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_deep_stack_is_cut(pystrobe, spawn, tmp_path, case):
    target, flags = case
    p = start(spawn, target)
    err, stacks = record(pystrobe, p.pid, tmp_path, *flags)
    samples, failed, t = summary(err)
    assert t, err
    assert int(t.group(2)) == DEFAULT_MAX, err
    # Every sample has the deep thread, cut; a read of the stack does not
    # race with a leaf that only loops.
    assert failed * 4 <= samples and samples - failed <= int(t.group(1)) <= samples, err
    if target.version >= (3, 15) and "--read-only" not in flags:
        # The cut chain is cached: the stack does not move below the top.
        m = re.search(r"frame cache: +(\d+) full hits, (\d+) partial hits, (\d+) misses", err)
        assert m and int(m.group(1)) > int(m.group(3)), err
    for frames, _ in stacks:
        # The innermost DEFAULT_MAX - 1 frames, all of the recursion, exactly.
        assert len(frames) == DEFAULT_MAX, (len(frames), frames[:3], frames[-3:])
        assert frames[0] == "<truncated>", frames[:3]
        bottom = check_leaf(frames)
        assert bottom == len(frames) - 2
        assert all(name_line(f) == ("down", CALL_DOWN) for f in frames[1:bottom]), frames[:5]


@pytest.mark.parametrize("case", MOVING, ids=case_id)
def test_very_deep_stack_is_cut(pystrobe, spawn, tmp_path, case):
    """200,000 calls deep: more data stack than pystrobe reads for one
    thread (3.11+). The walk copies only the part that holds the frames it
    may keep, so the stack is cut as a shallower one is."""
    target, flags = case
    p = start(spawn, target, depth=200000)
    err, stacks = record(pystrobe, p.pid, tmp_path, *flags)
    samples, failed, t = summary(err)
    assert t and failed * 4 <= samples, err
    for frames, _ in stacks:
        assert len(frames) == DEFAULT_MAX and frames[0] == "<truncated>", len(frames)
        bottom = check_leaf(frames)
        assert all(name_line(f) == ("down", CALL_DOWN) for f in frames[1:bottom]), frames[:5]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_deep_stack_whole_with_max_frames(pystrobe, spawn, tmp_path, case):
    target, flags = case
    p = start(spawn, target)
    err, stacks = record(pystrobe, p.pid, tmp_path, "--max-frames", "20000", *flags)
    samples, failed, t = summary(err)
    assert not t, err
    assert failed * 4 <= samples, err
    for frames, _ in stacks:
        assert "<truncated>" not in frames
        bottom = check_leaf(frames)
        downs = [i for i, f in enumerate(frames) if name_line(f)[0] == "down"]
        assert len(downs) == DEPTH + 1 and downs[-1] == bottom, len(downs)
        # Below the recursion, the thread's own start: threading's frames.
        assert downs[0] > 0 and all("threading.py" in f for f in frames[:downs[0]]), frames[:4]


@pytest.mark.parametrize("case", MOVING, ids=case_id)
def test_deep_stack_with_moving_top(pystrobe, spawn, tmp_path, case):
    """The top moves all the time: each stack is still its innermost frames
    over <truncated>, with fewer shown when frames at the top were read
    after they had returned or before their first instruction (left out, as
    in any stack); with the limit raised, the whole stack (on 3.15 through
    the frame cache's hits, unless --read-only)."""
    target, flags = case
    wiggle = 50
    p = start(spawn, target, wiggle=wiggle)
    err, stacks = record(pystrobe, p.pid, tmp_path, *flags)
    samples, failed, t = summary(err)
    assert t and failed * 4 <= samples, err
    for frames, _ in stacks:
        assert DEFAULT_MAX - 1 - wiggle <= len(frames) <= DEFAULT_MAX, len(frames)
        assert frames[0] == "<truncated>"
        bottom = check_leaf(frames)
        assert all(name_line(f) == ("down", CALL_DOWN) for f in frames[1:bottom]), frames[:5]
    err, stacks = record(pystrobe, p.pid, tmp_path, "--max-frames", "20000", *flags)
    samples, failed, t = summary(err)
    assert not t and failed * 4 <= samples, err
    for frames, _ in stacks:
        check_leaf(frames)
        assert sum(name_line(f)[0] == "down" for f in frames) == DEPTH + 1


@pytest.mark.parametrize("target", DEEP_TARGETS, ids=repr)
def test_dump_deep_stack(pystrobe, spawn, target):
    p = start(spawn, target)
    r = run_pystrobe(pystrobe, "dump", p.pid)
    text = r.stdout.decode(errors="replace")
    assert r.returncode == 0, r.stderr
    assert (f"<truncated> (stack deeper than {DEFAULT_MAX} frames: its outermost calls are "
            "left out; --max-frames)") in text, text[:2000]
    r = run_pystrobe(pystrobe, "dump", "--json", p.pid)
    assert r.returncode == 0, r.stderr
    threads = json.loads(r.stdout)["interpreters"][0]["threads"]
    deep = [t for t in threads if any(f["qualname"] == "down" for f in t["frames"])]
    assert len(deep) == 1 and deep[0]["error"] is None, deep[:1]
    frames = deep[0]["frames"]
    assert len(frames) == DEFAULT_MAX
    assert frames[0]["qualname"] == "<truncated>" and frames[0]["filename"] == "~"
    assert frames[-1]["qualname"] == "spin" and frames[-2]["lineno"] == CALL_SPIN
    assert all(f["qualname"] == "down" and f["lineno"] == CALL_DOWN for f in frames[1:-2])

    r = run_pystrobe(pystrobe, "dump", "--json", "--max-frames", "20000", p.pid)
    assert r.returncode == 0, r.stderr
    threads = json.loads(r.stdout)["interpreters"][0]["threads"]
    frames = [t for t in threads if any(f["qualname"] == "down" for f in t["frames"])][0]["frames"]
    assert sum(f["qualname"] == "down" for f in frames) == DEPTH + 1
    assert not any(f["qualname"] == "<truncated>" for f in frames)


@pytest.mark.parametrize("args", [["dump", "--max-frames", "15"],
                                  ["dump", "--max-frames", "1000001"],
                                  ["attach", "--max-frames", "x"]])
def test_max_frames_out_of_range(pystrobe, args):
    r = run_pystrobe(pystrobe, *args, "1")
    assert r.returncode == 2
    assert b"bad --max-frames" in r.stderr and b"(16 to 1000000)" in r.stderr, r.stderr


@pytest.mark.parametrize("case", MOVING, ids=case_id)
def test_stack_moving_across_the_limit(pystrobe, spawn, tmp_path, case):
    """A limit the moving top keeps crossing: each stack is either whole or
    cut (below the recursion, or inside it), and a cut one is filled to the
    limit again when the top shrinks back (on 3.15 the frame cache must not
    keep a cut tail that no longer reaches it: frames below the cut would
    show now). Frames read after they had returned, at the top, are left
    out as in any stack: a few short stacks, not most."""
    target, flags = case
    wiggle, limit = 200, DEPTH + 100
    # Each depth is held 4 ms (a cycle of the 201 depths: about 0.8 s): a
    # top that moves every microsecond tears most reads of 10,000 frames.
    # This test is about where the stack is cut, not about reading a
    # fast-moving one (test_deep_stack_with_moving_top).
    p = start(spawn, target, wiggle=wiggle, hold_us=4000)
    # The top is past the limit about half of each 0.8 s cycle, but a loaded
    # machine can give pystrobe a few bursts of CPU in a second, all of them
    # in one half: then a second of samples holds one kind of stack only.
    # So the target is sampled a second at a time until one attach saw both
    # (the first, where pystrobe gets the CPU it asks for); every sample of
    # every attach is checked, and a build that never cuts or never fills
    # a cut stack again fails after the last attach.
    for _ in range(ATTACHES):
        cut = short = whole = 0
        err, stacks = record(pystrobe, p.pid, tmp_path, "--max-frames", limit, *flags)
        samples, failed, t = summary(err)
        assert failed * 4 <= samples, err
        for frames, count in stacks:
            bottom = check_leaf(frames)
            if frames[0] == "<truncated>":
                assert t, err
                assert limit - 1 - wiggle <= len(frames) <= limit, len(frames)
                # Root first: the rest of threading's frames, if any, then the
                # recursion.
                rest = [f for f in frames[1:bottom] if "threading.py" not in f]
                assert frames[1:bottom][len(frames[1:bottom]) - len(rest):] == rest
                assert all(name_line(f) == ("down", CALL_DOWN) for f in rest)
                cut += count
                # Up to a few records kept are entry frames, not shown.
                short += count if len(frames) < limit - 4 else 0
            else:
                assert sum(name_line(f)[0] == "down" for f in frames) == DEPTH + 1
                whole += count
        if cut and whole:
            break
    assert cut > 0 and whole > 0 and short * 4 <= cut, (cut, short, whole)
