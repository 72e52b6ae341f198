"""CPython under names that do not say python: attach finds the runtime by
what the files hold (.PyRuntime, _PyRuntime, Py_Initialize), not by name.

The targets, each built afresh for the module:
  sid-3.15-as-myapp     Debian's static python3.15 copied inside the sid root
                        as .../myapp and run there through chroot
  pyenv-3.X-as-myapp    pyenv's python3.X (a shared-libpython build) copied as
                        bin/myapp, its libpython copied as lib/libmyrt.so.1.0
                        and found through a link of the old name (the kernel
                        names the file, libmyrt, in the maps)
  embed-3.X-static      a C program, myhost, that links pyenv's libpython3.X.a
                        statically (as Blender does), exports its symbols for
                        extension modules, and runs a script with runpy
No file any of them maps is named python3.X or libpython3.X (checked, so that
a test here cannot pass by a name). Each gets `pystrobe dump` compared field
by field with the target's own report (stack_target.py) and a short
`pystrobe attach` of a busy loop.
"""
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import run_pystrobe, start_stack_target, wait_ready
from targets import SIDROOT, Target, _pyenv_prefix
from test_dump import (EXIT_OK, EXIT_UNSUPPORTED, assert_error, dump_json,
                       dumped_threads, frame_problems, report_threads)
from test_sampling import load_collapsed

# The names attach once chose candidates by.
INTERPRETER_NAME = re.compile(r"^(lib)?python\d")

EMBED_C = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* myhost SCRIPT [ARGS...]: runs SCRIPT as __main__ with sys.argv set. */
int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    Py_Initialize();
    PyObject *args = PyList_New(0);
    for (int i = 1; i < argc; i++) {
        PyObject *a = PyUnicode_DecodeFSDefault(argv[i]);
        PyList_Append(args, a);
        Py_DECREF(a);
    }
    PySys_SetObject("argv", args);
    Py_DECREF(args);
    int rc = PyRun_SimpleString(
        "import runpy, sys\nrunpy.run_path(sys.argv[0], run_name='__main__')\n");
    Py_FinalizeEx();
    return rc == 0 ? 0 : 1;
}
"""

BUSY = """\
def spin_here():
    while True:
        pass


