"""Dump code objects' line tables with the interpreter's own answers.

Runs under any CPython 3.8 - 3.15. Compiles a sample of the standard library
from source plus synthetic edge cases, walks every code object (recursively
through co_consts) and writes, for each, its raw line table and what the
interpreter reports about every instruction. tests/tools/check_linetable.c
reads the stream and compares pystrobe's decoders against it.

Format: one record per line, fields separated by single spaces.

    # <comment>                      ignored by the reader
    C <kind> <firstlineno> <code bytes> <table hex, or - if empty> <name>
    P <line> <end line> <col> <end col>   kind "loc" (3.11+): one per code
                                          unit, from co_positions(), in order
    R <start> <end> <line>                kind "l310" (3.10): co_lines()
    S <offset> <line>                     kind "lnotab" (3.8, 3.9):
                                          dis.findlinestarts()

None is written as -1. A record runs until the next C line or the end.
The name (file:qualified name) is last and may contain spaces.

Usage: dump_positions.py [--min-modules N]
Exit status 2 if fewer than N (default 25) standard-library modules compiled.
"""
import dis
import os
import sys
import types
import warnings

# Standard-library modules compiled from source (a module "a.b" is looked up
# as a/b.py or a/b/__init__.py). Those missing from a version are skipped.
MODULES = [
    "os", "re", "json.decoder", "argparse", "asyncio.base_events",
    "collections", "dataclasses", "enum", "functools", "inspect", "pathlib",
    "pathlib._local", "typing", "threading", "email._header_value_parser",
    "http.client", "logging", "tarfile", "zipfile", "unittest.case",
    "difflib", "textwrap", "subprocess", "pickle", "_pydecimal", "ast",
    "tokenize", "shutil", "string", "traceback", "configparser",
    "_pydatetime", "statistics", "fractions", "ipaddress",
]

V = sys.version_info[:2]


def stdlib_source(name):
    base = os.path.join(os.path.dirname(os.__file__), *name.split("."))
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return path
    return None


def synthetic_sources():
    """(name, source) pairs for edge cases the stdlib rarely hits."""
    out = []
    # Line gaps far beyond one table entry: forwards, and backwards (the
    # loop's jump back to its test).
    gap = "\n" * 200000
    out.append(("gap", "def gap(a):\n    b = a + 1\n" + gap + "    return b\n"))
    out.append(("loop_gap",
                "def loop_gap(xs):\n"
                "    while xs:\n"
                "        xs = xs[1:]\n" + gap +
                "        xs = xs[2:]\n"
                "    return xs\n"))
    # Long lines: columns past 127 (no one-line form), past 255 and past
    # 65535 (a long string pushes the last few; the checker's lookups are
    # quadratic in a code object's size, so the sizes stay modest).
    terms = " + ".join("a%d" % i for i in range(150))
    out.append(("wide",
                "def wide(a):\n"
                "    return (" + terms + ")\n"
                "def wider(f, a):\n"
                "    return f(" + ", ".join(["a"] * 300) + ", '" + "x" * 70000 +
                "', a, a.b, a[a])\n"
                "x = [" + ", ".join("v%d" % i for i in range(600)) + "]\n"))
    # Expressions spanning lines.
    out.append(("multiline",
                "def multi(a, b, foo):\n"
                "    x = foo(a,\n"
                "            b,\n"
                "            [i for i in a\n"
                "             if i])\n"
                "    y = (a\n"
                "         +\n"
                "         b)\n"
                "    return {k: v\n"
                "            for k, v in zip(a,\n"
                "                            b)}, x, y\n"
                "z = multi(\n"
                "    [1, 2],\n"
                "    [3, 4],\n"
                "    lambda *a:\n"
                "        a)\n"))
    # A 3000-line function (mostly one-instruction-pair lines: the checker
    # is quadratic in a code object's size, and slow under ASan).
    body = []
    for i in range(3000):
        if i % 10 == 9:
            body.append("    if x%d > y: y = x%d - 1" % (i - 1, i - 1))
        elif i % 10 == 4:
            body.append("    x%d = x%d * %d + y" % (i, i - 1, i))
        else:
            body.append("    x%d = y" % i)
    out.append(("big", "def big(y, x0=1):\n" + "\n".join(body) + "\n    return y\n"))
    # Assorted constructs with unusual location entries: exception tables,
    # cleanup code with no line, generators, closures, decorators.
    out.append(("misc",
                "import contextlib\n"
                "def deco(f):\n"
                "    return f\n"
                "@deco\n"
                "class K:\n"
                "    @deco\n"
                "    def m(self, a):\n"
                "        try:\n"
                "            with contextlib.suppress(KeyError):\n"
                "                return a[0]\n"
                "        except (IndexError,\n"
                "                TypeError) as e:\n"
                "            del e\n"
                "        finally:\n"
                "            a = None\n"
                "    def gen(self, n):\n"
                "        for i in range(n):\n"
                "            yield i; yield from range(i)\n"
                "    async def co(self, x):\n"
                "        async with x as y:\n"
                "            async for z in y:\n"
                "                await z\n"
                "def outer(a):\n"
                "    def inner(b):\n"
                "        nonlocal a\n"
                "        a = b if b else (lambda: a)()\n"
                "        assert a, f'{a!r:>{b}} {a}'\n"
                "        return 1 < a <= 3 != b\n"
                "    return inner\n"
                "while True:\n"
                "    break\n"
                "else:\n"
                "    pass\n"))
    if V >= (3, 10):
        out.append(("match",
                    "def m(p):\n"
                    "    match p:\n"
                    "        case [x, y, *rest] if x > y:\n"
                    "            return rest\n"
                    "        case {'k': v, **kw}:\n"
                    "            return v\n"
                    "        case K(a=1) | K(a=2):\n"
                    "            return 0\n"
                    "        case _:\n"
                    "            return None\n"))
    if V >= (3, 11):
        out.append(("except_star",
                    "def es(f):\n"
                    "    try:\n"
                    "        f()\n"
                    "    except* ValueError:\n"
                    "        pass\n"
                    "    except* (TypeError, KeyError) as eg:\n"
                    "        f = eg\n"
                    "    return f\n"))
    return out


