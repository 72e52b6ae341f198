"""async_gc.py SECONDS: an asyncio task "collector" that makes cyclic
garbage and collects it (gc_work.py's make_garbage, which calls
gc.collect(); gc_work.py must be staged beside this file), yielding to the
loop between rounds; prints "ready" once it runs."""
import asyncio
import sys
import time

from gc_work import make_garbage


async def collect(end):
    while time.monotonic() < end:
        make_garbage()
        await asyncio.sleep(0)


async def main(seconds):
    task = asyncio.create_task(collect(time.monotonic() + seconds), name="collector")
    await asyncio.sleep(0)
    print("ready", flush=True)
    await task


asyncio.run(main(float(sys.argv[1])))
