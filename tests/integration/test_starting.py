"""A Python 3.13+ process caught while it starts: the dynamic loader maps
libpython from offset 0 first and its data segment (where the runtime and
its _Py_DebugOffsets live) a moment later. Attaching then must say "not
initialised yet", which `run` waits out, never "unsupported version" (exit
6), which `run` takes as final.

The moment is made to last: a C program maps the whole file read-only from
offset 0, as the loader's first step does, and waits."""
import subprocess

import pytest

from conftest import run_pystrobe, wait_ready
from targets import _pyenv_prefix

MAPPER = r"""
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    struct stat st;
    int fd = argc > 1 ? open(argv[1], O_RDONLY) : -1;
    if (fd < 0 || fstat(fd, &st) < 0 ||
        mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) == MAP_FAILED)
        return 1;
    puts("ready");
    fflush(stdout);
    pause();
    return 0;
}
"""


def libpython_313():
    p = _pyenv_prefix("3.13.0")
    lib = p / "lib" / "libpython3.13.so.1.0" if p else None
    if not (lib and lib.exists()):
        pytest.skip("no pyenv 3.13.0 with a shared libpython")
    return lib


def test_runtime_mapped_before_its_data_is_not_unsupported(pystrobe, spawn, tmp_path):
    lib = libpython_313()
    src, prog = tmp_path / "mapper.c", tmp_path / "mapper"
    src.write_text(MAPPER)
    subprocess.run(["cc", "-std=c11", "-D_GNU_SOURCE", "-o", str(prog), str(src)], check=True,
                   timeout=120)
    p = spawn([str(prog), str(lib)], stdout=subprocess.PIPE)
    wait_ready(p)
    r = run_pystrobe(pystrobe, "attach", "-d", "0.2", p.pid)
    err = r.stderr.decode()
    assert r.returncode == 4 and "not Python" in err and "starting?" in err, (r.returncode, err)
