"""--speedscope: the file is valid against the schema speedscope ships
(file-format-schema.json of the npm package, at a pinned version), speedscope's
own web app (from that package) imports it in headless Chromium, and its
per-function totals are pstats'.

The web app is opened on its sandwich view, whose table (total and self
samples of every function) is speedscope's own reading of the file: the
tests compare that table with what pystrobe sampled.
"""
import base64
import html
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from format_runs import SplitRun, note_split, rtarget, rwork  # noqa: F401 (fixtures)
from targets import ROOT
from test_flamegraph import HOSTILE, chromium
from test_outputs import STACKS, many_stacks, render
from test_sampling import def_line

SPEEDSCOPE_VERSION = "1.25.0"
NPM_PREFIX = ROOT / ".cache" / "npm"
PACKAGE = NPM_PREFIX / "node_modules" / "speedscope"


@pytest.fixture(scope="session")
def speedscope():
    """The speedscope npm package at SPEEDSCOPE_VERSION, installed into
    .cache/npm by this set-up if it is not there yet."""
    pkg_json = PACKAGE / "package.json"
    if not (pkg_json.is_file()
            and json.loads(pkg_json.read_text())["version"] == SPEEDSCOPE_VERSION):
        res = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix",
                              str(NPM_PREFIX), f"speedscope@{SPEEDSCOPE_VERSION}"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
        assert res.returncode == 0, f"npm install speedscope failed:\n{res.stdout.decode()}"
    release = PACKAGE / "dist" / "release"
    assert (release / "index.html").is_file() and (release / "file-format-schema.json").is_file()
    return release


def validate(speedscope, path):
    """Validate the file at path against speedscope's schema; return it."""
    import jsonschema  # python3-jsonschema
    schema = json.loads((speedscope / "file-format-schema.json").read_text())
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    jsonschema.validate(doc, schema)
    return doc


def function_totals(doc):
    """{(file, line, name): [self, total]} over every profile of doc, a
    function counted once per sample however often it is on the stack."""
    frames = doc["shared"]["frames"]
    totals = {}
    for prof in doc["profiles"]:
        assert prof["type"] == "sampled" and prof["unit"] == "none", prof["type"]
        assert len(prof["samples"]) == len(prof["weights"])
        assert prof["endValue"] - prof["startValue"] == sum(prof["weights"])
        for stack, w in zip(prof["samples"], prof["weights"]):
            assert stack and w > 0
            for i in set(stack):
                f = frames[i]
                key = (f.get("file", "~"), f.get("line", 0), f["name"])
                totals.setdefault(key, [0, 0])[1] += w
            leaf = frames[stack[-1]]
            totals[(leaf.get("file", "~"), leaf.get("line", 0), leaf["name"])][0] += w
    return totals


def open_in_app(speedscope, path, workdir):
    """Import the file at path into speedscope's web app (as its command line
    does: a script calling speedscope.loadFileFromBase64, named in the page's
    #localProfilePath) and show the sandwich view. Returns (title, rows,
    console): the page title, {name: (total, self)} of the table's rows, and
    what the page logged."""
    workdir = Path(workdir)
    loader = workdir / "load.js"
    data = base64.b64encode(Path(path).read_bytes()).decode()
    loader.write_text(f"speedscope.loadFileFromBase64({json.dumps(Path(path).name)}, "
                      f"{json.dumps(data)})")
    page = speedscope / "index.html"
    url_page = workdir / "app.url"
    url_page.write_text(f"{page.resolve().as_uri()}#localProfilePath={loader}&view=sandwich")
    dom, err = chromium_url(url_page.read_text(), workdir)
    title = re.search(r"<title>(.*?)</title>", dom, re.S)
    text = html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom)))
    rows = {}
    for total, self_, name in re.findall(
            r"([\d,]+) \([^)]*\) ([\d,]+) \([^)]*\) (\S+)", text):
        rows.setdefault(name, (int(total.replace(",", "")), int(self_.replace(",", ""))))
    console = "\n".join(l for l in err.splitlines() if ":CONSOLE" in l)
    return html.unescape(title.group(1)) if title else None, rows, console


def chromium_url(url, workdir):
    """chromium of test_flamegraph on a URL (with a fragment) rather than a
    file; console messages go to stderr."""
    import test_flamegraph
    profile_dir = Path(workdir) / "chromium-profile"
    profile_dir.mkdir(exist_ok=True)
    cmd = [test_flamegraph.chromium_binary(), "--headless", "--no-sandbox", "--disable-gpu",
           "--enable-unsafe-swiftshader", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run",
           f"--user-data-dir={profile_dir}", "--virtual-time-budget=10000",
           "--window-size=1400,900", "--enable-logging=stderr", "--v=0", "--dump-dom", url]
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         timeout=test_flamegraph.CHROMIUM_TIMEOUT)
    assert res.returncode == 0, f"chromium exited {res.returncode}: {res.stderr[-2000:]!r}"
    return res.stdout.decode("utf-8", "replace"), res.stderr.decode("utf-8", "replace")


