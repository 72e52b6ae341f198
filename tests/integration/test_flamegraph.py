"""The --flamegraph page: profiles built from crafted "collapsed" stacks by
tests/tools/render_profile, opened in headless Chromium.

What the page must do: render without a script error; name the hottest
function; show every name from the target as text, never as markup (names are
hostile input); keep non-ASCII names; offer each thread in the filter; zoom,
search, filter and tooltips work; reference nothing outside the file; cope
with large and deep profiles. The JSON inside the page and the embedding tool
are checked without a browser.
"""
import html
import html.parser
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import consumer_only_once
from targets import ROOT

BUILD = Path(os.environ.get("PYSTROBE_BUILD", ROOT / "build"))
RENDER = BUILD / "tests" / "render_profile"
TEMPLATE = ROOT / "src" / "output" / "flamegraph.html"
CHROMIUM_TIMEOUT = 120  # seconds for one headless page load

# Names a target process can give its functions and files. The page must show
# them as they are, and none may become an element or run.
HOSTILE = [
    "<script>alert(1)</script>",
    '"quotes"',
    "a & b",
    '<img src=x onerror="document.body.dataset.pwned=1">',
    "</script><script>document.body.dataset.pwned=2</script>",
    "x<!--",
    "it's \u2028 a line separator",
]
UNICODE_NAME = "fun\u00e7\u00e3o_\u03bb"
UNICODE_FILE = "/srv/m\u00f3dulo.py"


# --- helpers ------------------------------------------------------------------

def chromium_binary():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("chromium not found: install the Debian package chromium "
                    "(scripts/install-deps.sh)", pytrace=False)
    return path


@pytest.fixture(scope="module")
def render_tool():
    if not (RENDER.is_file() and os.access(RENDER, os.X_OK)):
        pytest.fail(f"{RENDER} not found: build it first (make all) or set PYSTROBE_BUILD",
                    pytrace=False)
    return RENDER


def render(tool, out, stacks, title=None):
    """Write the page for collapsed stacks (str or bytes) to out; return its path."""
    data = stacks.encode("utf-8") if isinstance(stacks, str) else stacks
    args = [str(tool), str(out)] + ([title] if title is not None else [])
    res = subprocess.run(args, input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         timeout=60)
    assert res.returncode == 0, f"render_profile failed: {res.stderr.decode(errors='replace')}"
    return Path(out)


def chromium(page, workdir, *extra):
    """Load page headless; return (stdout, stderr) as text."""
    consumer_only_once()
    profile_dir = Path(workdir) / "chromium-profile"
    profile_dir.mkdir(exist_ok=True)
    cmd = [chromium_binary(), "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--no-first-run", f"--user-data-dir={profile_dir}", "--virtual-time-budget=5000",
           "--window-size=1400,900", *extra, Path(page).resolve().as_uri()]
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         timeout=CHROMIUM_TIMEOUT)
    assert res.returncode == 0, f"chromium exited {res.returncode}: {res.stderr[-2000:]!r}"
    return res.stdout.decode("utf-8"), res.stderr.decode("utf-8", errors="replace")


class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent = tag, dict(attrs), parent
        self.children = []  # Node or str

    def text(self):
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.iter()


class DomParser(html.parser.HTMLParser):
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
            "source", "track", "wbr"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", [], None)
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        node = Node(tag, attrs, self.cur)
        self.cur.children.append(node)
        if tag not in self.VOID:
            self.cur = node

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(Node(tag, attrs, self.cur))

    def handle_endtag(self, tag):
        n = self.cur
        while n is not self.root and n.tag != tag:
            n = n.parent
        if n is not self.root:
            self.cur = n.parent

    def handle_data(self, data):
        self.cur.children.append(data)


