"""Packaging: what `make install`, the wheel and `make deb` give a user.

- The --help texts name every option the command accepts (src/cli/*.c), and
  docs/cli.md and the installed man page (each command's part of OPTIONS)
  name every option --help lists: an option added without its documentation
  fails here. The commands are those `pystrobe help` lists.
- `pystrobe help COMMAND` is `pystrobe COMMAND --help`; `--version` names the
  version and the commit, also for a tree without git (make dist).
- `make install DESTDIR=...`: the binary runs and dumps; `man -l` renders the
  page; a C program built with pkg-config alone attaches and prints a stack;
  the module imports and dumps from pyenv 3.8 and 3.12; bash and zsh
  completion offer the commands, every option of each command's --help and
  Python pids; `make uninstall` removes it all.
- The wheel `pip wheel ./python` builds installs and dumps under 3.8 and 3.12.
- `make deb` (lintian without errors; each package depends on the packages
  of the libraries its files link), the four packages installed by apt into
  an overlay of the sid root: there the command dumps a python3.13, the
  module imports and dumps, and a program built with the -dev package's
  pkg-config file attaches.

Everything here is a consumer of the packaging, not of the sanitized code:
the module runs in the normal pass only.
"""
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

import pytest

from conftest import wait_ready
from targets import ROOT, SIDROOT, _pyenv_prefix

BUILD = Path(os.environ.get("PYSTROBE_BUILD", ROOT / "build")).resolve()
SANITIZED = bool(os.environ.get("PYSTROBE_SANITIZED"))
pytestmark = pytest.mark.skipif(SANITIZED, reason="packaging's consumers: run once, in the "
                                "normal pass")
PREFIX = "/usr/local"
MAKE_TIMEOUT = 1800        # seconds for make install / make deb on a loaded machine
RUN_TIMEOUT = 120

# A target whose stack names a function of its own: outer -> inner, sleeping.
TARGET_CODE = """\
import time
def inner_probe_fn():
    print('ready', flush=True)
    time.sleep(600)
def outer_probe_fn():
    inner_probe_fn()
outer_probe_fn()
"""


def run(argv, ok=True, **kw):
    kw.setdefault("timeout", RUN_TIMEOUT)
    res = subprocess.run([str(a) for a in argv], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, **kw)
    if ok and res.returncode != 0:
        pytest.fail(f"{argv} exited {res.returncode}:\n{res.stdout.decode(errors='replace')}"
                    f"\n{res.stderr.decode(errors='replace')}", pytrace=False)
    return res


def make(*targets, **kw):
    return run(["make", "--no-print-directory", "-C", ROOT, f"B={BUILD}", *targets],
               timeout=MAKE_TIMEOUT, **kw)


def pyenv_python(version):
    p = _pyenv_prefix(version)
    exe = p / "bin" / ("python" + ".".join(version.split(".")[:2])) if p else None
    if not (exe and exe.exists()):
        pytest.fail(f"pyenv {version} not found", pytrace=False)
    return exe


@pytest.fixture
def sleeper(spawn):
    """A pyenv 3.12 process sleeping in outer_probe_fn -> inner_probe_fn."""
    p = spawn([pyenv_python("3.12.1"), "-c", TARGET_CODE], stdout=subprocess.PIPE)
    wait_ready(p)
    return p


@pytest.fixture
def script_sleeper(spawn, tmp_path_factory):
    """The same target started as a script through its "#!.../python3.12"
    line: its comm is the script's name, its argv[0] the interpreter."""
    script = tmp_path_factory.mktemp("script") / "probe_script"
    script.write_text(f"#!{pyenv_python('3.12.1')}\n{TARGET_CODE}")
    script.chmod(0o755)
    p = spawn([script], stdout=subprocess.PIPE)
    wait_ready(p)
    assert Path(f"/proc/{p.pid}/comm").read_text().strip() == "probe_script"
    return p


