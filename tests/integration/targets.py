"""The Python interpreters the integration tests run targets on.

Two kinds: pyenv builds on the host (shared libpython), and Debian's builds
inside the sid root filesystem (static executables, run through chroot, so
the paths of their mapped files are not the host's).
"""
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SIDROOT = Path(os.environ.get("PYSTROBE_SIDROOT", ROOT / ".cache" / "sid-root"))
# Where staged files live inside the sid root (and its path seen from inside).
STAGE_IN_ROOT = "/tmp/pystrobe-tests"


class Target:
    def __init__(self, name, version, argv, chroot=None):
        self.name = name          # e.g. "pyenv-3.13.0", "sid-3.15"
        self.version = version    # (major, minor)
        self.argv = argv          # command prefix that runs the interpreter
        self.chroot = chroot      # host path of the root, or None

    def __repr__(self):
        return self.name

    def stage(self, host_path):
        """Make host_path visible to the target; return the path it sees."""
        host_path = Path(host_path)
        if self.chroot is None:
            return str(host_path)
        dest_dir = Path(self.chroot) / STAGE_IN_ROOT.lstrip("/")
        dest_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy2(host_path, dest_dir / host_path.name)
        return f"{STAGE_IN_ROOT}/{host_path.name}"

    def stage_dir(self):
        """A fresh directory both sides can write: (host path, target path)."""
        import tempfile
        if self.chroot is None:
            d = tempfile.mkdtemp(prefix="pystrobe-")
            return Path(d), d
        base = Path(self.chroot) / STAGE_IN_ROOT.lstrip("/")
        base.mkdir(parents=True, exist_ok=True)
        d = Path(tempfile.mkdtemp(prefix="t-", dir=base))
        return d, f"{STAGE_IN_ROOT}/{d.name}"

    def host_path(self, target_path):
        """The host path of a file the target names target_path."""
        if self.chroot is None:
            return Path(target_path)
        return Path(self.chroot) / str(target_path).lstrip("/")

    def popen(self, args, **kw):
        return subprocess.Popen(self.argv + list(args), **kw)

    def run(self, args, **kw):
        return subprocess.run(self.argv + list(args), **kw)


def _pyenv_prefix(version):
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    p = root / "versions" / version
    return p if p.is_dir() else None


# pyenv builds on this machine, by full version.
PYENV_VERSIONS = ["3.6.15", "3.7.16", "3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0"]
SID_MINORS = [13, 14, 15]


def all_targets():
    found = []
    for v in PYENV_VERSIONS:
        p = _pyenv_prefix(v)
        major, minor = (int(x) for x in v.split(".")[:2])
        exe = p / "bin" / f"python{major}.{minor}" if p else None
        if exe and exe.exists():
            found.append(Target(f"pyenv-{v}", (major, minor), [str(exe)]))
    # Debian 12's own python3.11: a static build (runtime in the executable).
    host = Path("/usr/bin/python3.11")
    if host.exists():
        found.append(Target("debian-3.11-static", (3, 11), [str(host)]))
    for minor in SID_MINORS:
        exe = SIDROOT / "usr" / "bin" / f"python3.{minor}"
        if exe.exists():
            found.append(Target(f"sid-3.{minor}", (3, minor),
                                ["chroot", str(SIDROOT), f"/usr/bin/python3.{minor}"],
                                chroot=str(SIDROOT)))
    return found


SUPPORTED_FROM = (3, 7)
# 3.7 is read by 3.8's walker (frame objects, co_lnotab) through a layout of
# its own: test_old_pythons.py runs the stack, locals, profile and native
# tests on it (legacy_targets), not every test of the matrix (CI's time).
MATRIX_FROM = (3, 8)


# The sanitizer pass (PYSTROBE_SANITIZED) runs on one interpreter of each
# way CPython lays out frames (frame objects; the data stack; the
# debug-offsets table, with the frame cache and asyncio's table), which
# keeps `make test` within CI's time; the normal pass runs on every interpreter, and the
# line-table formats are fuzzed and unit-tested apart.
SANITIZED_TARGETS = {"pyenv-3.8.18", "pyenv-3.12.1", "sid-3.15"}

# Tests of what the command does with samples (modes, run and attach,
# signals, summaries, thread names), rather than of how a version's frames
# are read, run on one interpreter of each frame layout and Debian's static
# 3.11 (feature_targets); every test of reading stacks runs on all ten.
FEATURE_TARGETS = {"pyenv-3.8.18", "debian-3.11-static", "pyenv-3.12.1", "sid-3.14", "sid-3.15"}


def supported_targets():
    """Targets of the whole matrix (3.8+); under the sanitizers, those above."""
    found = [t for t in all_targets() if t.version >= MATRIX_FROM]
    if os.environ.get("PYSTROBE_SANITIZED"):
        found = [t for t in found if t.name in SANITIZED_TARGETS]
    return found


def feature_targets():
    """supported_targets() of FEATURE_TARGETS."""
    return [t for t in supported_targets() if t.name in FEATURE_TARGETS]


def legacy_targets():
    """Supported targets outside the matrix (3.7): test_old_pythons.py.
    None under the sanitizers (the walker is 3.8's, tested there)."""
    if os.environ.get("PYSTROBE_SANITIZED"):
        return []
    return [t for t in all_targets() if SUPPORTED_FROM <= t.version < MATRIX_FROM]


def unsupported_targets():
    """Python 3 targets pystrobe does not support yet: it must refuse them."""
    return [t for t in all_targets() if t.version < SUPPORTED_FROM]


def python2_target():
    """pyenv's Python 2.7, which pystrobe will never support, or None."""
    p = _pyenv_prefix("2.7.18")
    exe = p / "bin" / "python2.7" if p else None
    if exe and exe.exists():
        return Target("pyenv-2.7.18", (2, 7), [str(exe)])
    return None
