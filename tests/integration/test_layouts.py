"""The committed layout tables are what tools/gen_layouts.py makes from the
interpreters' headers on this machine (pyenv 3.13.0, Debian 3.13-3.15)."""
import subprocess
import sys

from targets import ROOT, SIDROOT


def test_layouts_match_headers():
    assert (SIDROOT / "usr/include/python3.15/internal").is_dir(), "sid root headers missing"
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_layouts.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