@pytest.fixture(scope="module")
def destdir():
    """The tree `make install DESTDIR=...` writes (default PREFIX)."""
    d = Path(tempfile.mkdtemp(prefix="pystrobe-install-"))
    make("install", f"DESTDIR={d}")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def installed(destdir, rel):
    return destdir / (PREFIX.lstrip("/") + "/" + rel)


# --- the option lists --------------------------------------------------------------

def commands(binary):
    """The commands `pystrobe help` lists."""
    text = run([binary, "help"]).stdout.decode()
    names = re.findall(r"^  ([a-z]+)\b", text.split("\nCommands:\n", 1)[1].split("\n\n")[0], re.M)
    assert {"run", "attach", "dump", "replay", "help", "version"} <= set(names), text
    return names


def help_texts(binary):
    """{command: its --help text} of every command with options; "" is
    `pystrobe help`."""
    texts = {"": run([binary, "help"]).stdout.decode()}
    for cmd in commands(binary):
        if cmd not in ("help", "version"):
            texts[cmd] = run([binary, cmd, "--help"]).stdout.decode()
    return texts


def help_options(text):
    """The options an --help text lists on its option lines."""
    found = set()
    for line in text.splitlines():
        m = re.match(r"^ {2,6}(?:(-[A-Za-z0-9]), )?(--[a-z0-9][a-z0-9-]*)", line)
        if m:
            found.update(x for x in m.groups() if x)
    return found


def source_options():
    """Every long option the command's source accepts: getopt tables and the
    "--name" literals it compares arguments with."""
    found = set()
    for path in sorted((ROOT / "src" / "cli").glob("*.c")):
        src = path.read_text()
        found.update("--" + n for n in re.findall(r'\{"([a-z0-9-]+)",\s*(?:no|required|optional)_argument', src))
        found.update(re.findall(r'strcmp\(argv\[[a-z]+\], "(--[a-z0-9-]+)"\)', src))
    found -= {"--version", "--help"}   # a command of main.c; the help itself
    return found


def test_help_lists_every_option_the_source_accepts(pystrobe):
    listed = set()
    for text in help_texts(pystrobe).values():
        listed |= help_options(text)
    accepted = source_options()
    assert len(accepted) > 20, accepted
    missing = sorted(accepted - listed)
    assert not missing, f"options the command accepts but no --help lists: {missing}"


def test_cli_md_documents_every_help_option(pystrobe):
    md = (ROOT / "docs" / "cli.md").read_text()
    for cmd, text in help_texts(pystrobe).items():
        for opt in sorted(help_options(text) - {"-h", "--help"}):
            assert re.search(r"`" + re.escape(opt) + r"[ `]", md), \
                f"docs/cli.md does not document {opt} of `pystrobe {cmd} --help`"


def test_help_command_equals_command_help(pystrobe):
    """For every command `pystrobe help` lists, help and version too (whose
    help is the command list); `-h` is `--help`."""
    for cmd in commands(pystrobe):
        a = run([pystrobe, "help", cmd])
        for flag in ("--help", "-h"):
            b = run([pystrobe, cmd, flag])
            assert a.stdout == b.stdout and a.stdout.startswith(b"usage: pystrobe"), (cmd, flag)
    usage = run([pystrobe, "help"]).stdout
    for argv in (["help", "--help"], ["--version", "--help"], ["--help"]):
        assert run([pystrobe, *argv]).stdout == usage, argv
    assert run([pystrobe, "help", "nope"], ok=False).returncode == 2


# --- version -------------------------------------------------------------------------

def git_commit():
    top = run(["git", "-C", ROOT, "rev-parse", "--show-toplevel"], ok=False)
    if top.returncode != 0 or Path(top.stdout.decode().strip()).resolve() != ROOT.resolve():
        return None
    return run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"]).stdout.decode().strip()


