"""The program tests/images/heap-3.X-*.img are of (tools/record_images.sh
heap): from 3.11, frames that live on the heap, each in its generator or
coroutine object, taking turns: a pipeline of generators (ga1 over ga2 over
ga3) pulled by sum(), and a chain of coroutines (ca1 awaiting ca2 awaiting
ca3) driven by send(), both entered from C. Each leaf spends its time in
sum(). Generator and coroutine objects of the same code shape have the
same size, so the two chains' objects take the same addresses, level by
level: a walk that copies a frame at one moment and its caller at the
other finds one chain's frame over the other's.

Usage: heap.py SECONDS
"""
import sys
import time

N = 200000


def ga3(n):
    yield sum(range(n))


def ga2(n):
    yield from ga3(n)


def ga1(n):
    yield from ga2(n)


async def ca3(n):
    return sum(range(n))


async def ca2(n):
    return await ca3(n)


async def ca1(n):
    return await ca2(n)


def drive_g(n):
    return sum(ga1(n))


def drive_c(n):
    try:
        ca1(n).send(None)
    except StopIteration as e:
        return e.value


def main():
    end = time.time() + float(sys.argv[1])
    while time.time() < end:
        drive_g(N)
        drive_c(N)


main()
