"""A target for the --heatmap tests: code from files in DIR that the tests
change or remove while it runs, and from names that are markup.

    heatmap_target.py DIR

Writes into DIR (where the test put changed.py and later.py before the
target started: neither is changed after the start until the test says so),
then imports or runs:
  - changed.py: a module; the test rewrites it after the target started
    (its page must say the file changed);
  - later.py: a module the test rewrites while pystrobe samples it (its page
    must show the source as it was when sampled);
  - gone.py: a module deleted once imported (its page has counts, no source);
  - a file whose name and source are markup ('"><img src=x onerror=...>.py',
    holding '</script><script>...');
  - code compiled with the file name '</script><script>...' (no such file).
Then prints "ready" and spins through all five until killed.
"""
import os
import sys

HOSTILE_FILE = "\"><img src=x onerror=\"document.title='pwned1'\">.py"
HOSTILE_NAME = "</script><script>document.title='pwned2'</script>"
HOSTILE_SOURCE = '''\
# </script><script>document.title='pwned3'</script> <b>bold</b> & more
def hostile_spin(n):
    s = "</script><script>document.title='pwned4'</script>"
    for _ in range(n):
        s = s[1:] + s[0]
    return s
'''

def main(d):
    with open(os.path.join(d, "gone.py"), "w") as f:
        f.write("def gone_spin(n):\n    x = 0\n    for i in range(n):\n        x += i\n"
                "    return x\n")
    path = os.path.join(d, HOSTILE_FILE)
    with open(path, "w") as f:
        f.write(HOSTILE_SOURCE)
    sys.path.insert(0, d)
    import changed
    import gone
    import later
    os.unlink(os.path.join(d, "gone.py"))
    hostile = {}
    exec(compile(HOSTILE_SOURCE, path, "exec"), hostile)
    named = {}
    exec(compile("def named_spin(n):\n    x = 0\n    for i in range(n):\n        x += i\n"
                 "    return x\n", HOSTILE_NAME, "exec"), named)
    print("ready", flush=True)
    while True:
        changed.changed_spin(2000)
        gone.gone_spin(2000)
        later.later_spin(2000)
        hostile["hostile_spin"](200)
        named["named_spin"](2000)


if __name__ == "__main__":
    main(sys.argv[1])
