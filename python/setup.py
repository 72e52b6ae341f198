"""The C extension of the pystrobe module, for setuptools (pyproject.toml
holds the rest). One abi3 build (the limited API of Python 3.8) serves every
host 3.8+. The library layers the binding uses are compiled into the
extension from ../src, so this directory builds only inside its checkout;
libelf and libzstd are linked dynamically (Debian: libelf-dev and libzstd-dev
to build, libelf1 and libzstd1 to run).
"""
import glob
import os

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
# The layers under the Python binding (docs/design.md); output/ and cli/ are
# the command's.
LAYERS = ["util", "platform", "binfmt", "mem", "cpython", "core"]
LIMITED_API = "0x03080000"


def rel(path):
    return os.path.relpath(path, HERE)


def library_sources():
    sources = []
    for layer in LAYERS:
        sources += sorted(glob.glob(os.path.join(TOP, "src", layer, "*.c")))
    # No native stacks in the module: it needs no libdw (Makefile's MOD_LIB_SRC).
    sources = [s for s in sources if not s.endswith(os.path.join("platform", "unwind.c"))]
    # CPython 3.15's binary profiles (BinaryReader, BinaryWriter)
    sources.append(os.path.join(TOP, "src", "output", "tach.c"))
    if not sources:
        raise SystemExit("setup.py: library sources not found in %s: build pystrobe's "
                         "module from its source tree" % os.path.join(TOP, "src"))
    return [rel(s) for s in sources]


extension = Extension(
    "pystrobe._pystrobe",
    sources=["pystrobe/_pystrobe.c"] + library_sources(),
    include_dirs=[rel(os.path.join(TOP, "include")), rel(os.path.join(TOP, "src"))],
    define_macros=[("_GNU_SOURCE", None), ("Py_LIMITED_API", LIMITED_API),
                   ("PYS_NO_NATIVE_STACKS", None)],
    extra_compile_args=["-std=c11", "-fvisibility=hidden"],
    libraries=["elf", "z", "zstd"],
    py_limited_api=True,
)

setup(ext_modules=[extension], options={"bdist_wheel": {"py_limited_api": "cp38"}})
