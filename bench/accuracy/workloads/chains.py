"""Accuracy workload: random-depth chains of generated functions.

    chains.py DURATION SEED LEAF_US [alternate]

Three chains, a_1..a_40, b_1..b_40, c_1..c_40, of functions with the same
code shape (so every frame has the same size, and frame k of any chain sits
at the same address on 3.11+'s data stack). Each call picks a chain and a
depth d in 1..40 at random and busy-waits LEAF_US microseconds in the chain's
d-th function, which is then the leaf. With `alternate`, chains a and b take
turns at the same depth (a(d), b(d), a(d'), b(d'), ...): two chains through
the same addresses, the case a torn read can splice.

Valid stacks (the validator in bench/accuracy/oracle.py): `<module>;main` or
`<module>;main;X_1;...;X_d`, one chain X, levels 1..d in order.
Prints "ready {}" once set up. Runs on Python 3.8+.
"""
import random
import sys
import time

DEPTH = 40
PLANS = 20000


def make_chain(fam, space):
    src = "".join(
        f"def {fam}_{i}(n, t):\n"
        f"    if n > {i}:\n"
        f"        return {fam}_{i + 1}(n, t)\n"
        f"    e = clock() + t\n"
        f"    while clock() < e:\n"
        f"        pass\n"
        f"    return n\n\n"
        for i in range(1, DEPTH + 1))
    exec(compile(src, f"<chain {fam}>", "exec"), space)
    return space[f"{fam}_1"]


def main(duration, seed, leaf, alternate):
    rnd = random.Random(seed)
    space = {"clock": time.perf_counter}
    heads = [make_chain(f, space) for f in "abc"]
    if alternate:
        plan = []
        for _ in range(PLANS // 2):
            d = rnd.randint(1, DEPTH)
            plan += [(heads[0], d), (heads[1], d)]
    else:
        plan = [(heads[rnd.randrange(3)], rnd.randint(1, DEPTH)) for _ in range(PLANS)]
    print("ready {}", flush=True)
    end = time.monotonic() + duration
    while time.monotonic() < end:
        for head, d in plan[:500]:
            head(d, leaf)
        plan = plan[500:] + plan[:500]


if __name__ == "__main__":
    main(float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) * 1e-6,
         len(sys.argv) > 4 and sys.argv[4] == "alternate")
