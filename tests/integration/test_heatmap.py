"""--heatmap: the directory of pages, from `run` and `attach` of real
targets on 3.8, 3.12 and sid-3.15 (whose files only its root holds: the
sources must be read through the target's /proc/PID/root).

What the pages must do: list every file with samples under its group, each
file once, totals never above the samples; show every line of the source
with its self and total samples (a file's lines adding up to its self
samples),
link a call site to its callee and a function to its callers; say when a
file changed after the target started and still count a file that cannot
be read, and keep the source of a file rewritten while it was sampled as
it was; and keep every name and line of source text (no element, no script
from the target, checked in headless Chromium's DOM).
"""
import html
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import recording_format
from format_runs import (SplitRun, note_split, representative_targets,  # noqa: F401 (fixtures)
                         rtarget, rwork)
from test_flamegraph import chromium
from conftest import SessionProcesses
from targets import supported_targets
from test_sampling import REALTIME, LongRunning, Strobe, def_line

ROW = re.compile(r'<tr id="L(-?\d+)"><td class="n">.*?</td>(?:<td class="h\d+">(\d+)</td>'
                 r'<td class="h\d+">(\d+)</td>|<td></td><td></td>)<td class="src[^"]*">(.*?)</td>'
                 r'<td class="nav">(.*?)</td></tr>')
INDEX_ROW = re.compile(r'<tr><td class="f"><a href="(file_\d{4}\.html)">(.*?)</a></td>'
                       r'<td>(\d+)</td><td>([\d.]+)</td><td>(\d+)</td><td>([\d.]+)</td>')


class Heatmap:
    def __init__(self, d):
        self.dir = Path(d)
        index = (self.dir / "index.html").read_text(encoding="utf-8")
        self.index = index
        m = re.search(r"(\d+) samples with Python frames", index)
        assert m, index[:2000]
        self.samples = int(m.group(1))
        # {file name: (page, total, self)}, and the group each is under.
        self.files, self.groups = {}, {}
        for part in re.split(r'<h2 id="g\d">', index)[1:]:
            group = part.split(" (", 1)[0]
            for page, name, total, _, self_, _ in INDEX_ROW.findall(part):
                name = html.unescape(name)
                assert name not in self.files, f"{name} listed twice"
                self.files[name] = (page, int(total), int(self_))
                self.groups[name] = group

    def page(self, name):
        return (self.dir / self.files[name][0]).read_text(encoding="utf-8")

    def lines(self, name):
        """{line: (self, total, source text, nav html)} of a file's page."""
        out = {}
        for ln, s, t, src, nav in ROW.findall(self.page(name)):
            out[int(ln)] = (int(s or 0), int(t or 0), html.unescape(src), nav)
        return out


LOCAL_REF = re.compile(r"^(?:(?:index|file_\d{4,})\.html)?(?:#L-?\d+)?$")


def check_offline(hm):
    """Every page loads nothing: no src attribute, links only to the
    directory's own pages, and a policy that forbids fetching anything."""
    for page in ["index.html"] + [p for p, _, _ in hm.files.values()]:
        text = (hm.dir / page).read_text(encoding="utf-8")
        assert "Content-Security-Policy\" content=\"default-src 'none';" in text, page
        assert not re.search(r"<[^<>]*\ssrc=", text), page
        refs = re.findall(r'<[^<>]*\shref="([^"]*)"', text)
        assert all(LOCAL_REF.match(r) for r in refs), [r for r in refs if not LOCAL_REF.match(r)]


def check_consistent(hm):
    assert hm.files, "no files in the index"
    check_offline(hm)
    for name, (page, total, self_) in hm.files.items():
        assert 0 < total <= hm.samples and self_ <= total, (name, total, self_, hm.samples)
        lines = hm.lines(name)
        assert sum(s for s, _, _, _ in lines.values()) == self_, name
        assert all(s <= t <= total for s, t, _, _ in lines.values()), name


# --- split_3_1.py, run and attach -------------------------------------------------

