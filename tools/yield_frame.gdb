# Exit 0 if the stopped tests/images/yield.py (CPython 3.12, pyenv's build
# with debug information) is inside inner's yield: the thread's current
# frame is inner's, a generator's frame (owner 1) already unlinked from its
# caller (previous NULL); else exit 1. The target is left stopped. Used by
# tools/record_images.sh "yield".
set pagination off
set confirm off
python
def name(frame):
    ascii = frame["f_code"]["co_name"].cast(gdb.lookup_type("PyASCIIObject").pointer())
    return (ascii + 1).cast(gdb.lookup_type("char").pointer()).string()
ok = False
try:
    t = gdb.parse_and_eval("_PyRuntime.interpreters.head->threads.head")
    f = t["cframe"]["current_frame"]
    ok = (int(f) != 0 and int(f["owner"]) == 1 and int(f["previous"]) == 0
          and name(f) == "inner")
except gdb.error:
    pass
gdb.execute("quit %d" % (0 if ok else 1))
end
