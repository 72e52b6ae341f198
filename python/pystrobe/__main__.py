"""``python -m pystrobe ARGS``: run the pystrobe command with ARGS, for Python
users who do not know where its binary is. The process becomes the binary
(exec): its output, signals and exit status are the command's own.

The binary is the first of:

1. ``$PYSTROBE_BIN``, when set (an error if it is not an executable file);
2. ``pystrobe`` in the directory of this interpreter's scripts (the same
   installation prefix: ``sysconfig``'s ``scripts`` path, as a virtual
   environment or ``make install PREFIX=...`` lays it out);
3. ``pystrobe`` on ``$PATH``.

Exit status 127 with a message on stderr when none is found.
"""
import os
import shutil
import sys
import sysconfig


def _executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_binary():
    """The pystrobe binary's path, or None (a message already on stderr)."""
    env = os.environ.get("PYSTROBE_BIN")
    if env:
        if _executable(env):
            return env
        sys.stderr.write(f"pystrobe: PYSTROBE_BIN={env} is not an executable file\n")
        return None
    beside = os.path.join(sysconfig.get_path("scripts"), "pystrobe")
    if _executable(beside):
        return beside
    found = shutil.which("pystrobe")
    if found:
        return found
    sys.stderr.write("pystrobe: the pystrobe command was not found: not beside this "
                     f"interpreter ({os.path.dirname(beside)}) nor on PATH; install it "
                     "or set PYSTROBE_BIN to its path\n")
    return None


def main():
    binary = find_binary()
    if binary is None:
        return 127
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(binary, ["pystrobe", *sys.argv[1:]])
    return 127  # not reached: execv raises on failure


if __name__ == "__main__":
    sys.exit(main())
