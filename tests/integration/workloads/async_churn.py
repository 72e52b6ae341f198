"""Tasks made and finished without pause, for torn reads of the task graph:
each task named "a-N" runs a_job and each "b-N" b_job, so that a graph read
across a change could show a task under another's name. Prints "ready".
"""
import asyncio


async def a_job():
    for _ in range(3):
        await asyncio.sleep(0)


async def b_job():
    for _ in range(3):
        await asyncio.sleep(0)


async def main():
    print("ready", flush=True)
    i = 0
    while True:
        ts = [asyncio.create_task(a_job() if k % 2 else b_job(),
                                  name=f"{'a' if k % 2 else 'b'}-{i}-{k}")
              for k in range(10)]
        i += 1
        await asyncio.gather(*ts)


asyncio.run(main())
