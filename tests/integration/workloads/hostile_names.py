"""A target whose busy function has a file name and qualified name full of
markup: <script>, &, quotes, a control character. It prints "ready", then
spins in that function for ever."""
SRC = """
def evil_fn():
    x = 0
    while True:
        x += 1
        x ^= 5
evil_fn()
"""
NAME = "<script>alert(1)</script>&amp;\"'\x01.py"
print("ready", flush=True)
exec(compile(SRC, NAME, "exec"))
