"""The quick version of the accuracy oracle (bench/accuracy, `make accuracy`;
issue 33): on each interpreter, a target stopped at a few hundred random
moments must read every time, and its stacks must be ones its code can
produce; pystrobe's profile of the same process must hold no impossible
stack and be near the stopped truth (a loose bound, which a correct build
passes on a loaded machine). Where today's build is known to miss a bound
(issue 33), the test is marked xfail(strict=False) with the reason, so that
it still runs and reports."""
import os
import random
import sys

import pytest

from targets import ROOT

sys.path.insert(0, str(ROOT / "bench" / "accuracy"))
import oracle  # noqa: E402

STOPS = 200            # stops of the truth in the profile test
GEN_STOPS = 120        # stops of the generator and coroutine pipelines
PROFILE_SECONDS = 2
# The profile's distance from the truth (depth bands), above the noise floor
# of independent draws of the sizes compared. The floor understates the noise
# on a loaded machine, where a profile samples the stack of a target waiting
# for a CPU many times, so the margin lies above the distance between two
# profiles of one process there (bench/ACCURACY.md, A-B), and well below that
# of a sampler that drops the deepest quarter of the stacks.
TVD_MARGIN = 0.2
FAILED_PCT_MAX = 25.0   # the profile's failed samples

PROFILE_3_8_10 = (
    "issue 33: on 3.8-3.10, on an idle machine (the profiler's walk then runs "
    "beside the target on another core), a third or more of the samples of "
    "chains that change every few tens of microseconds are torn, and the kept "
    "ones are too shallow for TVD_MARGIN (bench/ACCURACY.md)")


def xfail_if(request, cond, reason):
    if cond:
        request.node.add_marker(pytest.mark.xfail(reason=reason, strict=False))


def build_dir():
    return os.environ.get("PYSTROBE_BUILD", str(ROOT / "build"))


def stopped_truth(pystrobe, target, workload, stops, seed=1):
    """Start workload on target, take the truth at stops moments (every 20th
    also read by `pystrobe dump --json`); return (Popen, info, Truth). The
    caller kills the process."""
    p, info = oracle.start_workload(target, workload, 600, seed)
    try:
        reader = oracle.ModuleReader(build_dir(), p.pid)
        checks = [("dump", 20, lambda: oracle.dump(pystrobe, p.pid))]
        truth = oracle.take_truth(reader.read, p.pid, stops, gap_ms=2.0,
                                  rng=random.Random(seed), checks=checks)
    except BaseException:
        oracle.kill(p)
        raise
    return p, info, truth


