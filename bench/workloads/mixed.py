"""Benchmark workload: several small functions, short calls, string work.

The stack changes on nearly every sample (parse, normalise, score, render
and string methods in turn), the hard case for caches. See _bench.py for the
command line.
"""
import _bench

WORDS = ["alpha", "  Bravo", "charlie ", "DELTA", "echo", "foxtrot", "Golf",
         "hotel", "india", "Juliett", "kilo", "lima"]
RECORDS = 200  # records per unit


def make_record(i):
    return f"{i},{WORDS[i % len(WORDS)]},{i * 7 % 1000}"


def parse(line):
    idx, word, num = line.split(",")
    return int(idx), word, int(num)


def normalize(word):
    return word.strip().lower().replace("e", "3")


def score(word, n):
    return sum(map(ord, word)) + n


def render(word, value):
    return "%s=%d" % (word, value)


class Tally:
    def __init__(self):
        self.counts = {}

    def add(self, key):
        self.counts[key] = self.counts.get(key, 0) + 1


def unit():
    tally = Tally()
    out = []
    for i in range(RECORDS):
        _, word, num = parse(make_record(i))
        word = normalize(word)
        tally.add(word)
        out.append(render(word, score(word, num)))
    text = "|".join(out)
    return text.upper().count("A") + len(tally.counts)


if __name__ == "__main__":
    _bench.run(unit, __doc__)
