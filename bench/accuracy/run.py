#!/usr/bin/env python3
"""`make accuracy`: pystrobe's profiles against the stopped truth, on every
CPython 3.8 to 3.15, and CPython 3.15's own profiler beside it.

For each version and workload (bench/accuracy/workloads, named in
oracle.WORKLOADS): start the workload, take half the truth (the target
stopped at random moments and read while stopped, oracle.take_truth), profile
it with `pystrobe attach -r RATE -d SECONDS --collapsed` (and on 3.15 with
`python3.15 -m profiling.sampling attach -a` in the sid root), take the
other half of the truth, and compare (oracle.compare). Writes the tables to
bench/ACCURACY.md and every figure to the --json file.

    run.py [--build build] [--versions 3.8,3.15] [--workloads chains10,threads]
           [--stops 2000] [--seconds 8] [--no-reference]

Needs root (signals and reads of other processes; chroot, and /proc mounted
in the sid root for the reference: the script re-executes itself in a
private mount namespace, as bench/run.py does).
"""
import argparse
import datetime
import json
import os
import platform
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import oracle  # noqa: E402

REPO = oracle.REPO
NS_ENV = "PYSTROBE_ACCURACY_IN_NS"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=str(REPO / "build"))
    p.add_argument("--versions", default="", help="e.g. 3.8,3.12 (default: all found)")
    p.add_argument("--workloads", default=",".join(oracle.WORKLOADS))
    p.add_argument("--stops", type=int, default=1600, help="stops of the truth, in all")
    p.add_argument("--seconds", type=float, default=8.0, help="length of each profile")
    p.add_argument("--rate", default="1000", help="sampling rate of the profiles (Hz)")
    p.add_argument("--gap-ms", type=float, default=2.0,
                   help="mean running time between two stops")
    p.add_argument("--no-reference", action="store_true")
    p.add_argument("--out", default=str(REPO / "bench" / "ACCURACY.md"))
    p.add_argument("--json", default=str(REPO / "bench" / "accuracy" / "results.json"))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--from-json", metavar="FILE",
                   help="only write --out again from the figures of an earlier run")
    return p.parse_args()


def enter_private_mount_namespace():
    if os.environ.get(NS_ENV) == "1" or os.geteuid() != 0 or not shutil.which("unshare"):
        return
    os.environ[NS_ENV] = "1"
    os.execv(shutil.which("unshare"), ["unshare", "--mount", "--propagation", "private",
                                       sys.executable, os.path.abspath(__file__),
                                       *sys.argv[1:]])


def run_one(args, target, workload, pystrobe, use_ref, tmp):
    rng = random.Random(args.seed)
    p, info = oracle.start_workload(target, workload, 3600, args.seed)
    ref_reader = None
    try:
        time.sleep(0.5)
        validator = oracle.make_validator(workload, info)
        reader = oracle.ModuleReader(args.build, p.pid)
        checks = [("dump", 25, lambda: oracle.dump(pystrobe, p.pid))]
        if use_ref:
            ref_reader = oracle.RefDumper(target, p.pid)
            checks.append(("reference", 10, ref_reader.read))
        t0 = time.monotonic()
        truth = oracle.take_truth(reader.read, p.pid, args.stops // 2, gap_ms=args.gap_ms,
                                  rng=rng, checks=checks)
        t_truth = time.monotonic() - t0
        # Each profiler twice, half the time each: the two halves' distance
        # is the profile's own repeatability (its samples are not
        # independent draws when the target's stack stays put for a while,
        # e.g. while it waits for a CPU on a loaded machine).
        half = args.seconds / 2
        profiles = {}
        for i in range(2):
            out = Path(tmp) / f"{target.name}-{workload}-{i}.txt"
            prof, summ, _ = oracle.profile_pystrobe(pystrobe, p.pid, half, out,
                                                    rate=args.rate)
            profiles.setdefault("pystrobe", []).append((prof, summ))
        if use_ref:
            for i in range(2):
                prof, summ, _ = oracle.profile_reference(target, p.pid, half,
                                                         rate=args.rate)
                profiles.setdefault("reference", []).append((prof, summ))
        t0 = time.monotonic()
        oracle.take_truth(reader.read, p.pid, args.stops - args.stops // 2, truth=truth,
                          gap_ms=args.gap_ms, rng=rng, checks=checks)
        t_truth += time.monotonic() - t0
    finally:
        if ref_reader is not None:
            ref_reader.close()
        oracle.kill(p)
    res = {"target": target.name, "version": "%d.%d" % target.version,
           "workload": workload, "truth": truth.to_json(),
           "truth_seconds": round(t_truth, 1),
           "split_half": oracle.split_floor(truth, validator), "profilers": {}}
    for which, halves in profiles.items():
        prof = halves[0][0] + halves[1][0]
        samples = [h[1].get("samples") or 0 for h in halves]
        failed = [h[1].get("failed_pct") for h in halves]
        reread = [h[1].get("reread_pct") for h in halves]
        summ = {"samples": sum(samples),
                "failed_pct": None if None in failed else
                sum(f * n for f, n in zip(failed, samples)) / max(1, sum(samples)),
                "reread_pct": None if None in reread else
                sum(f * n for f, n in zip(reread, samples)) / max(1, sum(samples))}
        c = oracle.compare(list(truth.items()), list(oracle.counter_items(prof)), validator)
        c["summary"] = summ
        a, _, na, _ = oracle.distributions(oracle.counter_items(halves[0][0]), validator)
        b, _, nb, _ = oracle.distributions(oracle.counter_items(halves[1][0]), validator)
        c["repeat"] = {m: {"tvd": oracle.tvd(a[m], b[m]),
                           "floor": oracle.noise_floor(a[m], na, nb)} for m in oracle.METRICS}
        res["profilers"][which] = c
    return res