def assert_imported(title, rows, console, name):
    assert "Failed to load format" not in console and "Unrecognized format" not in console, \
        console
    assert "Importing as speedscope json file" in console, console
    assert title == f"{name} - speedscope", f"the app did not load the profile: {title!r}"
    assert rows, "the app's sandwich view has no rows"


def pstats_totals(path):
    import pstats
    return {k: [v[0], v[1]] for k, v in pstats.Stats(str(path)).stats.items()}


# --- built profiles -------------------------------------------------------------

def test_many_stacks_match_pstats(speedscope, tmp_path):
    """The same profile as speedscope and as pstats: every function's direct
    and cumulative samples agree, and the file is valid."""
    stacks = many_stacks()
    doc = validate(speedscope, render(tmp_path, "--speedscope", stacks))
    ours = function_totals(doc)
    theirs = pstats_totals(render(tmp_path, "--pstats", stacks))
    assert ours == theirs
    names = [p["name"] for p in doc["profiles"]]
    assert sorted(names) == sorted(f"Thread {t}" for t in (11, 12, 13, 2**63 + 5))
    weights = [sum(p["weights"]) for p in doc["profiles"]]
    assert weights == sorted(weights, reverse=True), "the busiest thread is not first"


def render_to(tmp_path, fmt, stacks, name):
    """render() into tmp_path/name."""
    out = tmp_path / name
    render(tmp_path, fmt, stacks).rename(out)
    return out


def test_small_profile_in_app(speedscope, tmp_path):
    out = render_to(tmp_path, "--speedscope", STACKS, "small.speedscope.json")
    doc = validate(speedscope, out)
    assert function_totals(doc) == pstats_totals(render(tmp_path, "--pstats"))
    title, rows, console = open_in_app(speedscope, out, tmp_path)
    assert_imported(title, rows, console, doc["name"])
    # Thread 1 is shown first: rec is on every one of its 8 samples, leaf in 5.
    assert rows["leaf"] == (5, 5) and rows["rec"] == (8, 3), rows


def test_hostile_names(speedscope, tmp_path):
    """Names that are markup stay text in the file and in the app."""
    lines = [f"tid:7;/srv/evil.py:main:1;/srv/e{i}.py:{n}:{i + 1} {10 + i}"
             for i, n in enumerate(HOSTILE)]
    out = render_to(tmp_path, "--speedscope", "\n".join(lines) + "\n", "evil.json")
    raw = out.read_text(encoding="utf-8")
    assert "<" not in raw and ">" not in raw, "markup characters left unescaped"
    doc = validate(speedscope, out)
    assert {f["name"] for f in doc["shared"]["frames"]} == set(HOSTILE) | {"main"}
    title, rows, console = open_in_app(speedscope, out, tmp_path)
    assert_imported(title, rows, console, doc["name"])
    assert rows["main"][0] == sum(10 + i for i in range(len(HOSTILE))), rows


# --- real targets ---------------------------------------------------------------

@pytest.fixture(scope="module")
def split_speedscope(pystrobe, rwork, tmp_path_factory):
    return SplitRun(pystrobe, rwork, tmp_path_factory.mktemp("speedscope"), ["--speedscope"],
                    "run.speedscope.json", "attach.speedscope.json")


def test_split_run_and_attach(split_speedscope, speedscope, rwork, tmp_path):
    """`run` and `attach` on split_3_1.py: valid files with alpha and beta at
    their definitions in the script (their share printed), one profile for
    the one thread,
    and speedscope's app shows the same counts as the file."""
    sp = split_speedscope
    script = rwork.path("split_3_1.py")
    for what, out, r0, r1 in sp.windows():
        doc = validate(speedscope, out)
        # named after the main thread's Python name once threading is imported
        names = [p["name"] for p in doc["profiles"]]
        assert len(names) == 1 and re.fullmatch(rf"Thread {sp.pid}( \(MainThread\))?",
                                                names[0]), (what, names)
        totals = function_totals(doc)
        for name in ("alpha", "beta", "main"):
            key = (script, def_line(rwork.host("split_3_1.py"), name), name)
            assert key in totals, f"{what}: {key} not in {sorted(totals)[:20]}"
        a = totals[(script, def_line(rwork.host("split_3_1.py"), "alpha"), "alpha")]
        b = totals[(script, def_line(rwork.host("split_3_1.py"), "beta"), "beta")]
        note_split(f"{what} speedscope self samples", a[0], b[0], r0, r1)
        workdir = tmp_path / what
        workdir.mkdir()
        title, rows, console = open_in_app(speedscope, out, workdir)
        assert_imported(title, rows, console, doc["name"])
        assert rows["alpha"] == (a[1], a[0]) and rows["beta"] == (b[1], b[0]), \
            f"{what}: the app shows {rows.get('alpha')}, {rows.get('beta')}; the file {a}, {b}"