@pytest.fixture(scope="module")
def split_heatmap(pystrobe, rwork, tmp_path_factory):
    return SplitRun(pystrobe, rwork, tmp_path_factory.mktemp("heatmap"), ["--heatmap"],
                    "run_heatmap", "attach_heatmap")


def test_split_run_and_attach(split_heatmap, rwork):
    """The script is "your code", its source is on its page, alpha's and
    beta's lines hold samples, the call site links to both and each
    function's first line to its caller."""
    sp = split_heatmap
    script = rwork.path("split_3_1.py")
    host_script = rwork.host("split_3_1.py")
    source = host_script.read_text().splitlines()
    a_def, b_def = def_line(host_script, "alpha"), def_line(host_script, "beta")
    for what, out, r0, r1 in sp.windows():
        hm = Heatmap(out)
        check_consistent(hm)
        assert hm.groups[script] == "Your code", hm.groups
        lines = hm.lines(script)
        # Every line of the source is there, as it is.
        assert [lines[i + 1][2] for i in range(len(source))] == source, what
        assert 'id="changed"' not in hm.page(script), f"{what}: the script is marked changed"
        alpha = sum(lines[i][0] for i in range(a_def, b_def))
        beta = sum(lines[i][0] for i in range(b_def, b_def + 6))
        note_split(f"{what} heatmap self samples", alpha, beta, r0, r1)
        page = hm.files[script][0]
        calls = [ln for ln, (_, _, _, nav) in lines.items()
                 if f'href="{page}#L{a_def}"' in nav and f'href="{page}#L{b_def}"' in nav]
        assert calls, f"{what}: no line links to alpha and beta"
        assert f'href="{page}#L{calls[0]}"' in lines[a_def][3], \
            f"{what}: alpha's first line does not link to its caller at line {calls[0]}"


# --- changed, gone and hostile files ----------------------------------------------

HOSTILE_FILE = "\"><img src=x onerror=\"document.title='pwned1'\">.py"
HOSTILE_NAME = "</script><script>document.title='pwned2'</script>"


LATER_LINE = "def later_spin(n):"


@pytest.fixture(scope="module")
def odd_heatmap(pystrobe, rwork, tmp_path_factory):
    """heatmap_target.py attached to, after changed.py was rewritten; later.py
    rewritten once pystrobe has taken samples. The run's recording beside
    the pages (hm.recording)."""
    out = tmp_path_factory.mktemp("odd")
    d_host, d_target = rwork.target.stage_dir()
    # Written a moment (more than a clock tick) before the target starts: not
    # to be taken as changed after the start (which is known to a tick).
    body = "\n    x = 0\n    for i in range(n):\n        x += i\n    return x\n"
    (Path(d_host) / "changed.py").write_text("def changed_spin(n):" + body)
    (Path(d_host) / "later.py").write_text(LATER_LINE + body)
    time.sleep(0.1)
    target = LongRunning(rwork.target, [rwork.path("heatmap_target.py"), d_target])
    procs = SessionProcesses()
    try:
        time.sleep(0.05)
        p = Path(d_host) / "changed.py"
        p.write_text(p.read_text() + "# changed while the target runs\n")
        s = Strobe(procs, pystrobe, ["attach", "-r", "1khz", "-d", "1.5", *REALTIME, "--heatmap",
                                     "-o", out / "hm", "--record", out / "rec.pysr", target.pid],
                   out, out / "logs", "attach")
        s.wait_samples(more_than=20)
        p = Path(d_host) / "later.py"
        p.write_text(p.read_text().replace(LATER_LINE, "def rewritten_later(n):"))
        s.check()
        assert "Wrote heatmap to" in s.stderr, s.stderr
    finally:
        procs.close()
        target.close()
        shutil.rmtree(d_host, ignore_errors=True)
    hm = Heatmap(out / "hm")
    hm.recording = out / "rec.pysr"
    return hm, d_target


def test_changed_file_is_marked(odd_heatmap):
    hm, d = odd_heatmap
    page = hm.page(f"{d}/changed.py")
    assert 'id="changed"' in page and "modified after the target started" in page, page[:3000]
    lines = hm.lines(f"{d}/changed.py")
    assert lines[1][2] == "def changed_spin(n):" and lines[3][1] > 0, lines
    assert lines[6][2] == "# changed while the target runs", lines