def test_version_names_version_and_commit(pystrobe):
    version = (ROOT / "VERSION").read_text().strip()
    out = run([pystrobe, "--version"]).stdout.decode()
    m = re.fullmatch(r"pystrobe (\S+) \(commit (\S+)\)\n", out)
    assert m, out
    assert m.group(1) == version
    # The commit the build recorded; a build older than the last commit
    # (tests run by hand after a commit) names an earlier one.
    built = m.group(2).split("-")[0]
    header = (BUILD / "gen" / "version.h").read_text()
    assert f'#define PYS_COMMIT "{m.group(2)}"' in header, header
    commit = git_commit()
    if commit:
        assert run(["git", "-C", ROOT, "merge-base", "--is-ancestor", built, "HEAD"],
                   ok=False).returncode == 0, f"{out}: not a commit of this branch"
        now = run([ROOT / "tools" / "gen_version.sh"]).stdout.decode()
        assert f'#define PYS_COMMIT "{commit}' in now, now
    assert run([pystrobe, "version"]).stdout.decode() == out
    # Every other place that states the version agrees with VERSION.
    assert f'version = "{version}"' in (ROOT / "python" / "pyproject.toml").read_text()
    assert f'__version__ = "{version}"' in (ROOT / "python" / "pystrobe" / "__init__.py").read_text()
    assert (ROOT / "debian" / "changelog").read_text().startswith(f"pystrobe ({version})")


def test_version_of_a_tree_without_git(tmp_path):
    """A tree `make dist` packed, unpacked where no git repository is: its
    version header names the commit from the tarball's COMMIT file, and
    "unknown" without it. (make dist puts the tarball in $(B).)"""
    make("dist")
    tarball = BUILD / f"pystrobe-{(ROOT / 'VERSION').read_text().strip()}.tar.gz"
    run(["tar", "-xzf", tarball, "-C", tmp_path])
    (tree,) = tmp_path.iterdir()
    assert not (tree / ".git").exists()
    recorded = (tree / "COMMIT").read_text().strip()
    if git_commit():
        assert recorded.split("-")[0] == git_commit()
    out = run([tree / "tools" / "gen_version.sh"], cwd=tree).stdout.decode()
    assert f'#define PYS_COMMIT "{recorded}"' in out, out
    (tree / "COMMIT").unlink()
    out = run([tree / "tools" / "gen_version.sh"], cwd=tree).stdout.decode()
    assert '#define PYS_COMMIT "unknown"' in out, out


# --- make install ------------------------------------------------------------------

def test_installed_binary_runs_and_dumps(destdir, sleeper):
    binary = installed(destdir, "bin/pystrobe")
    assert run([binary, "--version"]).stdout.startswith(b"pystrobe ")
    out = run([binary, "dump", sleeper.pid]).stdout.decode()
    assert "in outer_probe_fn" in out and "in inner_probe_fn" in out, out


def rendered_man(destdir):
    page = installed(destdir, "share/man/man1/pystrobe.1")
    env = dict(os.environ, LC_ALL="C", MANWIDTH="120", MAN_KEEP_FORMATTING="")
    res = run(["man", "-l", page], env=env)
    assert not res.stderr.strip(), res.stderr.decode()
    # Undo overstriking, should man format for a terminal anyway.
    return re.sub(r".\x08", "", res.stdout.decode())


def man_options(text):
    """{command: the options its part of the OPTIONS section describes}: the
    parts are titled "pystrobe run and pystrobe attach", each option an
    item whose head starts "-x, --long" or "--long"."""
    part = text.split("\nOPTIONS\n", 1)[1]
    part = re.split(r"\n(?=\S)", part, 1)[0]
    found, current = {}, []
    for line in part.splitlines():
        if re.match(r"^ {3}\S", line):
            current = re.findall(r"pystrobe ([a-z]+)", line)
            continue
        m = re.match(r"^ {7}(?:(-[A-Za-z0-9]), )?(--[a-z0-9][a-z0-9-]*)", line)
        for cmd in current if m else ():
            found.setdefault(cmd, set()).update(x for x in m.groups() if x)
    return found