class Page:
    """A page as Chromium left it (--dump-dom), parsed."""

    def __init__(self, dom):
        self.dom = dom
        p = DomParser()
        p.feed(dom)
        p.close()
        self.root = p.root

    def all(self, tag):
        return [n for n in self.root.iter() if n.tag == tag]

    def by_id(self, ident):
        found = [n for n in self.root.iter() if n.attrs.get("id") == ident]
        assert len(found) == 1, f"expected one element #{ident}, found {len(found)}"
        return found[0]

    @property
    def body(self):
        return self.all("body")[0]

    def frames_text(self):
        return self.by_id("pystrobe-frames").text()


def load(page_path, workdir):
    dom, _ = chromium(page_path, workdir, "--dump-dom")
    return Page(dom)


def assert_ok(page):
    body = page.body.attrs
    assert "data-errors" not in body, f"the page recorded errors: {body['data-errors']}"
    assert body.get("data-rendered") == "1", "the page did not finish its first render"


def page_data(path):
    """The JSON the C writer put in the page."""
    text = Path(path).read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="pystrobe-data">(.*?)</script>', text,
                  re.S)
    assert m, "no data element in the page"
    return json.loads(m.group(1)), m.group(1)


def with_script(page_path, out_path, script):
    """A copy of the page with script run after the page's own."""
    text = Path(page_path).read_text(encoding="utf-8")
    assert text.count("</body>") == 1
    Path(out_path).write_text(text.replace("</body>", f"<script>{script}</script></body>"),
                              encoding="utf-8")
    return out_path


# --- profiles -----------------------------------------------------------------

# Thread 11 (the main thread, pid 11) and thread 12. By node, single_big has
# the most self samples (50); by function, hot_fn does (30 + 30), ahead of
# work (30 in itself + 25 in C code it called).
BASIC = f"""\
# pid 11
# python 0x030f02f0
# mode cpu
# samples 180
# duration_ns 1800000000
# interval_ns 10000000
# failed 2
# missed 1
tid:11;/srv/app.py:main:5;/srv/app.py:hot_fn:10 30
tid:11;/srv/app.py:main:6;/srv/lib.py:helper:3;/srv/app.py:hot_fn:11 30
tid:11;/srv/app.py:main:7;/srv/big.py:single_big:1 50
tid:11;/srv/app.py:main:8;{UNICODE_FILE}:{UNICODE_NAME}:4 15
tid:12;/usr/lib/python3.15/threading.py:Thread.run:990;/srv/worker.py:work:20 30
tid:12;/usr/lib/python3.15/threading.py:Thread.run:990;/srv/worker.py:work:21;~:<native>:- 25
"""


def hostile_stacks():
    lines = ["# pid 7"]
    for i, name in enumerate(HOSTILE):
        lines.append(f"tid:7;/srv/evil.py:main:1;/srv/evil{i}.py:{name}:{i + 1} {10 + i}")
    lines.append("tid:7;/srv/evil.py:main:1;/srv/a & b <i>.py:plain:3 5")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def basic_page(render_tool, tmp_path_factory):
    d = tmp_path_factory.mktemp("basic")
    path = render(render_tool, d / "basic.html", BASIC, "pystrobe: python3.15 pid 11")
    return path, load(path, d)


# --- the page -------------------------------------------------------------------

def test_renders_without_errors(basic_page):
    _, page = basic_page
    assert_ok(page)
    assert page.by_id("title").text() == "pystrobe: python3.15 pid 11"
    assert page.all("title")[0].text() == "pystrobe: python3.15 pid 11"
    info = page.by_id("info").text()
    for expected in ["180", "1.80 s", "100 Hz", "cpu", "pid 11", "3.15.2"]:
        assert expected in info, f"{expected!r} missing from the header: {info!r}"


def test_hottest_function_is_named(basic_page):
    _, page = basic_page
    hottest = page.by_id("pystrobe-hottest").text()
    assert "hot_fn" in hottest and "60 samples" in hottest, hottest
    assert "single_big" not in hottest


def test_every_frame_is_listed_as_text(basic_page):
    _, page = basic_page
    text = page.frames_text()
    for name in ["main", "hot_fn", "helper", "single_big", "Thread.run", "work", "<native>",
                 "thread 11 (main)", "thread 12"]:
        assert name in text, f"{name!r} not in the frames text"


