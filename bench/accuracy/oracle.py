"""The accuracy oracle: the truth about a target's stacks, and how far a
profile is from it.

The truth: the target is stopped (SIGSTOP) at random moments; once every
one of its threads shows state T/t in /proc/PID/task/*/stat it cannot
change, so `pystrobe dump --json` reads its stacks exactly (a read of a
stopped target that fails is itself a finding: a check rejects a state the
interpreter really passes through); then SIGCONT. The profile: collapsed
stacks of `pystrobe attach` (or of CPython 3.15's profiler) over the same
workload. Both become multisets of thread stacks (function names, root
first), compared as distributions with the total variation distance (TVD,
half the L1 distance: 0 identical, 1 disjoint):

- depth: the band of the workload's own call depth (chain length);
- leaf: (leaf function, depth band);
- stack: whole stacks.

A stack the workload's code cannot produce (a validator per workload,
VALIDATORS) counts as impossible, and falls in a category of its own in
every distribution. The noise floor is the mean TVD between two multinomial
draws from the truth of the sizes compared (truth stops, profile stacks):
what a perfect sampler would show.

Used by bench/accuracy/run.py (`make accuracy`) and
tests/integration/test_accuracy.py. Needs root (signals, ptrace rights).
"""
import collections
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
WORKLOADS_DIR = HERE / "workloads"
sys.path.insert(0, str(REPO / "tests" / "integration"))
import targets as _targets  # noqa: E402 (the interpreters the tests use)

READY_TIMEOUT = 30.0
STOP_TIMEOUT = 5.0

# --- workloads --------------------------------------------------------------

# name -> (script, extra arguments after DURATION SEED)
WORKLOADS = {
    "chains10": ("chains.py", ["10"]),
    "chains30": ("chains.py", ["30"]),
    "alternating": ("chains.py", ["3", "alternate"]),
    "generators": ("generators.py", []),
    "threads": ("threads.py", ["8"]),
    "coroutines": ("coroutines.py", []),
}


def one_target_per_version(found=None):
    """{(3, minor): Target} for 3.8 to 3.15: pyenv's build where there is
    one, else the sid root's (3.14, 3.15)."""
    found = _targets.supported_targets() if found is None else found
    pick = {}
    for t in found:
        if t.name.startswith("debian-"):
            continue
        cur = pick.get(t.version)
        if cur is None or (cur.chroot is not None and t.chroot is None):
            pick[t.version] = t
    return dict(sorted(pick.items()))


def start_workload(target, name, duration, seed=1, **popen_kw):
    """Start workload `name` on target; return (Popen, ready info dict).
    The caller kills the process."""
    script, extra = WORKLOADS[name]
    path = target.stage(WORKLOADS_DIR / script)
    p = target.popen(["-B", path, str(duration), str(seed), *extra],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen_kw)
    line = _readline(p, READY_TIMEOUT)
    if not line.startswith("ready"):
        err = b""
        if p.poll() is not None:
            err = p.stderr.read()
        kill(p)
        raise RuntimeError(f"{target} {name}: not ready: {line!r} {err[-500:]!r}")
    return p, json.loads(line[len("ready"):].strip() or "{}")


def _readline(p, timeout):
    import select
    fd = p.stdout.fileno()
    buf = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            return buf.decode(errors="replace")
        r, _, _ = select.select([fd], [], [], left)
        if r:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            buf += chunk
    return buf.split(b"\n", 1)[0].decode(errors="replace")


def kill(p):
    if p.poll() is None:
        try:
            os.kill(p.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        p.kill()
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


# --- the truth --------------------------------------------------------------

def thread_states(pid):
    """{tid: state letter} of every thread of pid."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                out[int(tid)] = f.read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            pass
    return out


def stop(pid, timeout=STOP_TIMEOUT):
    """SIGSTOP pid and wait until every thread is stopped (T or t)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while True:
        st = thread_states(pid)
        if st and all(s in "Tt" for s in st.values()):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"process {pid} not stopped after {timeout} s: {st}")
        time.sleep(0.0002)