def test_man_page_names_every_option_command_and_exit_status(destdir, pystrobe):
    text = rendered_man(destdir)
    described = man_options(text)
    for cmd, help_text in help_texts(pystrobe).items():
        missing = sorted(help_options(help_text) - described.get(cmd, set())) if cmd else []
        assert not missing, f"the man page's OPTIONS lack {missing} of `pystrobe {cmd} --help`"
    commands_part = text.split("\nCOMMANDS\n", 1)[1].split("\nOPTIONS\n", 1)[0]
    for cmd in commands(pystrobe):
        assert re.search(r"^ {7}" + cmd + r"\b", commands_part, re.M), \
            f"the man page lacks command {cmd}"
    statuses = re.findall(r"CLI_[A-Z]+ = (\d+)", (ROOT / "src" / "cli" / "cli.h").read_text())
    assert len(statuses) >= 10
    exit_section = text.split("\nEXIT STATUS\n", 1)[1]
    for st in statuses + ["130"]:
        assert re.search(r"^ +" + st + r" ", exit_section, re.M), f"exit status {st} missing"
    # The output formats, each under its own heading or item (docs/cli.md).
    for fmt in ("pstats.", "Collapsed stacks.", "Flame graph.", "speedscope.", "pprof.",
                "Heatmap.", "SVG flame graph", "Chrome trace", "Recordings (--binary",
                "Differential flame graph", "JSON lines (--jsonl", "Firefox Profiler (--gecko)",
                "The live view", "Text output", "JSON output", "Local variables",
                "Native stacks", "Asyncio tasks"):
        pattern = r"^ {3,}(?:\S+ +)?" + " +".join(map(re.escape, fmt.split()))
        assert re.search(pattern, text, re.M), f"no {fmt!r} in the man page"


def build_probe(sysroot, pkgconfig_dir, prog):
    """tests/integration/install_probe.c built with nothing but the flags of
    the libpystrobe.pc in pkgconfig_dir, as installed under sysroot."""
    # A sysroot's /usr/include is not the system's: pkg-config keeps it.
    env = dict(os.environ, PKG_CONFIG_SYSROOT_DIR=str(sysroot), PKG_CONFIG_LIBDIR=str(pkgconfig_dir),
               PKG_CONFIG_PATH="", PKG_CONFIG_ALLOW_SYSTEM_CFLAGS="1", PKG_CONFIG_ALLOW_SYSTEM_LIBS="1")
    flags = run(["pkg-config", "--cflags", "--libs", "libpystrobe"], env=env).stdout.decode()
    assert "-lpystrobe" in flags
    run(["cc", "-std=c11", "-Wall", "-Werror", "-o", prog,
         ROOT / "tests" / "integration" / "install_probe.c", *flags.split()])
    needed = run(["readelf", "-d", prog]).stdout.decode()
    assert "[libpystrobe.so.0]" in needed, needed


def assert_probe_stack(out, version):
    lines = out.decode().splitlines()
    assert lines[0].startswith("Python " + version), lines
    names = [l.split()[0] for l in lines if l.startswith("  ")]
    assert names[:2] == ["inner_probe_fn", "outer_probe_fn"], lines


def test_pkg_config_program_attaches_and_prints_stack(destdir, sleeper, tmp_path):
    prog = tmp_path / "probe"
    build_probe(destdir, installed(destdir, "lib/pkgconfig"), prog)
    res = run([prog, sleeper.pid], env=dict(os.environ, LD_LIBRARY_PATH=str(installed(destdir, "lib"))))
    assert_probe_stack(res.stdout, "3.12")


