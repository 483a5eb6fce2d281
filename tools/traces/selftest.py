#!/usr/bin/env python3
"""Self-test of snapshot2csv.py on a synthetic snapshot (standard library only).

    selftest.py [--dv-replay PATH]

Builds a snapshot dict shaped like torch.cuda.memory._snapshot()'s (device
traces with alloc, free_requested, free_completed, segment and oom entries,
two streams, frees of unknown addresses, a block live at the end, a
record_stream-style free completed only after the address was reused) and
checks the rows, the peak, the scaling and the files written.  With
--dv-replay, also replays the converted log (DV_BACKEND=sim) and checks that
dv-replay reads the same counts and peak.  Prints TAP; exits 1 on a failure.
"""

import argparse
import gzip
import os
import pickle
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # leave no __pycache__ next to the tools
sys.path.insert(0, HERE)
import snapshot2csv as s2c  # noqa: E402  (the module under test, next to this file)

S0 = 0  # the default (legacy NULL) stream
S1 = 0x55D0C0FFEE00  # a side stream's cudaStream_t
BASE = 0x7F0000000000
UNKNOWN = 0x7E0000000000
T0 = 1_764_170_000_000_000  # time_us of the first entry


def entry(action, addr, size, stream=S0, n=0):
    """A trace entry as PyTorch 2.x records it (frames empty: no context)."""
    return {"action": action, "addr": addr, "size": size, "stream": stream,
            "time_us": T0 + 10 * n, "frames": []}


def synthetic_snapshot():
    """Trace of device 1 (device 0's is empty), as comments explain.

    Blocks: A 1000 B (s0), B 3000 B (s1, freed with a pending record_stream
    use, completed only after A's address was reused by D), C 5000 B (s0,
    live at the end), D 2000 B (s0, at A's address), E 100 B (s1, requested
    but never completed in the trace)."""
    A, B, C, E = BASE, BASE + 0x400, BASE + 0x1000, BASE + 0x2000
    raw = [
        ("segment_alloc", BASE, 2 << 20, S0),
        ("alloc", A, 1000, S0),
        ("alloc", B, 3000, S1),
        ("free_requested", UNKNOWN, 512, S0),  # allocated before the trace began
        ("free_completed", UNKNOWN, 512, S0),  # ... its completion: not counted twice
        ("alloc", C, 5000, S0),
        ("free_requested", A, 1000, S0),
        ("free_completed", A, 1000, S0),
        ("free_requested", B, 3000, S1),  # still in use on another stream
        ("alloc", A, 2000, S0),  # D, reusing A's address
        ("free_completed", B, 3000, S1),  # B's events completed, noticed late
        ("snapshot", 0, 0, S0),
        ("free_requested", A, 2000, S0),
        ("free_completed", A, 2000, S0),
        ("free_completed", UNKNOWN + 0x1000, 512, S0),  # only the completion seen
        ("alloc", E, 100, S1),
        ("free_requested", E, 100, S1),
        ("segment_free", BASE + (4 << 20), 2 << 20, S0),
        ("segment_map", BASE + (8 << 20), 2 << 20, S0),
    ]
    trace = [entry(a, addr, size, stream, n) for n, (a, addr, size, stream) in enumerate(raw)]
    trace.append({"action": "oom", "device_free": 1 << 20, "size": 1 << 40, "stream": S0,
                  "time_us": T0 + 999, "frames": []})
    return {
        "segments": [{"device": 1, "address": BASE, "total_size": 2 << 20, "stream": S0,
                      "segment_type": "large", "allocated_size": 5000, "active_size": 5000,
                      "blocks": []}],
        "device_traces": [[], trace],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": ""},
    }


class Tap:
    """Collects checks and prints them as TAP."""

    def __init__(self):
        self.results = []

    def check(self, desc, ok, detail=None):
        self.results.append((desc, bool(ok), detail))

    def report(self):
        print(f"1..{len(self.results)}")
        for n, (desc, ok, detail) in enumerate(self.results, 1):
            print(f"{'ok' if ok else 'not ok'} {n} - {desc}")
            if not ok and detail is not None:
                print(f"# {detail}")
        return all(ok for _, ok, _ in self.results)


def rows_as_tuples(conv):
    return [(r.action, r.ptr, r.size, r.stream) for r in conv.rows]


