"""An asyncio program in known states, for tests/integration/test_async.py.

Usage: async_target.py REPORT [DEPTH]

Builds, in the main thread's loop: a TaskGroup tree of named tasks, a gather
of leaf tasks, tasks waiting on an Event, a task draining an async
generator with `async for`, an eager task, a task awaited by several tasks
one of which was then cancelled (its awaiter set holds a tombstone), a chain
of DEPTH coroutines each awaiting the next, a task awaiting a
generator-based coroutine, one inside `asyncio.timeout`, a staggered_race,
and a task with a 10,000-char name; and in a second thread, its own loop with two tasks. Once all are
suspended it writes REPORT (JSON: per loop's thread, each task's name,
address and coroutine chain as cr_await shows it) and prints "ready".
"""
import asyncio
import json
import sys
import threading
import types

REPORT = sys.argv[1]
DEPTH = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
LONG_NAME = "n" * 10000

event = asyncio.Event()


async def leaf():
    await event.wait()


async def child_group():
    async with asyncio.TaskGroup() as tg:
        tg.create_task(leaf(), name="tg-leaf-1")
        tg.create_task(leaf(), name="tg-leaf-2")


async def gatherer():
    await asyncio.gather(asyncio.create_task(leaf(), name="g-leaf-1"),
                         asyncio.create_task(leaf(), name="g-leaf-2"))


async def ticker():
    for i in range(3):
        yield i
    await event.wait()
    yield 3


@types.coroutine
def generator_based(fut):
    yield from fut


async def gen_user(fut):
    await generator_based(fut)


async def with_timeout():
    async with asyncio.timeout(3600):
        await event.wait()


async def racer():
    from asyncio.staggered import staggered_race
    await staggered_race([leaf, leaf], delay=None)


async def agen_consumer():
    async for _ in ticker():
        pass


async def shared_job():
    await event.wait()


def deep(n):
    async def step(k):
        if k == 0:
            await event.wait()
        else:
            await step(k - 1)
    return step(n)


async def thread_leaf():
    await asyncio.Event().wait()


def thread_main(ready):
    async def main():
        async with asyncio.TaskGroup() as tg:
            tg.create_task(thread_leaf(), name="thread-leaf-1")
            tg.create_task(thread_leaf(), name="thread-leaf-2")
            await asyncio.sleep(0)
            ready.set()
    asyncio.run(main())


def chain_of(coro):
    """Qualified names and lines along coro's cr_await chain, innermost first."""
    out = []
    c = coro
    while c is not None and hasattr(c, "cr_frame"):
        if c.cr_frame is None:
            break
        out.append([c.cr_code.co_qualname, c.cr_frame.f_lineno])
        c = c.cr_await
    return out[::-1]


def report_loop(loop_tasks):
    return [{"name": t.get_name(), "addr": id(t), "chain": chain_of(t.get_coro())}
            for t in loop_tasks]


thread_tasks = []


async def main():
    ready = threading.Event()
    th = threading.Thread(target=thread_main, args=(ready,), daemon=True)
    th.start()
    ready.wait()
    loop = asyncio.get_running_loop()
    async with asyncio.TaskGroup() as tg:
        tg.create_task(child_group(), name="tg-parent")
        tg.create_task(gatherer(), name="gatherer")
        tg.create_task(leaf(), name="event-waiter-1")
        tg.create_task(leaf(), name="event-waiter-2")
        tg.create_task(agen_consumer(), name="agen")
        shared = tg.create_task(shared_job(), name="shared")
        ws = [tg.create_task(leaf(), name=f"awaiter-{i}") for i in range(3)]
        tg.create_task(deep(DEPTH), name="deep")
        tg.create_task(leaf(), name=LONG_NAME)
        tg.create_task(gen_user(loop.create_future()), name="generator-based")
        tg.create_task(with_timeout(), name="timeout")
        tg.create_task(racer(), name="racer")
        loop.set_task_factory(asyncio.eager_task_factory)
        tg.create_task(leaf(), name="eager")
        loop.set_task_factory(None)
        for _ in range(5):
            await asyncio.sleep(0)
        # shared's awaiters become a set of three; removing one leaves a
        # tombstone in it.
        for w in ws:
            asyncio.futures.future_add_to_awaited_by(shared, w)
        asyncio.futures.future_discard_from_awaited_by(shared, ws[2])
        for _ in range(5):
            await asyncio.sleep(0)
        other = [t for t in asyncio.all_tasks(th_loop[0])] if th_loop else []
        with open(REPORT, "w") as f:
            json.dump({"main_tid": threading.get_native_id(), "thread_tid": th.native_id,
                       "writer": id(asyncio.current_task()),
                       "main": report_loop(asyncio.all_tasks()),
                       "thread": report_loop(other)}, f)
        # Said from a callback, once this task is suspended: no task runs.
        loop.call_soon(lambda: print("ready", flush=True))
        await asyncio.sleep(3600)


th_loop = []
_orig = asyncio.BaseEventLoop.run_forever


def _run_forever(self):
    if threading.current_thread() is not threading.main_thread():
        th_loop.append(self)
    return _orig(self)


asyncio.BaseEventLoop.run_forever = _run_forever
sys.setrecursionlimit(10000)
asyncio.run(main())