print("ready", flush=True)
spin_here()
"""


class Renamed(Target):
    """A target with its own environment. An embedder takes no interpreter
    options: -B is dropped (stack_target.py sets dont_write_bytecode itself)."""

    def __init__(self, name, version, argv, image, chroot=None, env=None, options=True):
        super().__init__(name, version, argv, chroot)
        self.image = image        # basename of the file that holds the runtime
        self.env = env or {}
        self.options = options

    def popen(self, args, **kw):
        if not self.options:
            args = [a for a in args if a != "-B"]
        return subprocess.Popen(self.argv + list(args), env=dict(os.environ, **self.env), **kw)


def pyenv_or_fail(version):
    p = _pyenv_prefix(version)
    if p is None:
        pytest.fail(f"pyenv Python {version} is not installed (scripts/install-deps.sh)")
    return p


def sid_as_myapp(workdir):
    exe = SIDROOT / "usr" / "bin" / "python3.15"
    if not exe.exists():
        pytest.fail(f"{exe} is missing (make sidroot)")
    host_dir, target_dir = Target("sid", None, [], chroot=str(SIDROOT)).stage_dir()
    shutil.copy2(exe, host_dir / "myapp")
    return Renamed("sid-3.15-as-myapp", (3, 15),
                   ["chroot", str(SIDROOT), f"{target_dir}/myapp"], "myapp",
                   chroot=str(SIDROOT)), host_dir


def pyenv_as_myapp(version, workdir):
    prefix = pyenv_or_fail(version)
    major, minor = (int(x) for x in version.split(".")[:2])
    (workdir / "bin").mkdir()
    (workdir / "lib").mkdir()
    shutil.copy2(prefix / "bin" / f"python{major}.{minor}", workdir / "bin" / "myapp")
    # libpython3.X.so.1.0, or libpython3.Xm.so.1.0 before 3.8.
    lib = sorted((prefix / "lib").glob(f"libpython{major}.{minor}*.so.1.0"))[0]
    shutil.copy2(lib, workdir / "lib" / "libmyrt.so.1.0")
    # The executable asks for the old name (its DT_NEEDED); the link answers,
    # and the maps name the file it points to.
    (workdir / "lib" / lib.name).symlink_to("libmyrt.so.1.0")
    env = {"LD_LIBRARY_PATH": str(workdir / "lib"), "PYTHONHOME": str(prefix)}
    return Renamed(f"pyenv-{major}.{minor}-as-myapp", (major, minor),
                   [str(workdir / "bin" / "myapp")], "libmyrt.so.1.0", env=env), None


def embed_static(version, workdir):
    prefix = pyenv_or_fail(version)
    major, minor = (int(x) for x in version.split(".")[:2])
    config = str(prefix / "bin" / f"python{major}.{minor}-config")

    def flags(*args):
        return subprocess.run([config, *args], capture_output=True, text=True,
                              check=True).stdout.split()

    static = Path(flags("--configdir")[0]) / f"libpython{major}.{minor}.a"
    if not static.exists():
        pytest.fail(f"{static} is missing")
    ldflags = [f for f in flags("--embed", "--ldflags") if f != f"-lpython{major}.{minor}"]
    src = workdir / "myhost.c"
    src.write_text(EMBED_C)
    exe = workdir / "myhost"
    # -export-dynamic: extension modules (lib-dynload) find the C API in the
    # executable, as in CPython's own static builds.
    res = subprocess.run(["cc", "-O1", *flags("--cflags"), "-o", str(exe), str(src),
                          str(static), "-Wl,-export-dynamic", *ldflags],
                         capture_output=True, text=True)
    assert res.returncode == 0, f"cannot build the embedder:\n{res.stderr}"
    return Renamed(f"embed-{major}.{minor}-static", (major, minor), [str(exe)], "myhost",
                   env={"PYTHONHOME": str(prefix)}, options=False), None


BUILDERS = {
    "sid-3.15-as-myapp": sid_as_myapp,
    "pyenv-3.8-as-myapp": lambda d: pyenv_as_myapp("3.8.18", d),
    "pyenv-3.12-as-myapp": lambda d: pyenv_as_myapp("3.12.1", d),
    "embed-3.8-static": lambda d: embed_static("3.8.18", d),
    "embed-3.12-static": lambda d: embed_static("3.12.1", d),
}


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def renamed(request):
    workdir = Path(tempfile.mkdtemp(prefix="pystrobe-renamed-"))
    staged = None
    try:
        target, staged = BUILDERS[request.param](workdir)
        yield target
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if staged is not None:
            shutil.rmtree(staged, ignore_errors=True)


@pytest.fixture(scope="module")
def renamed_stack(renamed):
    sp, cleanup = start_stack_target(renamed)
    try:
        yield sp
    finally:
        cleanup()


def mapped_names(pid):
    names = set()
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].startswith("/"):
                names.add(os.path.basename(parts[5].rstrip("\n").removesuffix(" (deleted)")))
    return names


def test_no_file_named_like_an_interpreter(renamed_stack):
    names = mapped_names(renamed_stack.pid)
    assert renamed_stack.target.image in names, sorted(names)
    assert not [n for n in names if INTERPRETER_NAME.match(n)], sorted(names)


def test_dump_renamed(pystrobe, renamed_stack):
    doc = dump_json(pystrobe, renamed_stack.pid)
    assert doc["python_version"] == renamed_stack.report["python_version"]
    assert os.path.basename(doc["image"]) == renamed_stack.target.image, doc["image"]
    got = dumped_threads(doc)
    want = report_threads(renamed_stack)
    assert sorted(got) == sorted(want), "native thread ids differ"
    problems = []
    for tid, w in want.items():
        problems += frame_problems(w, got[tid]["frames"])
    assert not problems, "\n".join(problems[:60])


def test_attach_renamed(pystrobe, renamed, tmp_path):
    host_dir, target_dir = renamed.stage_dir()
    try:
        (host_dir / "busy.py").write_text(BUSY)
        p = renamed.popen([f"{target_dir}/busy.py"], stdout=subprocess.PIPE)
        try:
            assert wait_ready(p) == "ready"
            out = tmp_path / "busy.collapsed"
            res = run_pystrobe(pystrobe, "attach", "-d", "1", "--collapsed", "-o", out, p.pid)
            assert res.returncode == EXIT_OK, res.stderr.decode(errors="replace")
        finally:
            p.kill()
            p.wait()
        stacks = load_collapsed(out)
        busy = f"{target_dir}/busy.py"
        spinning = 0
        for s in stacks:
            # Below the script's <module>: runpy's frames for the embedder.
            names = [(f, q) for f, q, _ in s.frames if f == busy]
            assert names and names[0] == (busy, "<module>"), s.frames
            # The loop, or (just after "ready") still the module's own line.
            assert names in ([(busy, "<module>"), (busy, "spin_here")],
                             [(busy, "<module>")]), s.frames
            assert s.leaf_python() == names[-1][1], s.frames
            spinning += s.count if names[-1][1] == "spin_here" else 0
        assert spinning > 0, [s.frames for s in stacks]
    finally:
        shutil.rmtree(host_dir, ignore_errors=True)


def test_renamed_unsupported(pystrobe, tmp_path):
    """A renamed Python that is too old is named with its version, and the
    message names the executable."""
    target, _ = pyenv_as_myapp("3.6.15", tmp_path)
    p = target.popen(["-c", "import time; print('ready', flush=True); time.sleep(600)"],
                     stdout=subprocess.PIPE)
    try:
        assert wait_ready(p) == "ready"
        err = assert_error(run_pystrobe(pystrobe, "dump", p.pid), EXIT_UNSUPPORTED,
                           f"process {p.pid}", "not supported", str(tmp_path / "bin" / "myapp"))
        assert "Python 3.6.15" in err, err
    finally:
        p.kill()
        p.wait()
