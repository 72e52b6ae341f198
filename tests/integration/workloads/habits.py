"""A target for the py-spy habits tests: the main thread spins in busy_fn,
whose loop spans several lines; a second thread waits forever in
waiter_fn (asleep, never holding the GIL again)."""
import threading


def waiter_fn():
    threading.Event().wait()


def busy_fn():
    x = 0
    while True:
        x += 1
        x ^= 3
        x = x % 1000003


threading.Thread(target=waiter_fn, daemon=True).start()
print("ready", flush=True)
busy_fn()
