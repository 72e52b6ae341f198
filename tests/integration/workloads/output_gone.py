"""A parent whose output directory goes while pystrobe samples it, for
--subprocesses: it starts a child that spins in child_spin() for 1.5 s,
waits for it, then removes DIR, where pystrobe writes the profiles at the
end.

    output_gone.py DIR

Runs on Python 3.8+.
"""
import shutil
import subprocess
import sys
import time


def child_spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def main():
    if sys.argv[1] == "--child":
        child_spin(1.5)
        return
    print("ready", flush=True)
    subprocess.run([sys.executable, __file__, "--child"], check=True)
    shutil.rmtree(sys.argv[1])


if __name__ == "__main__":
    main()
