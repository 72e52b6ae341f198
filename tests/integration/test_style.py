"""House style checks that need no target: the limit of 100 lines per
function in the C of src/, python/, tests/tools/ and bench/.

A function definition is recognised by its layout (clang-format's): a line
starting at column 0 and ending with ')', then a line '{', up to the next '}'
at column 0. Its length counts from the signature's last line to the closing
brace, both included."""

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAX_LINES = 100
# Generated tables, not written by hand.
SKIP = {"src/cpython/layouts_gen.c", "src/cpython/opcodes_gen.c"}


def long_functions(path, limit=MAX_LINES):
    """Yields (name, line, length) for each definition in path over limit."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    i = 0
    while i + 1 < len(lines):
        sig = lines[i]
        if sig[:1] not in ("", " ", "\t", "#", "/", "*", "}", "{") and sig.rstrip().endswith(")") and lines[i + 1] == "{":
            end = i + 2
            while end < len(lines) and not lines[end].startswith("}"):
                end += 1
            length = end - i + 1
            if length > limit:
                head = sig.split("(", 1)[0].split()
                name = head[-1].lstrip("*") if head else sig
                yield name, i + 1, length
            i = end + 1
        else:
            i += 1


def c_sources():
    for top in ("src", "python", "tests/tools", "bench"):
        for path in sorted((ROOT / top).rglob("*.c")):
            rel = path.relative_to(ROOT).as_posix()
            if rel not in SKIP:
                yield rel, path


def test_recogniser_counts_a_definition(tmp_path):
    body = ["    x++;"] * 99
    src = tmp_path / "f.c"
    src.write_text("static int\nlong_one(int x)\n{\n" + "\n".join(body) + "\n}\n"
                   "int short_one(void)\n{\n    return 0;\n}\n")
    # Signature line, '{', 99 body lines and '}': 102 lines.
    assert list(long_functions(src)) == [("long_one", 2, 102)]
    assert list(long_functions(src, limit=102)) == []


def test_no_function_over_100_lines():
    found = [f"{rel}:{line} {name} ({length} lines)"
             for rel, path in c_sources()
             for name, line, length in long_functions(path)]
    assert not found, f"functions over {MAX_LINES} lines:\n" + "\n".join(found)