def varint(u):
    out = []
    while u >= 64:
        out.append(64 | (u & 63))
        u >>= 6
    out.append(u)
    return out


def svarint(v):
    return varint((-v << 1) | 1 if v < 0 else v << 1)


def random_delta(rng, line, lo=-2**30, hi=2**30):
    """A line delta, mostly small, that keeps line inside [lo, hi]."""
    if rng.random() < 0.1:
        d = rng.randint(-2**20, 2**20)
    else:
        d = rng.randint(-3, 3)
    return d if lo <= line + d <= hi else -d


def random_loctable(rng, units, line):
    """A well-formed 3.11+ location table covering units code units, using
    every entry kind with random operands (lines through -1 and below,
    unknown columns, varints of every length up to 6 groups)."""
    tab = []
    while units > 0:
        n = min(units, rng.randint(1, 8))
        units -= n
        code = rng.randint(0, 15)
        tab.append(0x80 | code << 3 | (n - 1))
        if code <= 9:
            tab.append(rng.randint(0, 127))
        elif code <= 12:
            line += code - 10
            tab += [rng.randint(0, 127), rng.randint(0, 127)]
        elif code == 13:
            d = random_delta(rng, line)
            line += d
            tab += svarint(d)
        elif code == 14:
            d = random_delta(rng, line)
            line += d
            tab += svarint(d)
            tab += varint(rng.choice([0, 1, rng.randint(0, 100), rng.randint(0, 2**20)]))
            for _ in range(2):
                tab += varint(rng.choice([0, 1, rng.randint(0, 300),
                                          rng.randint(0, 2**31 - 1)]))
    return bytes(tab)


def random_linetable310(rng, nbytes, line):
    """A 3.10 table covering nbytes of bytecode: even lengths (some empty),
    signed deltas including the no-line marker -128."""
    tab = []
    while nbytes > 0:
        n = min(nbytes, rng.choice([0, 2, 2 * rng.randint(0, 127)]))
        nbytes -= n
        d = rng.randint(-128, 127)
        if d != -128:
            d = d if -2**30 <= line + d <= 2**30 else -d
            line += d
        tab += [n, d & 255]
    return bytes(tab)


def random_lnotab(rng, nbytes, line):
    """A 3.8/3.9 co_lnotab: any address increments, signed line increments."""
    tab = []
    addr = 0
    while addr < nbytes + 8:
        n = rng.choice([0, 2, rng.randint(0, 255)])
        addr += n
        d = rng.randint(-128, 127)
        d = d if -2**30 <= line + d <= 2**30 else -d
        line += d
        tab += [n, d & 255]
    return bytes(tab)