def plain(name):
    """A function's plain name: qualnames (3.11+) and plain names (older
    targets, the reference) compare equal."""
    return name.rsplit(".", 1)[-1]


def dump(pystrobe, pid):
    """One `pystrobe dump --json` of pid: (stacks, errors) where stacks is a
    list of (host tid, tuple of names root first) and errors a list of
    strings (the dump's failure, or a thread's error)."""
    r = subprocess.run([str(pystrobe), "dump", "--json", str(pid)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    if r.returncode != 0:
        return [], [f"dump exited {r.returncode}: "
                    + r.stderr.decode(errors="replace").strip()[-300:]]
    doc = json.loads(r.stdout)
    stacks, errors = [], []
    for interp in doc["interpreters"]:
        for th in interp["threads"]:
            tid = th.get("host_thread_id") or th.get("native_thread_id")
            if th.get("error"):
                errors.append(str(th["error"]))
                continue
            names = tuple(plain(f["qualname"]) for f in th["frames"]
                          if f.get("filename") != "~")
            if names:
                stacks.append((tid, names))
    return stacks, errors


class ModuleReader:
    """pystrobe's own walker through its Python module (build/python, `make
    module`; the library `dump` uses), attached once: read() -> (stacks,
    errors) as dump() gives them. Attached once, a read of a stopped target
    takes well under a millisecond, where each `pystrobe dump` attaches
    anew; take_truth() compares a share of its reads with dump()'s."""

    def __init__(self, build, pid):
        sys.path.insert(0, str(Path(build) / "python"))
        import pystrobe as module
        self.unwinder = module.RemoteUnwinder(pid, all_threads=True)

    def read(self):
        try:
            trace = self.unwinder.get_stack_trace()
        except (RuntimeError, OSError) as e:
            return [], [f"{type(e).__name__}: {e}"]
        stacks = []
        for interp in trace:
            for th in interp.threads:
                names = tuple(plain(f.funcname) for f in reversed(th.frame_info)
                              if f.filename != "~")
                if names:
                    stacks.append((th.thread_id, names))
        return stacks, []


class Truth:
    """Stacks of a stopped target at random moments."""

    def __init__(self):
        self.stops = 0
        self.failed_stops = 0         # stops with some read error
        self.errors = collections.Counter()
        self.other_errors = collections.Counter()   # the checks' own failed reads
        self.samples = []             # per stop: list of (tid, stack)
        self.checks = collections.Counter()   # name -> stops read twice
        self.diffs = collections.defaultdict(list)  # name -> [(ours, theirs)]
        self.fail_examples = []       # (errors, {check name: its read}) of failed reads

    def items(self, part=None):
        """(tid, stack, 1) of every thread stack of every stop (part 0 or 1:
        the first or the second half of the stops only)."""
        half = len(self.samples) // 2
        for i, s in enumerate(self.samples):
            if part is None or (i >= half) == bool(part):
                for tid, st in s:
                    yield tid, st, 1

    def to_json(self):
        return {"stops": self.stops, "failed_stops": self.failed_stops,
                "errors": dict(self.errors.most_common(10)),
                "other_errors": dict(self.other_errors.most_common(10)),
                "checks": dict(self.checks),
                "diffs": {k: len(v) for k, v in self.diffs.items()},
                "fail_examples": self.fail_examples[:3],
                "diff_examples": {k: [list(map(list, d)) for d in v[:2]]
                                  for k, v in self.diffs.items()}}


def take_truth(read, pid, n, truth=None, gap_ms=2.0, rng=None, checks=()):
    """Stop pid n times at random moments (gaps uniform in 0..2*gap_ms),
    read(): (stacks, errors) its stacks while stopped, resume. checks:
    (name, every, other_read) whose sorted stacks, every every-th stop, must
    equal read()'s (another reader of the same stopped state); the first
    failed reads are kept with what the other readers saw then."""
    truth = truth or Truth()
    rng = rng or random.Random()
    for i in range(n):
        time.sleep(rng.uniform(0, 2 * gap_ms) / 1000.0)
        stop(pid)
        try:
            stacks, errors = read()
            seen = {}
            for name, every, other in checks:
                if i % every == 0 or (errors and len(truth.fail_examples) < 3):
                    theirs_st, their_err = other()
                    theirs = sorted(st for _, st in theirs_st)
                    truth.checks[name] += 1
                    seen[name] = [";".join(st) for st in theirs] + their_err
                    if their_err:
                        truth.other_errors[f"{name}: {their_err[0]}"] += 1
                        continue
                    mine = sorted(st for _, st in stacks)
                    if not errors and mine != theirs:
                        truth.diffs[name].append((mine, theirs))
            if errors and len(truth.fail_examples) < 3:
                truth.fail_examples.append((errors, seen))
        finally:
            os.kill(pid, signal.SIGCONT)
        truth.stops += 1
        if errors:
            truth.failed_stops += 1
            for e in errors:
                truth.errors[e] += 1
        truth.samples.append(stacks)
    return truth


class RefDumper:
    """CPython 3.15's _remote_debugging reading a 3.15 target, from a helper
    process inside the sid root: read() -> (stacks, errors) as dump()."""

    HELPER = ("import sys, json, _remote_debugging as rd\n"
              "u = rd.RemoteUnwinder(int(sys.argv[1]), all_threads=True)\n"
              "for line in sys.stdin:\n"
              "    out = []\n"
              "    try:\n"
              "        trace = u.get_stack_trace()\n"
              "    except Exception as e:\n"
              "        print(json.dumps({'error': f'{type(e).__name__}: {e}'}), flush=True)\n"
              "        continue\n"
              "    for it in trace:\n"
              "        for th in it.threads:\n"
              "            st = [f.funcname.rsplit('.', 1)[-1] for f in reversed(th.frame_info)\n"
              "                  if f.filename != '~']\n"
              "            if st: out.append(st)\n"
              "    print(json.dumps(sorted(out)), flush=True)\n")

    def __init__(self, target, pid):
        self.p = target.popen(["-c", self.HELPER, str(pid)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def read(self):
        self.p.stdin.write(b"x\n")
        self.p.stdin.flush()
        line = _readline(self.p, 30)
        if not line:
            raise RuntimeError("reference reader gave nothing: "
                               + self.p.stderr.read().decode(errors="replace")[-500:])
        doc = json.loads(line)
        if isinstance(doc, dict):
            return [], [doc["error"]]
        return [(None, tuple(s)) for s in doc], []

    def close(self):
        kill(self.p)


# --- profiles ---------------------------------------------------------------

def parse_collapsed(path):
    """{(tid, stack): count} of a collapsed file (pystrobe's FILE:QUALNAME:LINE
    frames or the reference's basename:func:line; markers such as <GC>
    dropped)."""
    out = collections.Counter()
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                continue
            stack, _, count = line.rpartition(" ")
            parts = stack.split(";")
            tid = None
            if parts and parts[0].startswith("tid:"):
                tid = int(parts[0][4:].split()[0])
                parts = parts[1:]
            names = []
            for part in parts:
                bits = part.rsplit(":", 2)
                if len(bits) != 3 or bits[0] == "~":
                    continue
                names.append(plain(bits[1]))
            if names:
                out[(tid, tuple(names))] += int(count)
    return out


_NUM = r"([\d,]+(?:\.\d+)?)"


def parse_summary(text, which="pystrobe"):
    """{samples, failed_pct, reread_pct} from a profiler's end summary (None
    if absent; reread_pct: pystrobe's stacks read again, changed while read)."""
    def num(pattern):
        m = re.search(pattern, text)
        return float(m.group(1).replace(",", "")) if m else None
    samples = num(r"Captured " + _NUM + r" samples?")
    reread = None
    if which == "pystrobe":
        failed = num(r"Failed samples: [\d,]+ \(" + _NUM + r"%\)")
        reread = num(r"Re-read stacks: [\d,]+ of [\d,]+ \(" + _NUM + r"%\)")
    else:
        failed = num(r"Error rate: " + _NUM)
    return {"samples": samples, "failed_pct": failed, "reread_pct": reread}


def profile_pystrobe(pystrobe, pid, seconds, out, rate="1000", extra=()):
    """`pystrobe attach -r RATE -d SECONDS --collapsed -o OUT PID`:
    (Counter of stacks, summary dict, stderr text)."""
    r = subprocess.run([str(pystrobe), "attach", "-r", str(rate), "-d", str(seconds),
                        *extra, "--collapsed", "-o", str(out), str(pid)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=seconds + 120)
    text = r.stderr.decode(errors="replace")
    if r.returncode != 0:
        raise RuntimeError(f"pystrobe attach exited {r.returncode}: {text[-500:]}")
    return parse_collapsed(out), parse_summary(text), text


def profile_reference(target, pid, seconds, rate="1000"):
    """CPython 3.15's `python3.15 -m profiling.sampling attach` in the sid
    root (needs /proc mounted there): (Counter, summary, text)."""
    host_dir, in_dir = target.stage_dir()
    out_in = f"{in_dir}/ref.txt"
    r = target.run(["-m", "profiling.sampling", "attach", "-a", "-r", str(rate),
                    "-d", str(max(1, round(seconds))), "--collapsed", "-o", out_in, str(pid)],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=seconds + 120,
                   env=dict(os.environ, LC_ALL="C"))
    text = r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")
    if r.returncode != 0:
        raise RuntimeError(f"reference exited {r.returncode}: {text[-500:]}")
    prof = parse_collapsed(target.host_path(out_in))
    import shutil
    shutil.rmtree(host_dir, ignore_errors=True)
    return prof, parse_summary(text, "reference"), text


# --- validators -------------------------------------------------------------

CHAIN = re.compile(r"^([a-z]+\d*)_(\d+)$")
MAIN = ("<module>", "main")
WORKER = ("_bootstrap", "_bootstrap_inner", "run", "work")
PIPE = ("sums", "batches", "evens", "squares", "source")


class Validator:
    """check(tid, stack) -> (ok, depth, reason): whether the workload's code
    can produce stack, and its depth (the workload's own call depth)."""

    band_width = 10

    def band(self, depth):
        if depth is None:
            return "impossible"
        if depth == 0:
            return "0"
        lo = (depth - 1) // self.band_width * self.band_width + 1
        return f"{lo}-{lo + self.band_width - 1}" if self.band_width > 1 else str(depth)


class ChainValidator(Validator):
    """Chains FAM_1..FAM_d (CHAIN names), all of one family, levels 1..d in
    order, nothing above them; directly above parent(FAM); the frames below
    one of `prefixes` when given; the family the thread's own when
    tid_family is given."""

    def __init__(self, parent, prefixes=None, idle=(), tid_family=None, band_width=10):
        self.parent = parent
        self.prefixes = prefixes
        self.idle = set(idle)
        self.tid_family = tid_family or {}
        self.band_width = band_width

    def check(self, tid, stack):
        first = None
        for i, f in enumerate(stack):
            if CHAIN.match(f):
                first = i
                break
        if first is None:
            if self.prefixes is not None and stack not in self.idle \
                    and stack not in self.prefixes:
                return False, None, "unknown stack"
            return True, 0, None
        fam = CHAIN.match(stack[first]).group(1)
        for lvl, f in enumerate(stack[first:], 1):
            m = CHAIN.match(f)
            if not m or m.group(1) != fam or int(m.group(2)) != lvl:
                return False, None, f"chain spliced: {stack[first + lvl - 2]} then {f}"
        below = stack[:first]
        if not below or below[-1] != self.parent(fam):
            return False, None, "chain under the wrong caller"
        if self.prefixes is not None and below not in self.prefixes:
            return False, None, "unknown frames below the chain"
        want = self.tid_family.get(tid)
        if want is not None and want != fam:
            return False, None, "another thread's chain"
        return True, len(stack) - first, None


class PipelineValidator(Validator):
    """generators.py: <module>;main then a prefix of PIPE."""

    band_width = 1

    def check(self, tid, stack):
        if stack[:2] != MAIN:
            return False, None, "unknown stack"
        rest = stack[2:]
        if rest != PIPE[:len(rest)]:
            return False, None, "pipeline stages out of order"
        return True, len(rest), None


def make_validator(workload, info=None):
    """The validator of workload; info: the workload's ready line (threads.py:
    {thread id: family})."""
    if workload in ("chains10", "chains30", "alternating"):
        return ChainValidator(lambda fam: "main", prefixes={MAIN})
    if workload == "threads":
        tf = {int(k): v for k, v in (info or {}).items()}
        return ChainValidator(lambda fam: "work", prefixes={MAIN, WORKER},
                              tid_family=tf)
    if workload == "coroutines":
        return ChainValidator(lambda fam: "stage" + fam[1:], band_width=5)
    if workload == "generators":
        return PipelineValidator()
    raise KeyError(workload)


# --- distances --------------------------------------------------------------

METRICS = ("depth", "leaf", "stack")


def distributions(items, validator):
    """From (tid, stack, weight) items: ({metric: Counter}, impossible weight,
    total weight, examples of impossible stacks)."""
    d = {m: collections.Counter() for m in METRICS}
    bad, total, examples = 0, 0, collections.Counter()
    for tid, stack, w in items:
        ok, depth, reason = validator.check(tid, stack)
        total += w
        if not ok:
            bad += w
            examples[(reason, ";".join(stack[-6:]))] += w
            depth = None
        band = validator.band(depth)
        d["depth"][band] += w
        d["leaf"][(stack[-1], band) if ok else "impossible"] += w
        d["stack"][stack if ok else "impossible"] += w
    return d, bad, total, examples


def tvd(p, q):
    """Total variation distance of two Counters (normalised here)."""
    sp, sq = sum(p.values()), sum(q.values())
    if not sp or not sq:
        return None
    return 0.5 * sum(abs(p.get(k, 0) / sp - q.get(k, 0) / sq) for k in set(p) | set(q))


def noise_floor(truth_dist, n, m, reps=20, seed=0):
    """Mean TVD between two draws of n and m from truth_dist (a Counter):
    the distance a perfect sampler of m shows from a truth of n."""
    if not truth_dist or not n or not m:
        return None
    rng = random.Random(seed)
    keys = list(truth_dist)
    weights = [truth_dist[k] for k in keys]
    total = 0.0
    for _ in range(reps):
        a = collections.Counter(rng.choices(keys, weights, k=n))
        b = collections.Counter(rng.choices(keys, weights, k=m))
        total += tvd(a, b)
    return total / reps


def compare(truth_items, profile_items, validator):
    """Distances of a profile from the truth, with noise floors:
    {metric: {tvd, floor}, impossible, total, examples}."""
    td, tbad, tn, texamples = distributions(truth_items, validator)
    pd, pbad, pn, pexamples = distributions(profile_items, validator)
    out = {"truth_stacks": tn, "truth_impossible": tbad,
           "truth_examples": [list(k) + [v] for k, v in texamples.most_common(3)],
           "profile_stacks": pn, "profile_impossible": pbad,
           "profile_examples": [list(k) + [v] for k, v in pexamples.most_common(5)]}
    for m in METRICS:
        out[m] = {"tvd": tvd(td[m], pd[m]), "floor": noise_floor(td[m], tn, pn)}
    out["depth_truth"] = _shares(td["depth"])
    out["depth_profile"] = _shares(pd["depth"])
    return out


def split_floor(truth, validator):
    """TVD between the first and the second half of one truth's stops, per
    metric (run.py takes them before and after the profile: this includes
    any drift of the workload)."""
    a, _, _, _ = distributions(truth.items(0), validator)
    b, _, _, _ = distributions(truth.items(1), validator)
    return {m: tvd(a[m], b[m]) for m in METRICS}


def _shares(c):
    s = sum(c.values()) or 1
    def order(kv):
        m = re.match(r"\d+", str(kv[0]))
        return (0, int(m.group())) if m else (1, str(kv[0]))
    return {str(k): round(v / s, 4) for k, v in sorted(c.items(), key=order)}


def counter_items(counter):
    return ((tid, st, w) for (tid, st), w in counter.items())
