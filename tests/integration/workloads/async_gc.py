"""async_gc.py SECONDS: an asyncio task "collector" that makes cyclic
garbage and collects it (gc.collect() from make_garbage), yielding to the
loop between rounds; prints "ready" once it runs."""
import asyncio
import gc
import sys
import time


class Node:
    def __init__(self):
        self.other = self


def make_garbage():
    for _ in range(20000):
        Node()
    gc.collect()


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
