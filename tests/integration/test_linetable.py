"""The line-table decoders against every available interpreter.

Each target compiles a sample of its own standard library plus synthetic edge
cases and reports, for every instruction, the location it gives itself
(co_positions() on 3.11+, co_lines() on 3.10, dis.findlinestarts() on 3.8 and
3.9); tests/tools/check_linetable runs pystrobe's decoder on the same tables
and must agree everywhere.
"""
import os
import re
import subprocess
from pathlib import Path

import pytest

from targets import ROOT, supported_targets

DUMP = ROOT / "tests" / "linetable" / "dump_positions.py"
BUILD = Path(os.environ.get("PYSTROBE_BUILD", ROOT / "build"))
CHECKER = BUILD / "tests" / "check_linetable"
SUMMARY = re.compile(r"checked (\d+) code objects, (\d+) instructions, (\d+) mismatches")

# What one run covers at least (the sample gives 215 000 - 235 000 on 3.8 -
# 3.10, 510 000 - 670 000 on 3.11+), so a dump that silently shrinks fails.
MIN_INSTRUCTIONS_311 = 100000
MIN_INSTRUCTIONS_OLD = 50000
MIN_CODE_OBJECTS = 3000


def run_check(target, extra_args=()):
    if not CHECKER.exists():
        pytest.fail("%s not built (make, or set PYSTROBE_BUILD)" % CHECKER)
    dump = target.run(list(extra_args) + [target.stage(DUMP)], stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE, timeout=60)
    assert dump.returncode == 0, dump.stderr.decode(errors="replace")
    check = subprocess.run([str(CHECKER)], input=dump.stdout, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
    out = check.stdout.decode(errors="replace")
    assert check.returncode == 0, out[-3000:] + check.stderr.decode(errors="replace")
    m = SUMMARY.search(out)
    assert m, out[-3000:]
    objects, instructions, mismatches = (int(x) for x in m.groups())
    assert mismatches == 0
    assert objects >= MIN_CODE_OBJECTS, out
    return instructions


@pytest.mark.parametrize("target", supported_targets(), ids=lambda t: t.name)
def test_decoder_matches_interpreter(target):
    instructions = run_check(target)
    if target.version >= (3, 11):
        assert instructions >= MIN_INSTRUCTIONS_311
    else:
        assert instructions >= MIN_INSTRUCTIONS_OLD


# Without debug ranges (-X no_debug_ranges) 3.11+ writes only no-column and
# no-location entries: the form a sampled process started that way has.
@pytest.mark.parametrize("target", [t for t in supported_targets() if t.version >= (3, 11)],
                         ids=lambda t: t.name)
def test_decoder_matches_interpreter_no_debug_ranges(target):
    assert run_check(target, ["-X", "no_debug_ranges"]) >= MIN_INSTRUCTIONS_311