@pytest.fixture(scope="module")
def chains(target, pystrobe, tmp_path_factory):
    """chains10 on target: truth before and after a pystrobe profile."""
    p, info, truth = stopped_truth(pystrobe, target, "chains10", STOPS // 2)
    try:
        out = tmp_path_factory.mktemp("accuracy") / "collapsed.txt"
        prof, summary, text = oracle.profile_pystrobe(pystrobe, p.pid, PROFILE_SECONDS, out)
        reader = oracle.ModuleReader(build_dir(), p.pid)
        oracle.take_truth(reader.read, p.pid, STOPS - STOPS // 2, truth=truth,
                          rng=random.Random(2))
    finally:
        oracle.kill(p)
    validator = oracle.make_validator("chains10", info)
    cmp = oracle.compare(list(truth.items()), list(oracle.counter_items(prof)), validator)
    return truth, cmp, summary, text


def test_stopped_chains_read(request, target, chains):
    """Every moment of a stopped target reads, and the CLI's dump reads it
    the same as the library."""
    truth, _, _, _ = chains
    assert truth.failed_stops == 0, truth.to_json()
    assert not truth.diffs, truth.to_json()


# Stopped-read failures bench/ACCURACY.md shows, by (workload, version).
STOPPED_XFAIL = {}


@pytest.mark.parametrize("workload", ["generators", "coroutines"])
def test_stopped_reads(request, target, pystrobe, workload):
    """The same with frames switching fast: a generator pipeline driven from
    C, an asyncio pipeline (tasks, queues, callbacks)."""
    reason = STOPPED_XFAIL.get((workload, target.version))
    xfail_if(request, reason is not None, reason)
    p, info, truth = stopped_truth(pystrobe, target, workload, GEN_STOPS)
    oracle.kill(p)
    assert truth.failed_stops == 0, truth.to_json()
    assert not truth.diffs, truth.to_json()
    validator = oracle.make_validator(workload, info)
    _, bad, _, examples = oracle.distributions(truth.items(), validator)
    assert bad == 0, examples


def test_truth_is_possible(chains):
    """The stopped truth holds no impossible stack (else the validator or the
    stopped read is wrong, and nothing else here means anything)."""
    truth, cmp, _, _ = chains
    assert cmp["truth_stacks"] >= STOPS - truth.failed_stops
    assert cmp["truth_impossible"] == 0, cmp["truth_examples"]


# Impossible stacks a profile may hold. The torn walks that let them through
# are closed where a check is a later read (deterministic: test_images'
# test_splice and test_splice_top); a copy paused for a few microseconds
# inside one batch, shorter than the pause mem_batch_paused flags, can still
# splice two chains if the caller is back in place by its second copy (issue
# 33). That is rarer than one in tens of thousands of samples; the torn walks
# this test first caught gave 0.3-1% (six or more here).
IMPOSSIBLE_MAX = 1


def test_profile_has_at_most_one_impossible_stack(target, chains):
    _, cmp, _, _ = chains
    assert cmp["profile_impossible"] <= IMPOSSIBLE_MAX, cmp["profile_examples"]


@pytest.mark.skipif(bool(os.environ.get("PYSTROBE_SANITIZED")),
                    reason="a statistical bound on the timing of the build users run: "
                    "a walk under the sanitizers takes several times longer, so its "
                    "profile of a stack changing every few microseconds is a "
                    "different measurement (the normal pass checks it)")
def test_profile_near_truth(request, target, chains):
    """Depth bands within a loose margin of the truth's; few failed samples."""
    xfail_if(request, target.version <= (3, 10), PROFILE_3_8_10)
    _, cmp, summary, text = chains
    assert cmp["profile_stacks"] > 100, text
    d = cmp["depth"]
    assert d["tvd"] <= d["floor"] + TVD_MARGIN, (d, cmp["depth_profile"],
                                                 cmp["depth_truth"])
    assert summary["failed_pct"] is not None and summary["failed_pct"] <= FAILED_PCT_MAX, text


# --- the oracle's own pieces, without a target ---------------------------------

def test_validator_rejects_spliced_chains():
    v = oracle.make_validator("chains10")
    main = ("<module>", "main")
    assert v.check(1, main) == (True, 0, None)
    assert v.check(1, main + ("a_1", "a_2", "a_3"))[:2] == (True, 3)
    for bad in (main + ("a_1", "b_2"),            # leaf of another chain
                main + ("a_1", "a_3"),            # a level skipped
                main + ("a_2", "a_3"),            # not from the start
                ("<module>", "a_1"),              # not under main
                main + ("a_1", "x"),              # something above the leaf
                ("<module>", "main", "other")):
        assert not v.check(1, bad)[0], bad
    t = oracle.make_validator("threads", {"7": "t0", "8": "t1"})
    worker = ("_bootstrap", "_bootstrap_inner", "run", "work")
    assert t.check(7, worker + ("t0_1",))[0]
    assert not t.check(8, worker + ("t0_1",))[0]     # another thread's chain
    g = oracle.make_validator("generators")
    assert g.check(1, main + ("sums", "batches"))[0]
    assert not g.check(1, main + ("sums", "evens"))[0]
    c = oracle.make_validator("coroutines")
    assert c.check(1, ("<module>", "x", "stage2", "s2_1", "s2_2"))[0]
    assert not c.check(1, ("<module>", "x", "stage1", "s2_1"))[0]


def test_distance_and_floor():
    from collections import Counter
    a = Counter({"x": 50, "y": 50})
    assert oracle.tvd(a, a) == 0
    assert oracle.tvd(a, Counter({"z": 3})) == 1
    assert abs(oracle.tvd(a, Counter({"x": 3, "y": 1})) - 0.25) < 1e-9
    floor = oracle.noise_floor(a, 2000, 2000)
    assert 0 < floor < 0.05