def test_non_ascii_names_survive(basic_page):
    path, page = basic_page
    text = page.frames_text()
    assert UNICODE_NAME in text and UNICODE_FILE in text
    data, _ = page_data(path)
    assert UNICODE_NAME in data["strings"] and UNICODE_FILE in data["strings"]


def test_thread_filter_offers_each_thread(basic_page):
    _, page = basic_page
    options = [(o.attrs.get("value"), o.text()) for o in page.by_id("thread").iter()
               if o.tag == "option"]
    assert [v for v, _ in options] == ["", "11", "12"], options  # busiest thread first
    assert options[0][1].startswith("All threads")
    # thread 11: 125 of 180 stack samples; thread 12: 55.
    assert "Thread 11 (main)" in options[1][1] and "69.4%" in options[1][1], options
    assert "Thread 12" in options[2][1] and "30.6%" in options[2][1], options


def test_hostile_names_are_shown_as_text(render_tool, tmp_path):
    title = "pystrobe </title><script>document.body.dataset.pwned=3</script> & co"
    path = render(render_tool, tmp_path / "evil.html", hostile_stacks(), title)
    page = load(path, tmp_path)
    assert_ok(page)
    assert "data-pwned" not in page.body.attrs, "a name from the target ran as script"
    text = page.frames_text()
    for name in HOSTILE + ["/srv/a & b <i>.py"]:
        assert name in text, f"{name!r} not shown literally"
    # In the serialised DOM they are escaped text, not markup.
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.dom
    assert "<script>alert(1)" not in page.dom
    assert "a &amp; b" in page.dom
    # Nothing was injected: the template's own elements only.
    template = Page(TEMPLATE.read_text(encoding="utf-8"))
    assert len(page.all("script")) == len(template.all("script")) == 3
    assert page.all("img") == [] and page.all("i") == []
    assert page.by_id("title").text() == title
    assert page.all("title")[0].text() == title


def test_invalid_utf8_becomes_replacement_character(render_tool, tmp_path):
    path = render(render_tool, tmp_path / "bad.html",
                  b"tid:1;/srv/x.py:bad\xffname:1 3\ntid:1;/srv/x.py:ok:2 1\n")
    page = load(path, tmp_path)
    assert_ok(page)
    assert "bad\ufffdname" in page.frames_text()


def test_data_is_escaped_and_consistent(basic_page, render_tool, tmp_path):
    path = render(render_tool, tmp_path / "evil.html", hostile_stacks())
    data, raw = page_data(path)
    for ch in "<>&\u2028":
        assert ch not in raw, f"{ch!r} written unescaped into the data element"
    for name in HOSTILE:
        assert name in data["strings"]
    data, _ = page_data(basic_page[0])
    nodes = data["nodes"]
    n = len(nodes["parent"])
    assert all(len(v) == n for v in nodes.values())
    assert nodes["parent"][0] == -1
    assert all(0 <= nodes["parent"][i] < i for i in range(1, n))
    assert nodes["total"][0] == 180
    assert sorted(tid for _, tid in data["threads"]) == [11, 12]
    assert data["info"] == {"pid": 11, "python_version": 0x030F02F0, "mode": "cpu",
                            "samples": 180, "duration_ns": 1800000000,
                            "interval_ns": 10000000, "failed": 2, "missed": 1}
    # A frame whose children hold all its samples has self 0; leaves' selves add up.
    assert sum(nodes["self"]) == 180


def test_page_is_self_contained(basic_page):
    path, _ = basic_page
    for source in [TEMPLATE.read_text(encoding="utf-8"), path.read_text(encoding="utf-8")]:
        for pattern in [r"https?:", r"//[a-z0-9.-]+\.[a-z]{2,}/", r"\burl\(", r"@import"]:
            assert not re.search(pattern, source, re.I), f"external reference {pattern!r}"
        for attr in re.findall(r"\b(?:src|href|action|srcset)\s*=\s*(\"[^\"]*\"|'[^']*'|\S+)",
                               source, re.I):
            assert attr.strip("\"'").startswith("data:"), f"reference outside the page: {attr}"


