"""Random shapes for the bit-exactness sweeps: log-uniform, with primes, powers of two
and edge sizes forced in, capped in element count so a sweep stays fast."""

import math
import random

PRIMES = [2, 3, 5, 7, 13, 31, 37, 127, 199, 257, 1021, 4093, 8191, 65521, 69997, 131071, 299993]


def log_uniform(rng: random.Random, lo: int, hi: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(max(lo, 1)), math.log(hi)))))


def random_shapes(n, seed, max_rows, max_cols, max_numel, min_rows=0, min_cols=0):
    rng = random.Random(seed)
    specials = [p for p in PRIMES if p <= max_cols] + [2**k for k in range(0, 18) if 2**k <= max_cols]
    shapes = []
    while len(shapes) < n:
        kind = len(shapes) % 4
        rows = log_uniform(rng, max(min_rows, 1), max_rows)
        cols = rng.choice(specials) if kind == 1 else log_uniform(rng, max(min_cols, 1), max_cols)
        if kind == 2:
            rows = rng.choice([p for p in PRIMES if p <= max_rows] + [2**k for k in range(13) if 2**k <= max_rows])
        rows = max(min_rows, min(rows, max_rows, max(1, max_numel // max(cols, 1))))
        shapes.append((rows, cols))
    return shapes
