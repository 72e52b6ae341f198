"""ns_busy.py SECONDS: a thread spinning in busy_loop() while the main thread
sleeps SECONDS. Prints one line first: a JSON object with the two threads'
ids as the interpreter knows them (threading.get_native_id(), the ids of
its own PID namespace), {"main": N, "busy": N}."""
import json
import sys
import threading
import time


def busy_loop():
    n = 0
    while True:
        n += 1


t = threading.Thread(target=busy_loop, daemon=True)
t.start()
print(json.dumps({"main": threading.get_native_id(), "busy": t.native_id}), flush=True)
time.sleep(float(sys.argv[1]))
