"""The program tests/images/awaits-3.X-*.img are of (tools/record_images.sh
awaits): from 3.12, a coroutine stage that awaits, in turn, a coroutine
calling a plain function (getter calls take, which spins: a frame on the
data stack over a coroutine's on the heap) and a chain of two coroutines
(c1 awaiting c2, which spins), as asyncio's queues and a task's own chain
of coroutines take turns. getter and c1 have the same code shape, so
c1's coroutine object takes the address getter's has just freed, and its
frame lies where getter's lay: a walk that copies take at the first
moment and its caller at the second finds take over c1.

Usage: awaits.py SECONDS
"""
import sys
import time

N = 200000


def take(n):
    return sum(range(n))


async def getter(n):
    return take(n)


async def c2(n):
    return sum(range(n))


async def c1(n):
    return await c2(n)


async def stage(n):
    await getter(n)
    await c1(n)


def drive(n):
    try:
        stage(n).send(None)
    except StopIteration:
        pass


def main():
    end = time.time() + float(sys.argv[1])
    while time.time() < end:
        drive(N)


main()