def random_tables(count):
    """Code objects whose tables are random but well formed: the interpreter
    decodes them (co_positions() and the rest read any table), so its answers
    for lines, columns and markers no compiler emits are the reference."""
    import random
    rng = random.Random(626)
    src = "def base(a):\n" + "".join("    a = a + %d\n" % i for i in range(40))
    base = compile(src, "<random>", "exec").co_consts[0]
    nbytes = len(base.co_code)
    for i in range(count):
        first = rng.choice([0, 1, 2, 5, 1000])
        if V >= (3, 11):
            code = base.replace(co_firstlineno=first,
                                co_linetable=random_loctable(rng, nbytes // 2, first))
        elif V == (3, 10):
            code = base.replace(co_firstlineno=first,
                                co_linetable=random_linetable310(rng, nbytes, first))
        else:
            code = code_replace(base, co_firstlineno=first,
                                co_lnotab=random_lnotab(rng, nbytes, first))
        if V >= (3, 11):
            code = code.replace(co_qualname="random%d" % i)
        yield code


def code_replace(code, **kw):
    """code.replace(**kw); 3.7 has no replace: the constructor, whose
    arguments are the attributes in this order."""
    if hasattr(code, "replace"):
        return code.replace(**kw)
    names = ["co_argcount", "co_kwonlyargcount", "co_nlocals", "co_stacksize", "co_flags",
             "co_code", "co_consts", "co_names", "co_varnames", "co_filename", "co_name",
             "co_firstlineno", "co_lnotab", "co_freevars", "co_cellvars"]
    return types.CodeType(*[kw.get(n, getattr(code, n)) for n in names])


def walk(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            for sub in walk(c):
                yield sub


def code_name(code):
    return "%s:%s" % (code.co_filename, getattr(code, "co_qualname", code.co_name))


def record(code, out):
    if V >= (3, 11):
        kind, table = "loc", code.co_linetable
    elif V == (3, 10):
        kind, table = "l310", code.co_linetable
    else:
        kind, table = "lnotab", code.co_lnotab
    out.append("C %s %d %d %s %s" % (kind, code.co_firstlineno, len(code.co_code),
                                     table.hex() or "-", code_name(code)))
    if kind == "loc":
        for pos in code.co_positions():
            out.append("P %d %d %d %d" % tuple(-1 if v is None else v for v in pos))
    elif kind == "l310":
        for start, end, line in code.co_lines():
            out.append("R %d %d %d" % (start, end, -1 if line is None else line))
    else:
        for off, line in dis.findlinestarts(code):
            out.append("S %d %d" % (off, line))


def relocated(code):
    """Copies of code with other first lines: near the top of int32, and 0
    (co_firstlineno may not be negative)."""
    span = 0
    for c in walk(code):
        span = max(span, c.co_firstlineno - code.co_firstlineno + 1000)
    for first in (2**31 - 1 - span, 0):
        yield code_replace(code, co_firstlineno=first)


def main(argv):
    min_modules = 25
    if len(argv) >= 2 and argv[0] == "--min-modules":
        min_modules = int(argv[1])
    warnings.simplefilter("ignore")
    out = ["# pystrobe linetable dump, python %s" % sys.version.split()[0]]
    done = 0
    for name in MODULES:
        path = stdlib_source(name)
        if path is None:
            out.append("# missing %s" % name)
            continue
        with open(path, "rb") as f:
            src = f.read()
        code = compile(src, path, "exec", dont_inherit=True)
        done += 1
        for c in walk(code):
            record(c, out)
        sys.stdout.write("\n".join(out) + "\n")
        out = []
    for name, src in synthetic_sources():
        code = compile(src, "<%s>" % name, "exec", dont_inherit=True)
        for c in walk(code):
            record(c, out)
            if name == "misc":
                for r in relocated(c):
                    record(r, out)
    for code in random_tables(300):
        record(code, out)
    out.append("# modules %d" % done)
    sys.stdout.write("\n".join(out) + "\n")
    sys.stdout.flush()
    if done < min_modules:
        sys.stderr.write("only %d standard-library modules found (want %d)\n"
                         % (done, min_modules))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