def fmt(v, spec=".3f"):
    return "–" if v is None else format(v, spec)


def row(res, which):
    c = res["profilers"].get(which)
    tr = res["truth"]
    name = res["version"] + (" ref" if which == "reference" else "")
    if c is None:
        return None
    s = c["summary"]
    read_fail = f"{tr['failed_stops']}/{tr['stops']}"
    m = {k: f"{fmt(c[k]['tvd'])} ({fmt(c[k]['floor'])})" for k in oracle.METRICS}
    deep = sum(v for k, v in c["depth_profile"].items() if k in ("31-40",))
    deep_t = sum(v for k, v in c["depth_truth"].items() if k in ("31-40",))
    rep = c.get("repeat", {}).get("depth")
    rep = f"{fmt(rep['tvd'])} ({fmt(rep['floor'])})" if rep else "–"
    return (name, res["workload"], read_fail if which == "pystrobe" else "",
            f"{c['profile_stacks']:,}", fmt(s.get("failed_pct"), ".2f"),
            f"{c['profile_impossible']} / {c['truth_impossible']}",
            m["depth"], m["leaf"], m["stack"], rep,
            f"{deep:.3f} / {deep_t:.3f}" if res["workload"] in ("chains10", "chains30",
                                                                   "alternating", "threads")
            else "")


HEAD = ("version", "workload", "stopped reads failed", "profile stacks", "failed %",
        "impossible (profile / truth)", "TVD depth (floor)", "TVD leaf (floor)",
        "TVD stack (floor)", "TVD depth A-B (floor)", "share 31-40 (profile / truth)")


def md_table(rows):
    lines = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def merged_errors(errors):
    """Read errors with thread ids taken out, so the same check counts once."""
    out = {}
    for k, v in errors.items():
        k = re.sub(r"thread \d+", "thread N", k)
        out[k] = out.get(k, 0) + v
    return out