def test_template_never_parses_data_as_html():
    source = TEMPLATE.read_text(encoding="utf-8")
    for sink in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                 "createContextualFragment", "DOMParser", "eval(", "new Function"]:
        assert sink not in source, f"the template uses {sink}"


def test_zoom_search_filter_and_tooltip(render_tool, tmp_path):
    stacks = """\
# pid 11
tid:11;/srv/m.py:main:1;/srv/alpha_file.py:alpha:2 60
tid:11;/srv/m.py:main:1;/srv/beta_file.py:beta:3 40
tid:12;/srv/m.py:other:1 100
tid:11;/srv/m.py:main:2;/srv/w.py:work:10 5
tid:11;/srv/m.py:main:2;/srv/w.py:work:20 5
"""
    # Per step, what the page shows. Events are dispatched as a user's would be.
    script = r"""
(function () {
  var out = {}, $ = function (id) { return document.getElementById(id); };
  var canvas = $('graph'), rowH = 18;
  function lines() { return $('pystrobe-frames').textContent.split('\n'); }
  function mouse(type, fx, row) {
    var r = canvas.getBoundingClientRect();
    canvas.dispatchEvent(new MouseEvent(type, { bubbles: true,
      clientX: r.left + fx * r.width, clientY: r.top + row * rowH + rowH / 2 }));
  }
  function tip() {
    var t = $('tooltip');
    return { hidden: t.hidden, name: t.querySelector('.tt-name').textContent,
             loc: t.querySelector('.tt-loc').textContent,
             view: t.querySelector('.tt-total-view').textContent,
             all: t.querySelector('.tt-total-all').textContent };
  }
  var q = $('search');
  q.value = 'ALPHA'; q.dispatchEvent(new Event('input'));
  out.matchName = $('match').textContent;
  q.value = 'beta_file'; q.dispatchEvent(new Event('input'));
  out.matchFile = $('match').textContent;
  q.value = 'nothing-like-this'; q.dispatchEvent(new Event('input'));
  out.matchNone = $('match').textContent;
  q.value = ''; q.dispatchEvent(new Event('input'));

  var sel = $('thread');
  sel.value = '11'; sel.dispatchEvent(new Event('change'));
  out.thread11 = lines();
  /* Thread 11 view: row 0 thread, row 1 main, row 2 alpha | beta | work. */
  mouse('mousemove', 0.7, 2);
  out.tipBeta = tip();
  mouse('click', 0.7, 2);
  out.zoomed = lines();
  out.resetAfterZoom = $('reset').disabled;
  mouse('click', 0.5, 0);           /* the thread, above the zoomed frame */
  out.zoomedOut = lines();
  mouse('click', 0.7, 2);
  document.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape', bubbles: true }));
  out.afterEscape = lines();
  out.resetAfterEscape = $('reset').disabled;

  var split = $('split-lines');
  split.checked = true; split.dispatchEvent(new Event('change'));
  out.split = lines();
  split.checked = false; split.dispatchEvent(new Event('change'));
  out.merged = lines();
  mouse('mouseleave', 0, 0);
  out.tipAfterLeave = $('tooltip').hidden;
  document.body.dataset.result = JSON.stringify(out);
})();
"""
    path = render(render_tool, tmp_path / "ui.html", stacks)
    page = load(with_script(path, tmp_path / "ui-test.html", script), tmp_path)
    assert_ok(page)
    r = json.loads(page.body.attrs["data-result"])

    assert r["matchName"] == "Matched 28.6% of view (60 of 210)"
    assert r["matchFile"] == "Matched 19.0% of view (40 of 210)"
    assert r["matchNone"] == "No match in view"

    assert r["thread11"][0].startswith("thread 11 (main)")
    assert not any("other" in line for line in r["thread11"]), "thread 12 shown in thread 11"
    assert r["tipBeta"] == {"hidden": False, "name": "beta", "loc": "/srv/beta_file.py:3",
                            "view": "36.4% of view", "all": "19.0% of all"}

    # Zoomed into beta: its callers above it, then beta as the whole view.
    assert [line.split(" \u2014 ")[0].strip() for line in r["zoomed"]] == \
        ["thread 11 (main)", "main", "beta"]
    assert r["zoomed"][2].endswith("40 samples (100.0% of view)")
    assert r["resetAfterZoom"] is False
    assert r["zoomedOut"] == r["thread11"]
    assert r["afterEscape"] == r["thread11"] and r["resetAfterEscape"] is True

    # work ran at lines 10 and 20: one box per line when split, one when merged.
    assert sum(" work \u2014 /srv/w.py:" in line for line in r["split"]) == 2
    assert sum(" work \u2014 /srv/w.py (several lines)" in line for line in r["merged"]) == 1
    assert r["tipAfterLeave"] is True


