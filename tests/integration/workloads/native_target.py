"""--native's target: a Python function called back from C, through
ctypes' libffi closure and libc's qsort, that sleeps there: the main
thread's stack is outer() -> qsort (C) -> compare() (Python)."""
import ctypes
import ctypes.util
import time

libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
said = []


def compare(a, b):
    if not said:
        said.append(1)
        print("ready", flush=True)
    time.sleep(600)
    return a[0] - b[0]


def outer():
    arr = (ctypes.c_int * 4)(3, 1, 2, 0)
    libc.qsort(arr, len(arr), ctypes.sizeof(ctypes.c_int), CMP(compare))


outer()