def test_requested(tap, snap):
    dev, entries = s2c.select_trace(snap)
    tap.check("the non-empty trace (device 1) is chosen", dev == 1, dev)
    conv = s2c.convert_entries(entries, device=dev)
    A, B, C, E = BASE, BASE + 0x400, BASE + 0x1000, BASE + 0x2000
    want = [("allocate", A, 1000, 0), ("allocate", B, 3000, 1), ("allocate", C, 5000, 0),
            ("free", A, 1000, 0), ("free", B, 3000, 1), ("allocate", A, 2000, 0),
            ("free", A, 2000, 0), ("allocate", E, 100, 1), ("free", E, 100, 1)]
    got = rows_as_tuples(conv)
    tap.check("free_requested order: rows as expected", got == want, got)
    tap.check("5 allocs, 4 frees, 2 streams",
              (conv.allocs, conv.frees, conv.streams) == (5, 4, 2),
              (conv.allocs, conv.frees, conv.streams))
    tap.check("peak live 9000 bytes", conv.peak_live_bytes == 9000, conv.peak_live_bytes)
    tap.check("C live at the end", conv.live_at_end == 1, conv.live_at_end)
    tap.check("2 frees of unknown blocks dropped", conv.dropped_frees == 2, conv.dropped_frees)
    tap.check("segment, snapshot and oom entries ignored; all entries counted",
              conv.entries == 20 and conv.actions.get("oom") == 1
              and conv.actions.get("segment_alloc") == 1, conv.actions)
    tap.check("time base from the first entry's time_us", conv.base_us == T0, conv.base_us)


def test_completed(tap, snap):
    _, entries = s2c.select_trace(snap, 1)
    conv = s2c.convert_entries(entries, device=1, free_at="completed")
    A, B = BASE, BASE + 0x400
    got = rows_as_tuples(conv)
    tap.check("free_completed order: B's free follows D's allocation",
              got[3:6] == [("free", A, 1000, 0), ("allocate", A, 2000, 0), ("free", B, 3000, 1)],
              got)
    tap.check("free_completed order: E (never completed) freed at its request",
              got[-1] == ("free", BASE + 0x2000, 100, 1), got[-1])
    tap.check("free_completed order: peak 10000", conv.peak_live_bytes == 10000,
              conv.peak_live_bytes)


def test_scale_and_cut(tap, snap):
    _, entries = s2c.select_trace(snap)
    conv = s2c.convert_entries(entries, device=1, scale=4)
    sizes = [r.size for r in conv.rows if r.action == "allocate"]
    tap.check("--scale 4 rounds up to 256 B, at least 256", sizes == [256, 768, 1280, 512, 256],
              sizes)
    tap.check("--scale 4 peak 2304", conv.peak_live_bytes == 2304, conv.peak_live_bytes)
    tap.check("a free keeps its allocation's scaled size",
              all(r.size % 256 == 0 for r in conv.rows))
    tap.check("scale_size of big sizes", s2c.scale_size(10 << 20, 1024) == 10 << 10
              and s2c.scale_size(1, 1) == 1 and s2c.scale_size(257, 1) == 257)
    cut = s2c.convert_entries(entries, device=1, max_rows=4)
    tap.check("--max-rows 4 keeps the first 4 rows (3 allocs, 1 free)",
              (len(cut.rows), cut.allocs, cut.frees, cut.truncated) == (4, 3, 1, True),
              (len(cut.rows), cut.allocs, cut.frees, cut.truncated))
    tap.check("--max-rows 4: peak 9000, 2 live at the end",
              (cut.peak_live_bytes, cut.live_at_end) == (9000, 2),
              (cut.peak_live_bytes, cut.live_at_end))


def test_odd_traces(tap):
    X = BASE + 0x10000
    entries = [entry("alloc", X, 100), entry("alloc", X, 200), entry("alloc", X + 512, 0)]
    conv = s2c.convert_entries(entries)
    got = rows_as_tuples(conv)
    tap.check("an address allocated again without a free: the old block is freed first",
              got == [("allocate", X, 100, 0), ("free", X, 100, 0), ("allocate", X, 200, 0)]
              and conv.implicit_frees == 1, got)
    tap.check("a zero-byte allocation is dropped", conv.zero_allocs == 1 and conv.peak_live_bytes == 200,
              (conv.zero_allocs, conv.peak_live_bytes))
    empty = s2c.convert_entries([])
    tap.check("an empty trace converts to no rows", empty.rows == [] and empty.peak_live_bytes == 0)
    try:
        s2c.select_trace({"segments": []})
        tap.check("a snapshot without device_traces is refused", False)
    except ValueError:
        tap.check("a snapshot without device_traces is refused", True)
    for desc, bad in (("device_traces not a list", {"device_traces": {0: []}}),
                      ("a device's trace not a list", {"device_traces": [None]})):
        try:
            s2c.select_trace(bad)
            tap.check(f"{desc}: refused", False)
        except ValueError:
            tap.check(f"{desc}: refused", True)
    try:
        s2c.convert_entries([entry("alloc", X, 100), "junk"])
        tap.check("an entry that is no dict is refused", False)
    except ValueError as e:
        tap.check("an entry that is no dict is refused, named", "entry 1" in str(e), str(e))


