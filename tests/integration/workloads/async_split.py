"""Two asyncio tasks in one loop splitting the CPU 3:1: "heavy" spins three
units of work for each one "light" spins, each yielding to the loop after
each unit. With N (argv[1]) idle tasks besides, waiting on an Event, for
the cost of a task graph with many tasks. Runs SECONDS (argv[2], default
3600); prints "ready" once all tasks exist.
"""
import asyncio
import sys
import time

IDLE = int(sys.argv[1]) if len(sys.argv) > 1 else 0
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 3600.0


def spin(n):
    x = 0
    for i in range(n):
        x += i
    return x


async def heavy_work(end):
    while time.monotonic() < end:
        spin(30000)
        await asyncio.sleep(0)


async def light_work(end):
    while time.monotonic() < end:
        spin(10000)
        await asyncio.sleep(0)


async def idle(ev):
    await ev.wait()


async def main():
    end = time.monotonic() + SECONDS
    ev = asyncio.Event()
    idlers = [asyncio.create_task(idle(ev), name=f"idle-{i}") for i in range(IDLE)]
    async with asyncio.TaskGroup() as tg:
        tg.create_task(heavy_work(end), name="heavy")
        tg.create_task(light_work(end), name="light")
        print("ready", flush=True)
    ev.set()
    await asyncio.gather(*idlers)


asyncio.run(main())
