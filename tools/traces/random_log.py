#!/usr/bin/env python3
"""Write an allocation log of random sizes and lifetimes for dv-replay.

A workload that does not repeat itself: each row allocates (sizes
lognormal, capped) or frees a random live block, on a random stream and
thread.  The same arguments write the same log.  Standard library only.

    python3 tools/traces/random_log.py --rows 200000 --streams 4 -o rand4.csv
    build/tools/dv-replay --stack --repeat 5 --csv rand4.csv
"""
import argparse
import gzip
import math
import random
import sys


def rows(n, streams, threads, seed, live_max, mu, sigma, size_max, cross):
    rng = random.Random(seed)
    live = []  # [pointer, size, stream, thread]
    t = 1764170000.0
    nextp = 0x10000000
    for _ in range(n):
        t += 1e-6
        if live and (len(live) >= live_max or rng.random() < 0.48):
            p, size, stream, thread = live.pop(rng.randrange(len(live)))
            if cross:
                stream = rng.randrange(streams)
            yield f"{thread},{t:.6f},free,{hex(p)},{size},{stream}"
        else:
            size = int(min(max(math.exp(rng.gauss(mu, sigma)), 1), size_max))
            stream = rng.randrange(streams)
            thread = rng.randrange(threads) + 1
            p = nextp
            nextp += (size + 4095) // 4096 * 4096 + 4096
            live.append([p, size, stream, thread])
            yield f"{thread},{t:.6f},allocate,{hex(p)},{size},{stream}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200000)
    ap.add_argument("--streams", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None,
                    help="replay threads (default: as many as streams)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--live-max", type=int, default=400,
                    help="blocks live at most (default 400)")
    ap.add_argument("--mu", type=float, default=11.0,
                    help="log of the median size in bytes (default 11: 58 KiB)")
    ap.add_argument("--sigma", type=float, default=2.5)
    ap.add_argument("--size-max", type=int, default=256 << 20)
    ap.add_argument("--cross", action="store_true",
                    help="free each block on a random stream")
    ap.add_argument("-o", "--out", default="-", help="output (.gz: compressed)")
    a = ap.parse_args()
    if a.rows < 1 or a.streams < 1 or a.live_max < 1 or a.size_max < 1:
        ap.error("--rows, --streams, --live-max and --size-max must be positive")
    threads = a.threads if a.threads is not None else a.streams
    if threads < 1:
        ap.error("--threads must be positive")
    if a.out == "-":
        out = sys.stdout
    elif a.out.endswith(".gz"):
        out = gzip.open(a.out, "wt")
    else:
        out = open(a.out, "w")
    out.write("Thread,Time,Action,Pointer,Size,Stream\n")
    for line in rows(a.rows, a.streams, threads, a.seed, a.live_max, a.mu, a.sigma,
                     a.size_max, a.cross):
        out.write(line + "\n")
    if out is not sys.stdout:
        out.close()


if __name__ == "__main__":
    main()