def test_source_as_sampled(odd_heatmap):
    """A file written just before the target started and rewritten while
    it was sampled: its page shows the source read at its first sample, and
    says that the file changed since it was read (not before the start)."""
    hm, d = odd_heatmap
    page = hm.page(f"{d}/later.py")
    assert 'id="changed"' in page and "as it was when first sampled" in page, page[:3000]
    lines = hm.lines(f"{d}/later.py")
    assert lines[1][2] == LATER_LINE and lines[3][1] > 0, lines


def test_replay_shows_the_sources_as_sampled(pystrobe, odd_heatmap, rtarget, tmp_path):
    """replay --heatmap of the run's recording: the pages the live run wrote,
    byte for byte, from the sources the recording holds (later.py as it was
    sampled, not as rewritten since; the sid target's files, which only its
    root holds; gone.py's reason), as docs/format.md's SOURCE records say."""
    if rtarget.name not in ("pyenv-3.12.1", "sid-3.15"):
        pytest.skip("the sources are recorded alike whatever the version")
    hm, d = odd_heatmap
    src = recording_format.read(hm.recording)["sources"]
    later = src[f"{d}/later.py"]
    assert later["text"].startswith(LATER_LINE.encode()) and later["mark"] == 2, later
    assert src[f"{d}/changed.py"]["mark"] == 1 and b"No such file" in src[f"{d}/gone.py"]["why"]
    res = subprocess.run([str(pystrobe), "replay", "--heatmap", "-o", str(tmp_path / "again"),
                          str(hm.recording)], capture_output=True, timeout=60)
    assert res.returncode == 0, res.stderr.decode()
    again = Heatmap(tmp_path / "again")
    assert again.lines(f"{d}/later.py")[1][2] == LATER_LINE
    pages = sorted(p.name for p in hm.dir.iterdir())
    assert pages == sorted(p.name for p in again.dir.iterdir())
    for name in pages:
        assert (hm.dir / name).read_bytes() == (again.dir / name).read_bytes(), name


def test_unreadable_file_keeps_counts(odd_heatmap):
    hm, d = odd_heatmap
    name = f"{d}/gone.py"
    page = hm.page(name)
    assert 'id="unreadable"' in page and "No such file" in page, page[:3000]
    lines = hm.lines(name)
    assert lines and sum(t for _, t, _, _ in lines.values()) > 0, lines
    assert all(src == "" for _, _, src, _ in lines.values())
    # Code with a name that is no file: counted, under "Other".
    assert hm.groups[HOSTILE_NAME] == "Other"
    assert hm.files[HOSTILE_NAME][1] > 0


def test_hostile_names_and_source_stay_text(odd_heatmap, rtarget, tmp_path):
    """No element and no script from the target in any page; the names and
    the source shown as they are in headless Chromium."""
    hm, d = odd_heatmap
    hostile_path = f"{d}/{HOSTILE_FILE}"
    assert hostile_path in hm.files and HOSTILE_NAME in hm.files, sorted(hm.files)
    lines = hm.lines(hostile_path)
    assert lines[1][2].startswith("# </script><script>document.title='pwned3'</script> <b>")
    import test_flamegraph
    # No page has a tag of these (pystrobe writes none): none in any page's
    # text, so none the target's names or source could have made; and in
    # Chromium's DOM of the pages that show the target's hostile names and
    # source, none either (the browser reads the text as the text says).
    # The pages are written alike whatever the version: Chromium reads one
    # target's (sid-3.15's, whose sources come through its root).
    check_offline(hm)
    tags = re.compile(r"<(img|b|script)[\s>/]", re.I)
    for page in ["index.html"] + [p for p, _, _ in hm.files.values()]:
        found = tags.findall((hm.dir / page).read_text(encoding="utf-8"))
        assert not found, f"{page}: markup from the target: {found}"
    if rtarget.name != representative_targets()[-1].name:
        return
    for page in ("index.html", hm.files[hostile_path][0], hm.files[HOSTILE_NAME][0]):
        dom, err = chromium(hm.dir / page, tmp_path, "--dump-dom")
        doc = test_flamegraph.Page(dom)
        assert not doc.all("img") and not doc.all("b"), f"{page}: markup from the target"
        scripts = doc.all("script")
        assert not scripts, f"{page}: a script element: {[s.text() for s in scripts]}"
        if page == "index.html":
            text = html.unescape(re.sub(r"<[^>]+>", "", dom))
    assert HOSTILE_NAME in text and HOSTILE_FILE in text


