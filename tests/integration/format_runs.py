"""Profiles of split_3_1.py in one output format, from `run` and from
`attach`, on a representative set of interpreters (the oldest supported, a
pyenv build with the 3.11+ frame layout, and the newest in the sid root),
for the tests of the formats read by other programs (test_speedscope.py,
test_pprof.py, test_heatmap.py)."""
import pytest

from conftest import SessionProcesses
from targets import supported_targets
from test_sampling import AHEAD, Strobe, Work, assert_wrote, measured_share, read_report

REPRESENTATIVE = ("pyenv-3.8.18", "pyenv-3.12.1", "sid-3.15")


def representative_targets():
    found = [t for t in supported_targets() if t.name in REPRESENTATIVE]
    missing = set(REPRESENTATIVE) - {t.name for t in found}
    assert not missing, f"interpreters missing: {sorted(missing)} (make sidroot; pyenv)"
    return found


class SplitRun:
    """`run` (2.5 s) and, while it runs, `attach` (1.5 s) on split_3_1.py,
    each at 2 kHz writing format_args' format to run_out / attach_out; with
    the workload's reports before and after the attach and its last."""

    def __init__(self, pystrobe, work, outdir, format_args, run_out, attach_out):
        self.dir = outdir
        self.run_out, self.attach_out = outdir / run_out, outdir / attach_out
        report = work.host("run.report.json")
        report.unlink(missing_ok=True)
        procs = SessionProcesses()
        try:
            self.run = Strobe(procs, pystrobe,
                              ["run", "-r", "2khz", *format_args, "-o", self.run_out,
                               *work.python_run_args(), work.path("split_3_1.py"), "2.5",
                               "--report", work.path("run.report.json")],
                              outdir, outdir / "logs", "run", prefix=AHEAD)
            self.before = read_report(report, self.run.proc)
            self.pid = self.before["pid"]
            self.attach = Strobe(procs, pystrobe,
                                 ["attach", "-r", "2khz", "-d", "1.5", *format_args,
                                  "-o", self.attach_out, self.pid],
                                 outdir, outdir / "logs", "attach", prefix=AHEAD)
            self.attach_summary = self.attach.check()
            self.after = read_report(report)
            self.run_summary = self.run.check()
            self.last = read_report(report)
        finally:
            procs.close()
        assert_wrote(self.run, self.run_summary, self.run_out)
        assert_wrote(self.attach, self.attach_summary, self.attach_out)

    def windows(self):
        """(what, output, report before, report after) of both runs."""
        return [("run", self.run_out, None, self.last),
                ("attach", self.attach_out, self.before, self.after)]


@pytest.fixture(scope="module", params=representative_targets(), ids=repr)
def rtarget(request):
    return request.param


@pytest.fixture(scope="module")
def rwork(rtarget):
    w = Work(rtarget)
    yield w
    w.close()


def note_split(what, alpha, beta, r0, r1):
    """Both of split_3_1.py's functions were sampled; their share is printed
    beside the workload's own measure. How close a wall-clock profile comes
    to 3:1 on a loaded machine is test_sampling.py's question (check_split):
    these tests check that each format and its reader keep the counts
    sampled, exactly, and a second tolerance here would only make them fail
    with the machine's load."""
    assert alpha > 0 and beta > 0, f"{what}: alpha {alpha}, beta {beta}"
    print(f"{what}: alpha {alpha}, beta {beta}: alpha's share "
          f"{100 * alpha / (alpha + beta):.2f}%; the workload measured "
          f"{100 * measured_share(r0, r1):.2f}% of wall time")