# argv: pid, the directory to import pystrobe from.
MODULE_DUMP = """\
import sys
sys.path.insert(0, sys.argv[2])
import pystrobe
print(pystrobe.__file__)
for interp in pystrobe.RemoteUnwinder(int(sys.argv[1]), all_threads=True).get_stack_trace():
    for thread in interp.threads:
        for frame in thread.frame_info:
            print(frame.funcname)
"""


@pytest.mark.parametrize("version", ["3.8.18", "3.12.1"])
def test_module_imports_from_install_and_dumps(destdir, sleeper, version):
    site = installed(destdir, "lib/python3/dist-packages")
    res = run([pyenv_python(version), "-I", "-c", MODULE_DUMP, sleeper.pid, site])
    lines = res.stdout.decode().splitlines()
    assert lines[0].startswith(str(site)), lines
    assert lines[1:3] == ["inner_probe_fn", "outer_probe_fn"], lines


def bash_complete(destdir, *lines, cwd=None):
    """What Tab offers at the end of each line, through bash-completion's
    loader finding the installed file (as an interactive shell does): a list
    for each line, all from one shell."""
    script = ["source /usr/share/bash-completion/bash_completion",
              "_completion_loader pystrobe", "complete -p pystrobe"]
    for line in lines:
        words = line.split(" ")
        script += [f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)}); "
                   f"COMP_CWORD={len(words) - 1}; COMPREPLY=()",
                   f"COMP_LINE={shlex.quote(line)}; COMP_POINT=${{#COMP_LINE}}",
                   "_pystrobe pystrobe", "printf '%s\\n' \"${COMPREPLY[@]}\" '<end>'"]
    env = dict(os.environ, XDG_DATA_DIRS=str(installed(destdir, "share")), HOME=str(destdir),
               TERM="dumb")
    res = run(["bash", "--norc", "--noprofile", "-i", "-c", "\n".join(script)], env=env, cwd=cwd)
    out = res.stdout.decode().splitlines()
    assert out[0] == "complete -F _pystrobe pystrobe", out
    offers = "\n".join(out[1:]).split("<end>")[:-1]
    return [[w for w in o.split("\n") if w] for o in offers]


def assert_python_pids(pids, *sleepers):
    """pids holds the sleepers' and only processes whose comm or argv[0]'s
    last part starts with "python"."""
    for p in sleepers:
        assert str(p.pid) in pids, (p.args, pids)
    for pid in pids:     # other processes come and go meanwhile
        try:
            comm = Path(f"/proc/{pid}/comm").read_text()
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        except FileNotFoundError:
            continue
        assert comm.startswith("python") or os.path.basename(argv0).startswith(b"python"), pid


def test_bash_completion_offers_commands_options_and_pids(destdir, sleeper, script_sleeper,
                                                         pystrobe, tmp_path):
    if not Path("/usr/share/bash-completion/bash_completion").exists():
        pytest.fail("bash-completion is not installed (scripts/install-deps.sh)")
    texts = help_texts(pystrobe)
    cmds = [c for c in texts if c]
    (tmp_path / "run.pysr").touch()
    offers = bash_complete(destdir, "pystrobe ", "pystrobe d", "pystrobe dump ", "pystrobe dump -p ",
                           "pystrobe replay ", "pystrobe attach --diff-flamegraph r",
                           *(f"pystrobe {c} -" for c in cmds), cwd=tmp_path)
    assert set(offers[0]) >= set(commands(pystrobe)), offers[0]
    assert offers[1] == ["dump"]
    assert_python_pids(offers[2], sleeper, script_sleeper)
    assert_python_pids(offers[3], sleeper, script_sleeper)
    assert offers[4] == ["run.pysr"] and offers[5] == ["run.pysr"], offers[4:6]
    for cmd, offered in zip(cmds, offers[6:]):
        missing = sorted(help_options(texts[cmd]) - set(offered))
        assert not missing, f"bash completion of `pystrobe {cmd} -` lacks {missing}"


