"""pystrobe: read the Python stacks of another, running CPython process.

A drop-in for CPython 3.15's private ``_remote_debugging`` module (stack
sampling and asyncio task graphs), usable from any host interpreter 3.8+
against any target pystrobe supports (CPython 3.7 to 3.15; GIL builds;
Linux; task graphs need a 3.14+ target)::

    import pystrobe

    unwinder = pystrobe.RemoteUnwinder(pid, all_threads=True,
                                       mode=pystrobe.PROFILING_MODE_ALL)
    for interp in unwinder.get_stack_trace():
        for thread in interp.threads:
            for frame in thread.frame_info:        # innermost first
                print(frame.funcname, frame.filename, frame.location)

``RemoteUnwinder``, ``InterpreterInfo``, ``ThreadInfo``, ``FrameInfo``,
``LocationInfo``, ``AwaitedInfo``, ``TaskInfo``, ``CoroInfo``, the
``THREAD_STATUS_*`` constants, ``is_python_process`` and ``get_child_pids``
behave as in ``_remote_debugging`` (docs/python.md). The
``PROFILING_MODE_*`` constants name the values of ``mode``.

``get_gc_stats()``, ``GCMonitor`` and ``GCStatsInfo`` read the target's
garbage-collector statistics as ``_remote_debugging``'s do (CPython 3.15+
targets; an older one raises ``RuntimeError``).

``get_all_awaited_by()`` and ``get_async_stack_trace()`` read the target's
asyncio tasks (CPython 3.14+; an older target raises ``RuntimeError``
saying so). A graph that changes while it is read is read again, never
returned half-old; a coroutine chain longer than 2,048 frames keeps its
innermost part over a ``<truncated>`` frame (the reference raises).

``pause_threads()`` stops every thread of the target (ptrace) until
``resume_threads()``; stacks read meanwhile are each one moment. Only the
thread that paused can resume (ptrace binds the stop to it).

Known gaps:

- Only ``cache_frames=True`` writes into the target (3.15+ targets), as the
  reference's frame cache does; otherwise nothing is written.
- ``get_stats()`` has the reference's keys; counters pystrobe has no
  counterpart for (batched reads, cache invalidations) are 0.
- ``is_python_process()`` is True only for a process pystrobe can attach to,
  so also False for a Python version it does not support.
"""
from ._pystrobe import (  # noqa: F401 (re-exported)
    PROCESS_VM_READV_SUPPORTED,
    PROFILING_MODE_ALL,
    PROFILING_MODE_CPU,
    PROFILING_MODE_EXCEPTION,
    PROFILING_MODE_GIL,
    PROFILING_MODE_WALL,
    THREAD_STATUS_GIL_REQUESTED,
    THREAD_STATUS_HAS_EXCEPTION,
    THREAD_STATUS_HAS_GIL,
    THREAD_STATUS_MAIN_THREAD,
    THREAD_STATUS_ON_CPU,
    THREAD_STATUS_UNKNOWN,
    AwaitedInfo,
    BinaryReader,
    BinaryWriter,
    CoroInfo,
    FrameInfo,
    GCMonitor,
    GCStatsInfo,
    InterpreterInfo,
    LocationInfo,
    RemoteUnwinder,
    TaskInfo,
    ThreadInfo,
    get_child_pids,
    get_gc_stats,
    is_python_process,
    zstd_available,
)

__version__ = "0.1.0"

__all__ = [
    "RemoteUnwinder",
    "InterpreterInfo",
    "ThreadInfo",
    "FrameInfo",
    "LocationInfo",
    "AwaitedInfo",
    "TaskInfo",
    "CoroInfo",
    "GCStatsInfo",
    "GCMonitor",
    "get_gc_stats",
    "BinaryReader",
    "BinaryWriter",
    "zstd_available",
    "is_python_process",
    "get_child_pids",
    "THREAD_STATUS_HAS_GIL",
    "THREAD_STATUS_ON_CPU",
    "THREAD_STATUS_UNKNOWN",
    "THREAD_STATUS_GIL_REQUESTED",
    "THREAD_STATUS_HAS_EXCEPTION",
    "THREAD_STATUS_MAIN_THREAD",
    "PROFILING_MODE_WALL",
    "PROFILING_MODE_CPU",
    "PROFILING_MODE_GIL",
    "PROFILING_MODE_ALL",
    "PROFILING_MODE_EXCEPTION",
    "PROCESS_VM_READV_SUPPORTED",
]
