"""A target for --diff-flamegraph: `base` spends its time in common() and
old_only(), `new` in common() and new_only(); with `hostile`, new_only's
name (3.11+: co_qualname) is markup and invalid UTF-8's stand-in. Prints
"ready", then runs until killed."""
import sys


def spin(n):
    x = 0
    for i in range(n):
        x ^= i
    return x


def common():
    spin(20000)


def old_only():
    spin(20000)


def new_only():
    spin(20000)


HOSTILE = "</script><img src=x onerror=alert(1)>\u2603"
if len(sys.argv) > 2 and sys.argv[2] == "hostile" and hasattr(new_only.__code__, "co_qualname"):
    new_only.__code__ = new_only.__code__.replace(co_qualname=HOSTILE, co_name=HOSTILE)

side = old_only if sys.argv[1] == "base" else new_only
print("ready", flush=True)
while True:
    common()
    side()