def zsh_complete(comp, *states):
    """What the installed zsh function offers for each (words, CURRENT):
    _arguments and _describe replaced by functions that print what they are
    given, the option specs (brace-expanded) or the described list."""
    script = ["_arguments() { print -rl -- \"$@\" '<end>' }",
              "_describe() { print -rl -- \"${(@P)${@[-1]}}\" '<end>' }",
              f"source {shlex.quote(str(comp))}"]
    for words, current in states:
        script.append(f"words=({' '.join(shlex.quote(w) for w in words)}); CURRENT={current}; "
                      "_pystrobe")
    res = run(["zsh", "-f", "-c", "\n".join(script)])
    offers = res.stdout.decode().split("<end>\n")[:-1]
    return [[w for w in o.split("\n") if w] for o in offers]


def test_zsh_completion_offers_commands_options_and_pids(destdir, sleeper, script_sleeper,
                                                        pystrobe):
    """zsh loads the installed file as a completion function (its syntax,
    #compdef line, compinit), which offers the commands, each command's
    --help options, and Python pids for a PID."""
    comp = installed(destdir, "share/zsh/site-functions/_pystrobe")
    assert comp.read_text().startswith("#compdef pystrobe\n")
    run(["zsh", "-n", comp])
    # fpath: the installed directory and compinit's own (scanning all of
    # zsh's completion functions takes seconds).
    script = (f"fpath=({comp.parent} ${{(M)fpath:#*/functions/Completion}}); "
              "autoload -Uz compinit; compinit -u -D; print -r -- ${_comps[pystrobe]}")
    res = run(["zsh", "-f", "-c", script], env=dict(os.environ, HOME=str(destdir)))
    assert res.stdout.decode().strip() == "_pystrobe", res.stdout
    texts = help_texts(pystrobe)
    cmds = [c for c in texts if c]
    offers = zsh_complete(comp, (["pystrobe", ""], 2), *((["pystrobe", c, "-"], 3) for c in cmds))
    assert {o.split(":")[0] for o in offers[0]} >= set(commands(pystrobe)), offers[0]
    for cmd, specs in zip(cmds, offers[1:]):
        offered = {m.group(1) for m in map(re.compile(r"^(?:\([^)]*\))?(--?[\w-]+)\[").match,
                                           specs) if m}
        missing = sorted(help_options(texts[cmd]) - offered)
        assert not missing, f"zsh completion of `pystrobe {cmd}` lacks {missing}"
        operand = specs[-1]
        assert operand.endswith("_pystrobe_pids" if cmd in ("attach", "dump") else "_files"), specs
    # The pids an operand PID is offered: "PID:COMMAND".
    script = f"source {shlex.quote(str(comp))}; _describe() {{ print -rl -- \"${{(@P)${{@[-1]}}}}\" }}; _pystrobe_pids"
    pids = [x.split(":")[0] for x in run(["zsh", "-f", "-c", script]).stdout.decode().split()]
    assert_python_pids(pids, sleeper, script_sleeper)


def test_uninstall_removes_what_install_put(tmp_path):
    make("install", f"DESTDIR={tmp_path}")
    assert installed(tmp_path, "bin/pystrobe").exists()
    make("uninstall", f"DESTDIR={tmp_path}")
    left = [p for p in tmp_path.rglob("*") if not p.is_dir()]
    assert not left, left


# --- the wheel ---------------------------------------------------------------------