def read_csv(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        return f.read().splitlines()


def test_files(tap, snap, tmp, dv_replay):
    pkl = os.path.join(tmp, "trace.pickle")
    with open(pkl, "wb") as f:
        pickle.dump(snap, f)
    out = os.path.join(tmp, "trace.csv.gz")
    proc = subprocess.run([sys.executable, os.path.join(HERE, "snapshot2csv.py"), pkl, "-o", out,
                           "--tag", "unit"], capture_output=True, text=True)
    tap.check("the command line converts (exit 0)", proc.returncode == 0, proc.stderr)
    tap.check("its summary names rows, allocs, frees, peak, streams",
              re.search(r"9 rows, 5 allocs, 4 frees, peak live 9000 bytes .*2 streams", proc.stderr),
              proc.stderr.strip())
    lines = read_csv(out) if os.path.exists(out) else []
    tap.check("the .gz output starts with dv-replay's header",
              lines[:1] == [s2c.HEADER], lines[:1])
    tap.check("the header and 9 rows", len(lines) == 10, len(lines))
    rows = [line.split(",") for line in lines[1:]]
    row_re = re.compile(r"^1,\d{10}\.\d{6},(allocate|free),0x[0-9a-f]+,\d+,\d+,1,unit,0$")
    tap.check("every row is Thread 1, Device 1, tag unit, QueryId 0, in the right form",
              rows and all(row_re.match(line) for line in lines[1:]),
              [line for line in lines[1:] if not row_re.match(line)][:2])
    times = [int(r[1].replace(".", "")) for r in rows]
    tap.check("times increase by one microsecond per row from the trace's start",
              times == list(range(T0, T0 + len(rows))), times[:3])
    tap.check("the first row", lines[1:2] == [f"1,1764170000.000000,allocate,{BASE:#x},1000,0,1,unit,0"],
              lines[1:2])

    plain = os.path.join(tmp, "trace.csv")
    conv = s2c.convert_snapshot(snap, plain, scale=4, tag="unit")
    tap.check("convert_snapshot writes plain text and returns the counts",
              read_csv(plain)[0] == s2c.HEADER and conv.summary()["rows"] == 9
              and conv.summary()["peak_live_bytes"] == 2304, conv.summary())

    evil = os.path.join(tmp, "evil.pickle")
    with open(evil, "wb") as f:
        pickle.dump({"device_traces": [[]], "x": os.path.join}, f)  # a global reference
    proc = subprocess.run([sys.executable, os.path.join(HERE, "snapshot2csv.py"), evil],
                          capture_output=True, text=True)
    tap.check("a pickle referring to code is refused (exit 1)",
              proc.returncode == 1 and "plain data only" in proc.stderr, proc.stderr.strip())
    bad = os.path.join(tmp, "bad.pickle")
    bad_out = os.path.join(tmp, "bad.csv")
    with open(bad, "wb") as f:  # a size that is a bool: no log, not one dv-replay refuses
        pickle.dump({"device_traces": [[{"action": "alloc", "addr": 4096, "size": True,
                                         "stream": 0}]]}, f)
    proc = subprocess.run([sys.executable, os.path.join(HERE, "snapshot2csv.py"), bad, "-o",
                           bad_out], capture_output=True, text=True)
    tap.check("an entry whose size is not an integer is refused (exit 1), no output written",
              proc.returncode == 1 and "trace entry 0" in proc.stderr
              and not os.path.exists(bad_out), proc.stderr.strip())
    try:
        s2c.check_tag("a,b")
        tap.check("a tag with a comma is refused", False)
    except ValueError:
        tap.check("a tag with a comma is refused", True)

    if dv_replay:
        env = dict(os.environ, DV_BACKEND="sim")
        proc = subprocess.run([dv_replay, "--csv", plain], capture_output=True, text=True, env=env)
        fields = proc.stdout.strip().splitlines()[-1].split(",") if proc.stdout.strip() else []
        tap.check(f"dv-replay replays the log (exit {proc.returncode})", proc.returncode == 0,
                  proc.stderr.strip())
        # dv-replay --csv: rows,allocs,frees,failures,peak_live,...
        tap.check("dv-replay reads 9 rows, 5 allocs, 4 frees, peak 2304",
                  fields[:3] == ["9", "5", "4"] and fields[4:5] == ["2304"], fields)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dv-replay", metavar="PATH", help="also replay through this dv-replay")
    args = parser.parse_args()
    tap = Tap()
    snap = synthetic_snapshot()
    with tempfile.TemporaryDirectory() as tmp:
        for name, test in (("requested", lambda: test_requested(tap, snap)),
                           ("completed", lambda: test_completed(tap, snap)),
                           ("scale", lambda: test_scale_and_cut(tap, snap)),
                           ("odd", lambda: test_odd_traces(tap)),
                           ("files", lambda: test_files(tap, snap, tmp, args.dv_replay))):
            try:
                test()
            except Exception as e:  # a crash is a failure, the other groups still run
                tap.check(f"{name} tests ran without an exception", False, repr(e))
    return 0 if tap.report() else 1


if __name__ == "__main__":
    sys.exit(main())