def test_directory_that_cannot_be_made_fails_first(pystrobe, tmp_path):
    """-o naming a regular file: an error before anything runs, the file kept."""
    f = tmp_path / "a_file"
    f.write_text("keep")
    marker = tmp_path / "ran"
    res = subprocess.run([str(pystrobe), "run", "--heatmap", "-o", str(f), "--", "touch",
                          str(marker)], capture_output=True, timeout=60)
    assert res.returncode != 0 and b"cannot make the directory" in res.stderr, res.stderr
    assert f.read_text() == "keep" and not marker.exists()


# --- --opcodes: the instructions of each line --------------------------------------

OPS_CELL = re.compile(r'<td class="ops">(.*?)</td><td class="nav">', re.S)
OP_ROW = re.compile(r'<tr><td class="f">(.*?)</td><td>(\d+)</td><td>[\d.]+%</td></tr>')


def test_heatmap_instructions_per_line(pystrobe, tmp_path):
    """--heatmap --opcodes: each sampled line a cell of its instructions,
    their samples adding up to the line's total; `return a + b` at its
    specialized add. In headless Chromium the cell is text in a details
    element (no markup from it), closed, its summary the top instruction."""
    from test_opcodes import LOOP_CODE
    targets = [t for t in supported_targets() if t.version == (3, 12) and t.chroot is None]
    if not targets:
        pytest.skip("no pyenv 3.12")
    target = targets[0]
    host_dir, target_dir = target.stage_dir()
    (host_dir / "loop.py").write_text(LOOP_CODE)
    out = tmp_path / "hm"
    res = subprocess.run([str(pystrobe), "run", "--heatmap", "--opcodes", "-o", str(out), "--",
                          *target.argv, f"{target_dir}/loop.py"], capture_output=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr.decode()
    hm = Heatmap(out)
    page = hm.page(f"{target_dir}/loop.py")
    rows = {}
    for tr in re.findall(r'<tr id="L(\d+)">(.*?)</tr>\n', page, re.S):
        ln, body = int(tr[0]), tr[1]
        tot = re.findall(r'<td class="h\d+">(\d+)</td>', body)
        cell = OPS_CELL.search(body + '<td class="nav">')
        rows[ln] = (int(tot[1]) if len(tot) >= 2 else 0, cell.group(1) if cell else None)
    src = LOOP_CODE.splitlines()
    add_line = src.index("    return a + b") + 1
    total, cell = rows[add_line]
    assert total > 0 and cell, rows[add_line]
    ops = {html.unescape(n): int(c) for n, c in OP_ROW.findall(cell)}
    assert "BINARY_OP_ADD_UNICODE (BINARY_OP)" in ops, ops
    assert sum(ops.values()) == total, (ops, total)
    top = re.search(r"<summary>([A-Z_]+) \d+%", cell)
    by_name = {k.split(" ")[0]: c for k, c in ops.items()}
    assert top and by_name[top.group(1)] == max(ops.values()), cell
    # Every sampled line has its cell, unsampled ones an empty one.
    assert all(c for t, c in rows.values() if t), rows
    dom, _ = chromium(out / hm.files[f"{target_dir}/loop.py"][0], tmp_path, "--dump-dom")
    import test_flamegraph
    doc = test_flamegraph.Page(dom)
    details = doc.all("details")
    assert details and not any("open" in d.attrs for d in details), len(details)
    texts = [d.text() for d in details]
    assert any("BINARY_OP_ADD_UNICODE (BINARY_OP)" in t for t in texts), texts
