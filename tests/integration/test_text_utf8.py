"""Names that are not UTF-8 (a target's bytes are untrusted) in the writers
that hold text (output/utf8.h, one decoder for all): the pstats file still
loads in the host's pstats, each byte that is not part of a character
becomes U+FFFD, and the JSON, HTML and SVG writers agree with it."""
import json
import os
import pstats
import re
import subprocess
from pathlib import Path

from targets import ROOT

BUILD = Path(os.environ.get("PYSTROBE_BUILD", ROOT / "build"))
RENDER = BUILD / "tests" / "render_profile"

# an overlong NUL, a surrogate, a lone continuation byte, a cut sequence;
# then a well-formed snowman
NAME = b"f\xc0\x80g\xed\xa0\x80h\x80i\xe2\x82"
WANT = "f\ufffd\ufffdg\ufffd\ufffd\ufffdh\ufffdi\ufffd\ufffd"
STACKS = b"# interval_ns 1000000\ntid:1;app.py:main:1;app.py:" + NAME + b":2;app.py:\xe2\x98\x83:3 5\n"


def render(tmp_path, fmt):
    out = tmp_path / ("out" + fmt.replace("-", "_"))
    r = subprocess.run([str(RENDER), *([fmt] if fmt else []), str(out)], input=STACKS,
                       capture_output=True)
    assert r.returncode == 0, r.stderr.decode()
    return out


def test_pstats_loads_with_replacement_characters(tmp_path):
    st = pstats.Stats(str(render(tmp_path, "--pstats"))).stats
    names = {k[2] for k in st}
    assert WANT in names and "\u2603" in names, names


def test_json_page_and_speedscope_agree(tmp_path):
    page = render(tmp_path, "").read_text(encoding="utf-8")
    data = json.loads(re.search(r'id="pystrobe-data">(.*?)</script>', page, re.S).group(1))
    assert WANT in data["strings"] and "\u2603" in data["strings"]
    doc = json.loads(render(tmp_path, "--speedscope").read_text(encoding="utf-8"))
    assert WANT in {f["name"] for f in doc["shared"]["frames"]}