def test_wheel_installs_and_dumps(sleeper, tmp_path):
    out = tmp_path / "wheels"
    # A copy of what setup.py reads: pip builds in python/ and must not race
    # a parallel run.
    tree = tmp_path / "tree"
    for d in ("python", "src", "include"):
        shutil.copytree(ROOT / d, tree / d,
                        ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    run(["/usr/bin/python3", "-m", "pip", "wheel", "--no-build-isolation", "--no-index",
         "--no-deps", "-w", out, tree / "python"], timeout=MAKE_TIMEOUT)
    (wheel,) = out.glob("*.whl")
    assert re.fullmatch(r"pystrobe-[\d.]+-cp38-abi3-linux_x86_64\.whl", wheel.name), wheel.name
    with zipfile.ZipFile(wheel) as z:
        assert {"pystrobe/__init__.py", "pystrobe/_pystrobe.abi3.so"} <= set(z.namelist())
    for version in ("3.8.18", "3.12.1"):
        site = tmp_path / f"site-{version}"
        run([pyenv_python(version), "-m", "pip", "install", "--no-index", "--no-deps",
             "--target", site, wheel], timeout=MAKE_TIMEOUT)
        res = run([pyenv_python(version), "-I", "-c", MODULE_DUMP, sleeper.pid, site])
        lines = res.stdout.decode().splitlines()
        assert lines[0].startswith(str(site)) and lines[1:3] == ["inner_probe_fn", "outer_probe_fn"], lines


# --- the Debian package ------------------------------------------------------------

class Mounts:
    """Mount points to undo, innermost first."""

    def __init__(self):
        self.points = []

    def mount(self, *args):
        run(["mount", *args])
        self.points.append(str(args[-1]))

    def release(self):
        for p in reversed(self.points):
            subprocess.run(["umount", "-l", p], stderr=subprocess.DEVNULL)


def depends_names(deb):
    """The package names the Depends field of deb lists (any alternative)."""
    field = run(["dpkg-deb", "-f", deb, "Depends"]).stdout.decode()
    return {re.match(r"\s*([^\s(:]+)", alt).group(1) for alt in re.split(r"[,|]", field) if alt.strip()}


def needed_libraries(deb, scratch):
    """{soname: path of the file} of the libraries the ELF files in deb link."""
    tree = scratch / deb.name
    tree.mkdir(parents=True)
    run(["dpkg-deb", "-x", deb, tree])
    needed = {}
    for f in tree.rglob("*"):
        if f.is_file() and not f.is_symlink() and f.read_bytes()[:4] == b"\x7fELF":
            for so in re.findall(r"NEEDED\s+(\S+)", run(["objdump", "-p", f]).stdout.decode()):
                needed[so] = f
    return needed


def assert_depends_cover_needed(debs, scratch):
    """Each package depends on a package that holds each library its files
    link (dpkg-shlibdeps' ${shlibs:Depends}), here the host's owner of it."""
    needed = {name: needed_libraries(deb, scratch) for name, deb in debs.items()}
    sonames = sorted({so for libs in needed.values() for so in libs})
    owners = {so: set() for so in sonames}
    owners.update((so, {"libpystrobe0"}) for so in sonames if so.startswith("libpystrobe.so."))
    # One query for all: "libelf1:amd64: /usr/lib/x86_64-linux-gnu/libelf.so.1".
    res = run(["dpkg-query", "-S", *(f"*/{so}" for so in sonames if not owners[so])])
    for line in res.stdout.decode().splitlines():
        pkgs, path = line.split(": ", 1)
        if os.path.basename(path) in owners:
            owners[os.path.basename(path)] |= {p.split(":")[0] for p in pkgs.split(", ")}
    for name, libs in needed.items():
        depends = depends_names(debs[name])
        for so, f in libs.items():
            assert owners[so] & depends, \
                f"{name}: {f.name} links {so} ({owners[so]}); Depends: {depends}"


def test_deb_installs_in_clean_root_and_dumps(tmp_path, spawn):
    if os.geteuid() != 0:
        pytest.fail("the package test needs root (mounts, chroot)")
    if not (SIDROOT / "usr" / "bin" / "python3.13").exists():
        pytest.fail(f"no sid root at {SIDROOT} (make sidroot)")
    make("deb")                    # runs lintian --fail-on error
    debs = {p.name.split("_")[0]: p for p in (BUILD / "deb").glob("*.deb")
            if "-dbgsym_" not in p.name}
    assert set(debs) == {"pystrobe", "libpystrobe0", "libpystrobe-dev", "python3-pystrobe"}, debs
    contents = run(["dpkg-deb", "-c", debs["pystrobe"]]).stdout.decode()
    for f in ("./usr/bin/pystrobe", "./usr/share/man/man1/pystrobe.1.gz",
              "./usr/share/bash-completion/completions/pystrobe",
              "./usr/share/zsh/vendor-completions/_pystrobe"):
        assert f in contents, f
    assert_depends_cover_needed(debs, tmp_path / "unpacked")
    # The -dev package's header and pkg-config file, unpacked here, build a
    # program that runs in the root against the libpystrobe0 installed there.
    dev = tmp_path / "dev"
    for name in ("libpystrobe-dev", "libpystrobe0"):
        run(["dpkg-deb", "-x", debs[name], dev])
    (pc,) = dev.glob("usr/lib/*/pkgconfig/libpystrobe.pc")
    m = Mounts()
    try:
        # An overlay of the sid root: apt writes only into the tmpfs above it.
        layer = tmp_path / "layer"
        root = tmp_path / "root"
        layer.mkdir()
        root.mkdir()
        m.mount("-t", "tmpfs", "tmpfs", layer)
        (layer / "upper").mkdir()
        (layer / "work").mkdir()
        m.mount("-t", "overlay", "overlay", "-o",
                f"lowerdir={SIDROOT},upperdir={layer}/upper,workdir={layer}/work", root)
        m.mount("-t", "proc", "proc", root / "proc")
        for deb in debs.values():
            shutil.copy2(deb, root / "tmp" / deb.name)
        assert not (root / "usr" / "bin" / "pystrobe").exists()
        res = run(["chroot", root, "apt-get", "install", "-y",
                   *(f"/tmp/{deb.name}" for deb in debs.values())], timeout=600,
                  env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        for name in debs:
            assert re.search(rf"^Setting up {name}(:amd64)? ".encode(), res.stdout, re.M), \
                res.stdout.decode()
        assert not (SIDROOT / "usr" / "bin" / "pystrobe").exists(), "the sid root was changed"
        # Built from make dist's copy (no git there): the commit it recorded.
        version = (ROOT / "VERSION").read_text().strip()
        recorded = (BUILD / "dist" / f"pystrobe-{version}" / "COMMIT").read_text().strip()
        if git_commit():
            assert recorded.split("-")[0] == git_commit(), recorded
        out = run(["chroot", root, "/usr/bin/pystrobe", "--version"]).stdout.decode()
        assert out == f"pystrobe {version} (commit {recorded})\n", out
        target = spawn(["chroot", root, "/usr/bin/python3.13", "-c", TARGET_CODE],
                       stdout=subprocess.PIPE)
        wait_ready(target)
        out = run(["chroot", root, "/usr/bin/pystrobe", "dump", target.pid]).stdout.decode()
        assert out.startswith(f"Process {target.pid}: Python 3.13"), out
        assert "in outer_probe_fn" in out and "in inner_probe_fn" in out, out
        # python3-pystrobe, imported by the root's python3 (apt pulled it).
        site = "/usr/lib/python3/dist-packages"
        res = run(["chroot", root, "/usr/bin/python3", "-I", "-c", MODULE_DUMP, target.pid, site])
        lines = res.stdout.decode().splitlines()
        assert lines[0].startswith(site + "/pystrobe/"), lines
        assert lines[1:3] == ["inner_probe_fn", "outer_probe_fn"], lines
        build_probe(dev, pc.parent, root / "tmp" / "probe")
        assert_probe_stack(run(["chroot", root, "/tmp/probe", target.pid]).stdout, "3.13")
        target.kill()
        target.wait()
    finally:
        m.release()
