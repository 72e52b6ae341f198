"""Accuracy workload: a pipeline of asyncio coroutines.

    coroutines.py DURATION SEED

Four stage tasks, stage0..stage3, linked by asyncio queues: stage k takes
an item, awaits a chain of coroutines sK_1..sK_d (d random in 1..20, same
code shape, 5 us busy leaf), and passes the item on. The thread's stack is
the event loop's frames, then the running stage, then its chain.

Valid stacks: chain frames sK_1..sK_d only directly above stageK (the same
K), levels 1..d in order, nothing above them. Prints "ready {}" once set up.
Runs on Python 3.8+.
"""
import asyncio
import random
import sys
import time

DEPTH = 20
LEAF = 5e-6
STAGES = 4


def make_chain(fam, space):
    src = "".join(
        f"async def {fam}_{i}(n, t):\n"
        f"    if n > {i}:\n"
        f"        return await {fam}_{i + 1}(n, t)\n"
        f"    e = clock() + t\n"
        f"    while clock() < e:\n"
        f"        pass\n"
        f"    return n\n\n"
        for i in range(1, DEPTH + 1))
    exec(compile(src, f"<chain {fam}>", "exec"), space)
    return space[f"{fam}_1"]


STAGE_SRC = "".join(
    f"async def stage{k}(inq, outq, head, plan, end):\n"
    f"    i = 0\n"
    f"    while clock() < end:\n"
    f"        item = await inq.get()\n"
    f"        await head(plan[i % len(plan)], LEAF)\n"
    f"        i += 1\n"
    f"        await outq.put(item)\n\n"
    for k in range(STAGES))


async def pipeline(duration, seed):
    rnd = random.Random(seed)
    space = {"clock": time.monotonic, "LEAF": LEAF}
    exec(compile(STAGE_SRC, "<stages>", "exec"), space)
    chains = {"clock": time.perf_counter}
    queues = [asyncio.Queue() for _ in range(STAGES + 1)]
    end = time.monotonic() + duration
    tasks = []
    for k in range(STAGES):
        head = make_chain(f"s{k}", chains)
        plan = [rnd.randint(1, DEPTH) for _ in range(5000)]
        tasks.append(asyncio.ensure_future(
            space[f"stage{k}"](queues[k], queues[k + 1], head, plan, end)))
    for i in range(8):
        queues[0].put_nowait(i)
    print("ready {}", flush=True)
    while time.monotonic() < end:
        item = await queues[STAGES].get()
        await queues[0].put(item)
    for t in tasks:
        t.cancel()


def main(duration, seed):
    asyncio.run(pipeline(duration, seed))


if __name__ == "__main__":
    main(float(sys.argv[1]), int(sys.argv[2]))