def write_md(args, results, meta):
    started, elapsed, load = meta["started"], meta["elapsed"], meta["load"]
    args = argparse.Namespace(**{**vars(args), **meta.get("args", {})})
    rows = []
    for res in results:
        for which in ("pystrobe", "reference"):
            r = row(res, which)
            if r:
                rows.append(r)
    errors = [r for r in results if "error" in r]
    text = [
        "# Accuracy: pystrobe's profiles against the stopped truth",
        "",
        "Written by `make accuracy` (bench/accuracy/run.py; the method is in",
        "bench/accuracy/oracle.py's docstring). Each row is one target process running",
        "one workload of bench/accuracy/workloads: the truth is the process stopped",
        f"(SIGSTOP, every thread in state T) at {args.stops} random moments (half before,",
        "half after the profile) and read while stopped by pystrobe's walker (its Python",
        "module; every 25th stop also by `pystrobe dump --json`, and on 3.15 every 10th",
        "by CPython's `_remote_debugging`: they must agree); the profile is",
        f"`pystrobe attach -r {args.rate} -d {args.seconds / 2:g} --collapsed`, twice (rows",
        f"`3.15 ref`: `python3.15 -m profiling.sampling attach -a -r {args.rate} -d "
        f"{max(1, round(args.seconds / 2))}",
        "--collapsed`, twice, on the same process, after pystrobe).",
        "",
        "- **stopped reads failed**: stops whose read failed although the target was",
        "  stopped (a check rejecting a state the interpreter really passes through).",
        "- **failed %**: the profiler's own failed-sample rate (its end summary).",
        "- **impossible**: thread stacks the workload's code cannot produce (its validator",
        "  in oracle.py), in the profile / in the truth (the truth must have 0).",
        "- **TVD**: total variation distance from the truth (0 same, 1 disjoint) of the",
        "  distribution of depth bands (the workload's own call depth: 0, 1-10, 11-20, ...;",
        "  generators: pipeline stages), of (leaf function, band), and of whole stacks;",
        "  impossible stacks are a category of their own. **floor**: the mean TVD of two",
        "  draws from the truth of the sizes compared, what a perfect sampler shows.",
        "- **A-B**: each profiler ran twice on the process, half the time each (A, B; the",
        "  other columns take both together): the depth TVD between A and B, with the",
        "  floor of independent draws of their sizes. Where A-B is far above its floor the",
        "  profile's samples are not independent (a stack that stays put for a while, as",
        "  while the target waits for a CPU on a loaded machine, is sampled many times),",
        "  and the floor of the other columns understates the noise in the same measure.",
        "- **share 31-40**: share of thread stacks 31 to 40 calls deep.",
        "",
        f"Run {started} UTC, {elapsed / 60:.0f} minutes, on {platform.node()} "
        f"({os.cpu_count()} cores), load average {load} (the workloads' threads and the",
        "profilers count in it; the notes below say what else ran, if anything).",
        "",
        md_table(rows),
        "",
    ]
    text += [f"Note: {n}\n" for n in meta.get("notes", [])]
    text += ["## Details", ""]
    for res in results:
        if "error" in res:
            text.append(f"- {res['version']} {res['workload']}: **run failed**: {res['error']}")
            continue
        tr = res["truth"]
        bits = [f"truth {tr['stops']} stops in {res['truth_seconds']} s",
                "split-half TVD depth/leaf/stack "
                + "/".join(fmt(res["split_half"][m], ".3f") for m in oracle.METRICS)]
        if tr["errors"]:
            bits.append("read errors: " + "; ".join(
                f"{k} (x{v})" for k, v in merged_errors(tr["errors"]).items()))
        for errs, seen in tr.get("fail_examples", [])[:2]:
            for name, stacks in seen.items():
                if name == "reference":
                    bits.append("a failed read's moment as `_remote_debugging` read it: "
                                + " | ".join(f"`…{st[-90:]}`" for st in stacks
                                             if st.count(";") > 1))
        if tr.get("other_errors"):
            bits.append("the other readers failed: " + "; ".join(
                f"{k} (x{v})" for k, v in merged_errors(tr["other_errors"]).items()))
        for name, n in tr["checks"].items():
            bits.append(f"{name} agreed on {n - tr['diffs'].get(name, 0)}/{n} stops")
        for which, c in res["profilers"].items():
            if c["profile_examples"]:
                bits.append(f"{which} impossible e.g. " + "; ".join(
                    f"`{e[1]}` ({e[0]}, x{e[2]})" for e in c["profile_examples"][:2]))
            if c["truth_examples"]:
                bits.append("truth impossible e.g. " + "; ".join(
                    f"`{e[1]}` ({e[0]}, x{e[2]})" for e in c["truth_examples"][:2]))
            bits.append(f"{which} depth " + json.dumps(c["depth_profile"])
                        + " truth " + json.dumps(c["depth_truth"]))
        text.append(f"- {res['version']} {res['workload']}: " + "; ".join(bits))
    if errors:
        text.append("")
    Path(args.out).write_text("\n".join(text) + "\n")


def main():
    args = parse_args()
    if args.from_json:
        doc = json.loads(Path(args.from_json).read_text())
        write_md(args, doc["results"], doc["meta"])
        print(f"wrote {args.out}")
        return
    enter_private_mount_namespace()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    if os.geteuid() != 0:
        raise SystemExit("accuracy: needs root")
    pystrobe = Path(args.build) / "pystrobe"
    targets = oracle.one_target_per_version()
    if args.versions:
        want = {tuple(int(x) for x in v.split(".")) for v in args.versions.split(",")}
        targets = {v: t for v, t in targets.items() if v in want}
    workloads = [w for w in args.workloads.split(",") if w]
    mounted = False
    sid = REPO / ".cache" / "sid-root"
    if not args.no_reference and (3, 15) in targets and not os.path.ismount(sid / "proc"):
        subprocess.run([str(REPO / "scripts" / "sidroot.sh"), "mount"], check=True)
        mounted = True
    started = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M")
    t_start = time.monotonic()
    loads = []
    results = []
    tmp = tempfile.mkdtemp(prefix="pystrobe-accuracy-")
    try:
        for version, target in targets.items():
            for wl in workloads:
                use_ref = version == (3, 15) and not args.no_reference
                loads.append(os.getloadavg()[0])
                t0 = time.monotonic()
                try:
                    res = run_one(args, target, wl, pystrobe, use_ref, tmp)
                except Exception as e:  # one broken run must not lose the others
                    res = {"target": target.name, "version": "%d.%d" % version,
                           "workload": wl, "error": f"{type(e).__name__}: {e}"[:500],
                           "profilers": {}, "truth": {}}
                results.append(res)
                print(f"{target.name:14} {wl:12} {time.monotonic() - t0:5.0f} s  "
                      + "  ".join(" ".join(x for x in (row(res, w) or ())[2:9])
                                  for w in ("pystrobe", "reference")
                                  if w in res["profilers"])
                      + (res.get("error") or ""), flush=True)
                meta = {"started": started, "elapsed": time.monotonic() - t_start,
                        "load": f"{min(loads):.1f} to {max(loads):.1f}",
                        "args": {k: getattr(args, k) for k in ("stops", "seconds", "rate")}}
                Path(args.json).write_text(json.dumps({"meta": meta, "results": results},
                                                      indent=1, default=str))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if mounted:
            subprocess.run([str(REPO / "scripts" / "sidroot.sh"), "umount"])
    if results:
        write_md(args, results, meta)
    print(f"wrote {args.out} and {args.json}")


if __name__ == "__main__":
    main()
