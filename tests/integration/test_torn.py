"""Stacks read while they change. One process_vm_readv is not one moment:
the target runs on while the kernel copies, and a copy can be interrupted.
A walk must then fail (and be retried), never drop a frame that is there.

The workload switches between two call chains every microsecond or so
(cache_aba.py with a 10-step leaf), so that many reads catch the stack as it
changes. Samples come in time order from tests/tools/sample_stream."""

import re

import pytest

from targets import supported_targets
from test_framecache import names, start, steady_costs, stream

CHAINS = (["<module>", "main", "chain_a", "a1", "a2", "spin"],
          ["<module>", "main", "chain_b", "b1", "b2", "spin"])

# Interpreter frames (3.11+) are cleared or reused in place as calls return.
TARGETS = [t for t in supported_targets() if t.version >= (3, 11)]


@pytest.mark.parametrize("target", TARGETS, ids=repr)
def test_no_frame_lost_while_the_stack_changes(spawn, target):
    p = start(spawn, target, "aba", 6, 10)
    samples, _ = stream(p.pid, 1.5)
    seen = set()
    for n, tid, stack in samples:
        got = names(stack)
        # Each level holds one of the two frames the program has there: a
        # frame read after it had returned, or before it had started, and
        # left out, would shift the frames above it down a level.
        assert len(got) <= len(CHAINS[0]) and all(
            g in (CHAINS[0][i], CHAINS[1][i]) for i, g in enumerate(got)), \
            f"sample {n}: {got}"
        seen.update(got)
    # Both chains were read down to their leaf (as a leaf, a2 and b2 live
    # for a fraction of a microsecond: too rare to ask for on a busy machine).
    assert {"spin", "a2", "b2"} <= seen and len(samples) > 1000, (seen, len(samples))


@pytest.mark.parametrize("target", supported_targets(), ids=repr)
def test_stack_at_rest_needs_no_second_read(pystrobe, spawn, target, tmp_path):
    """A stack that sits still (a recursion 80 deep, its leaf spinning) is
    checked from the second copies the snapshot's batched read ends with:
    one system call per sample. Checked by reading again, as each walk and
    each snapshot's code objects were before, it took two or three."""
    p = start(spawn, target, "hold", 10)
    per_sample, _, stats, stacks = steady_costs(pystrobe, p.pid, tmp_path)
    # A batch taken as paused midway (its thread preempted, as on a loaded
    # machine) has its walks' top frames read again: one more call each,
    # which the bound allows on top of the one a sample. On 3.8-3.10 such a
    # walk (frame objects) is checked by a read after the batch, and its
    # code objects then by one more, as the batch's second copies no longer
    # cover them: two calls more a paused batch, and a retry at times.
    batches = [tuple(map(int, m)) for m in
               re.findall(r"batched reads: +(\d+), (\d+) of them paused", stats)]
    assert len(batches) == 2, stats
    (b0, p0), (b1, p1) = batches
    paused = (p1 - p0) / max(b1 - b0, 1)
    per_paused = 3 if target.version < (3, 11) else 1
    assert per_sample < 1.5 + per_paused * paused, (per_sample, paused, stats)
    assert "hold" in stacks