def test_flame_view_and_dark_theme(render_tool, tmp_path):
    """The flame view draws the root at the bottom (hovering the bottom row
    names the thread, the top row a leaf), the icicle view at the top; the
    dark theme changes the page's colours; neither changes the frames."""
    stacks = """\
# pid 11
tid:11;/srv/m.py:main:1;/srv/alpha_file.py:alpha:2 60
tid:11;/srv/m.py:main:1;/srv/beta_file.py:beta:3 40
"""
    script = r"""
(function () {
  var out = {}, $ = function (id) { return document.getElementById(id); };
  var canvas = $('graph'), rowH = 18;
  function frames() { return $('pystrobe-frames').textContent; }
  function hover(fx, row) {
    var r = canvas.getBoundingClientRect();
    canvas.dispatchEvent(new MouseEvent('mousemove', { bubbles: true,
      clientX: r.left + fx * r.width, clientY: r.top + row * rowH + rowH / 2 }));
    return $('tooltip').querySelector('.tt-name').textContent;
  }
  function toggle(id, on) { var c = $(id); c.checked = on; c.dispatchEvent(new Event('change')); }
  var sel = $('thread');
  sel.value = '11'; sel.dispatchEvent(new Event('change'));
  out.icicle = { view: document.body.dataset.view, root: canvas.dataset.rootRow,
                 top: hover(0.2, 0), bottom: hover(0.2, 2), text: frames() };
  toggle('flame-view', true);
  canvas.getBoundingClientRect();
  out.flame = { view: document.body.dataset.view, root: canvas.dataset.rootRow,
                top: hover(0.2, 0), bottom: hover(0.2, 2), text: frames() };
  out.lightBg = getComputedStyle(document.body).backgroundColor;
  toggle('dark-theme', true);
  out.dark = { theme: document.body.dataset.theme, cls: document.body.className,
               bg: getComputedStyle(document.body).backgroundColor };
  document.body.dataset.result = JSON.stringify(out);
})();
"""
    path = render(render_tool, tmp_path / "flame.html", stacks)
    page = load(with_script(path, tmp_path / "flame-test.html", script), tmp_path)
    assert_ok(page)
    r = json.loads(page.body.attrs["data-result"])
    assert r["icicle"]["view"] == "icicle" and r["icicle"]["root"] == "0"
    assert r["icicle"]["top"] == "thread 11 (main)" and r["icicle"]["bottom"] == "alpha"
    assert r["flame"]["view"] == "flame" and r["flame"]["root"] == "2"
    assert r["flame"]["top"] == "alpha" and r["flame"]["bottom"] == "thread 11 (main)"
    assert r["flame"]["text"] == r["icicle"]["text"]
    assert r["dark"]["theme"] == "dark" and "dark" in r["dark"]["cls"]
    assert r["dark"]["bg"] != r["lightBg"]


