"""A small program for `pystrobe dump` to look at (used by `make demo`).

Three worker threads do different, recognisable work forever, and the main
thread waits for them:

  primes    counts primes by trial division (busy on the CPU)
  report    builds and joins strings (busy, allocating)
  fetcher   sleeps inside a few nested calls, as if waiting on the network

Run it, then from another terminal: pystrobe dump PID
"""
import threading
import time


def is_prime(n):
    if n < 2:
        return False
    d = 2
    while d * d <= n:
        if n % d == 0:
            return False
        d += 1
    return True


def count_primes_forever():
    while True:
        count = sum(1 for n in range(200_000) if is_prime(n))
        assert count == 17_984


def build_report(rows):
    lines = []
    for i in range(rows):
        lines.append(f"row {i:6d}: " + "#" * (i % 60))
    return "\n".join(lines)


def build_reports_forever():
    while True:
        build_report(5_000)


class Fetcher:
    def fetch(self, url):
        return self.wait_for_network(url)

    def wait_for_network(self, url):
        time.sleep(0.5)
        return url


def fetch_forever():
    fetcher = Fetcher()
    while True:
        fetcher.fetch("https://example.org/")


def main():
    workers = [
        threading.Thread(target=count_primes_forever, name="primes", daemon=True),
        threading.Thread(target=build_reports_forever, name="report", daemon=True),
        threading.Thread(target=fetch_forever, name="fetcher", daemon=True),
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


if __name__ == "__main__":
    main()
