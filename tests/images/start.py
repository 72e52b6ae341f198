"""The program tests/images/start-3.X.img are of (tools/record_images.sh
start): a thread started again and again. Stopped by gdb
(tools/start_frame.gdb) as the new thread's first frame (threading's
Thread._bootstrap) has become its current frame and is not yet marked
executing: a frame without a caller, at the bottom of an empty stack, a
moment every thread passes through as it starts.

Usage: start.py SECONDS
"""
import sys
import threading
import time


def work():
    return sum(range(20000))


def main():
    end = time.time() + float(sys.argv[1])
    while time.time() < end:
        t = threading.Thread(target=work)
        t.start()
        t.join()


main()