def test_panel_short_paths_and_elided_note(render_tool, tmp_path):
    """The panel lists the hottest functions by self samples; short paths
    drop directories in the text view and the panel; samples in frames too
    narrow to draw are counted in a note."""
    tiny = "".join(f"tid:11;/srv/app/m.py:main:1;/srv/lib/t.py:tiny{i}:2 1\n" for i in range(20))
    stacks = f"""\
# pid 11
tid:11;/srv/app/m.py:main:1;/srv/app/hot.py:hot:5 9000
tid:11;/srv/app/m.py:main:1;/srv/app/warm.py:warm:7 980
{tiny}"""
    script = r"""
(function () {
  var out = {}, $ = function (id) { return document.getElementById(id); };
  function items() {
    return Array.prototype.map.call($('hot-functions').children,
      function (li) { return li.textContent; });
  }
  out.panel = items();
  out.elided = { hidden: $('elided').hidden, text: $('elided').textContent };
  out.fullText = $('pystrobe-frames').textContent;
  var c = $('short-paths'); c.checked = true; c.dispatchEvent(new Event('change'));
  out.shortText = $('pystrobe-frames').textContent;
  out.shortPanel = items();
  document.body.dataset.result = JSON.stringify(out);
})();
"""
    path = render(render_tool, tmp_path / "panel.html", stacks)
    page = load(with_script(path, tmp_path / "panel-test.html", script), tmp_path)
    assert_ok(page)
    r = json.loads(page.body.attrs["data-result"])
    assert len(r["panel"]) == 10
    assert r["panel"][0].startswith("hot /srv/app/hot.py \u2014 9,000")
    assert r["panel"][1].startswith("warm /srv/app/warm.py \u2014 980")
    assert r["shortPanel"][0].startswith("hot hot.py \u2014 9,000")
    assert r["elided"]["hidden"] is False
    assert r["elided"]["text"].startswith("20 samples"), r["elided"]
    assert "/srv/app/hot.py:5" in r["fullText"] and "/srv/app/" not in r["shortText"]
    assert "hot.py:5" in r["shortText"]


def test_inverted_view(render_tool, tmp_path):
    """Inverted: under the thread, the executing functions, then their
    callers; the zoom, thread filter and totals work as in the normal view."""
    stacks = """\
# pid 11
tid:11;/srv/m.py:main:1;/srv/m.py:a:2;/srv/m.py:leaf:3 5
tid:11;/srv/m.py:main:1;/srv/m.py:b:4;/srv/m.py:leaf:3 3
tid:11;/srv/m.py:main:1;/srv/m.py:c:5 2
"""
    script = r"""
(function () {
  var out = {}, $ = function (id) { return document.getElementById(id); };
  function lines() { return $('pystrobe-frames').textContent.split('\n'); }
  var sel = $('thread');
  sel.value = '11'; sel.dispatchEvent(new Event('change'));
  out.normal = lines();
  var c = $('inverted'); c.checked = true; c.dispatchEvent(new Event('change'));
  out.inverted = lines();
  c.checked = false; c.dispatchEvent(new Event('change'));
  out.back = lines();
  document.body.dataset.result = JSON.stringify(out);
})();
"""
    path = render(render_tool, tmp_path / "inv.html", stacks)
    page = load(with_script(path, tmp_path / "inv-test.html", script), tmp_path)
    assert_ok(page)
    r = json.loads(page.body.attrs["data-result"])

    def tree(lines):
        return [(len(l) - len(l.lstrip()), l.split(" \u2014 ")[0].strip(),
                 l.split(" \u2014 ")[2].split(" samples")[0]) for l in lines]
    assert tree(r["inverted"]) == [
        (0, "thread 11 (main)", "10"),
        (2, "c", "2"), (4, "main", "2"),
        (2, "leaf", "8"), (4, "a", "5"), (6, "main", "5"), (4, "b", "3"), (6, "main", "3"),
    ]
    assert r["back"] == r["normal"]


