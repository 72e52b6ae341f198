"""Two threads, each running its own asyncio loop: the main thread's task
"spinner" burns CPU; the thread "loop-2"'s task "sleeper" sleeps in
time.sleep (a running task off the CPU, without the GIL). Runs SECONDS
(argv[1], default 3600); prints "ready" once both tasks run.
"""
import asyncio
import sys
import threading
import time

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 3600.0
END = time.monotonic() + SECONDS
started = threading.Event()


def spin(n):
    x = 0
    for i in range(n):
        x += i
    return x


async def spinner_work():
    while time.monotonic() < END:
        spin(20000)
        await asyncio.sleep(0)


async def sleeper_work():
    started.set()
    while time.monotonic() < END:
        time.sleep(0.25)
        await asyncio.sleep(0)


async def side():
    await asyncio.create_task(sleeper_work(), name="sleeper")


async def main():
    t = asyncio.create_task(spinner_work(), name="spinner")
    started.wait()
    print("ready", flush=True)
    await t


threading.Thread(target=lambda: asyncio.run(side()), name="loop-2", daemon=True).start()
asyncio.run(main())
