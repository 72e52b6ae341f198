"""CPython 3.7 (issue 30): read by 3.8's walker through a layout of its own
(tools/gen_layouts.py), so it runs the tests that check a version's stacks,
locals and sampling modes, not the whole matrix (targets.MATRIX_FROM). The
tests are those of test_dump, test_locals and test_sampling, collected here
with this module's `target`; --native on 3.7 is in test_native."""
import sys

import pytest

from targets import legacy_targets
# Collected here again, on legacy_targets(): the stacks field by field
# against the target's own report, the thread statuses, the text output.
from test_dump import (test_dump_frames, test_dump_text, test_dump_thread_status,  # noqa: F401
                       test_dump_threads, test_report_has_the_known_stacks)
# Locals against the target's repr() of them.
from test_locals import locals_target, test_dump_locals_json  # noqa: F401
# Each frame's instruction against the target's own (--opcodes).
from test_opcodes import still, test_dump_opcodes_are_the_targets  # noqa: F401
# Profiles: each sampling mode keeps the threads it should.
from test_sampling import (mode_profiles, test_mode_cpu_only_running_thread,  # noqa: F401
                           test_mode_exception_only_handler, test_mode_gil_only_holder,
                           test_mode_wall_every_thread, work)
# The module's RemoteUnwinder, from the host, against the same report.
from test_module import SELF_REPORT_OPTIONS, check_against_report, module_dir, plain  # noqa: F401


@pytest.fixture(scope="module", params=legacy_targets(), ids=repr)
def target(request):
    return request.param


def test_module_matches_self_report(module_dir, stack):  # noqa: F811
    sys.path.insert(0, str(module_dir))
    try:
        import pystrobe as mod
    finally:
        sys.path.remove(str(module_dir))
    results = [plain(mod.RemoteUnwinder(stack.pid, **opts).get_stack_trace())
               for opts in SELF_REPORT_OPTIONS]
    check_against_report(results, stack, f"host {sys.version.split()[0]}")