def test_empty_profile(render_tool, tmp_path):
    path = render(render_tool, tmp_path / "empty.html", "")
    page = load(path, tmp_path)
    assert_ok(page)
    assert "hidden" not in page.by_id("empty").attrs
    assert page.by_id("pystrobe-hottest").text() == "Hottest: no samples"


def test_native_time_counts_for_its_python_caller(render_tool, tmp_path):
    path = render(render_tool, tmp_path / "native.html",
                  "tid:1;/srv/a.py:main:1;/srv/a.py:select_loop:4;~:<native>:- 90\n"
                  "tid:1;/srv/a.py:main:1;/srv/a.py:compute:9 50\n"
                  "tid:2;~:<native>:- 60\n")
    page = load(path, tmp_path)
    assert_ok(page)
    hottest = page.by_id("pystrobe-hottest").text()
    assert "select_loop" in hottest and "90 samples" in hottest, hottest


def test_large_and_deep_profile(render_tool, tmp_path):
    """About 100,000 nodes, and one stack 3,000 frames deep: the page renders,
    stays compact, and the canvas stays the size of the window."""
    lines, node_budget = [], 0
    for i in range(3300):
        depth = 30
        frames = ";".join(f"/srv/m{(i + d) % 40}.py:f{(i * 7 + d * 13) % 997}_{d}:{d + 1}"
                          for d in range(depth))
        lines.append(f"tid:{100 + i % 4};/srv/root.py:run:1;{frames} {1 + i % 17}")
        node_budget += depth
    deep = ";".join(f"/srv/rec.py:recurse:{d % 5 + 1}" for d in range(3000))
    lines.append(f"tid:100;/srv/root.py:run:1;{deep} 500")
    path = render(render_tool, tmp_path / "large.html", "\n".join(lines) + "\n")
    data, raw = page_data(path)
    n = len(data["nodes"]["parent"])
    assert n > 90_000, n
    assert len(raw) < 40 * n, f"{len(raw)} bytes of data for {n} nodes"
    page = load(path, tmp_path)
    assert_ok(page)
    assert "recurse" in page.frames_text()
    wrap_h = int(re.search(r"height:\s*(\d+)px", page.by_id("graph-wrap").attrs["style"])[1])
    canvas_h = int(re.search(r"height:\s*(\d+)px", page.by_id("graph").attrs["style"])[1])
    assert wrap_h >= 3000 * 18 and canvas_h <= 2000, (wrap_h, canvas_h)


def test_write_error_is_reported(render_tool):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    res = subprocess.run([str(render_tool), "/dev/full"], input=BASIC.encode(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert res.returncode == 1
    assert b"input/output error" in res.stderr


def test_embed_asset_round_trip(tmp_path):
    """tools/embed_asset.py keeps every byte (but NUL, which it refuses)."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.fail("no C compiler", pytrace=False)
    content = bytes(range(1, 256)) * 40 + "\"\\??=\n\u00e7\u2028".encode()
    (tmp_path / "asset.bin").write_bytes(content)
    tool = ROOT / "tools" / "embed_asset.py"
    subprocess.run(["/usr/bin/python3", str(tool), str(tmp_path / "asset.bin"),
                    str(tmp_path / "asset.h"), "asset"], check=True)
    (tmp_path / "main.c").write_text(
        '#include <stdio.h>\n#include "asset.h"\n'
        "int main(void) { fwrite(asset, 1, sizeof asset - 1, stdout); return 0; }\n")
    subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-pedantic", "-Werror", "-o",
                    str(tmp_path / "main"), str(tmp_path / "main.c")], check=True)
    out = subprocess.run([str(tmp_path / "main")], stdout=subprocess.PIPE, check=True).stdout
    assert out == content
    (tmp_path / "nul.bin").write_bytes(b"a\0b")
    res = subprocess.run(["/usr/bin/python3", str(tool), str(tmp_path / "nul.bin"),
                          str(tmp_path / "nul.h"), "nul"], stderr=subprocess.PIPE)
    assert res.returncode != 0 and not (tmp_path / "nul.h").exists()
