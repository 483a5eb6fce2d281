#!/usr/bin/env python3
"""Convert a PyTorch CUDA memory snapshot into a dv-replay allocation log.

    snapshot2csv.py SNAPSHOT.pickle [-o OUT.csv[.gz]] [--scale N] [--device D]
                    [--max-rows N] [--free-at requested|completed] [--tag WORD]

The input is the pickled dictionary that ``torch.cuda.memory._snapshot()``
returns (``torch.cuda.memory._dump_snapshot(path)`` writes one), taken while
``torch.cuda.memory._record_memory_history()`` was recording.  Only its
``device_traces`` are read: one list per device, oldest entry first, each
entry a dict with at least ``action``, ``addr``, ``size`` and ``stream``
(also ``time_us`` and ``frames`` in recent versions).

The output is devactor's own allocation log, the CSV that ``dv-replay`` reads:

    Thread,Time,Action,Pointer,Size,Stream,Device,Tag,QueryId

How trace entries become rows:

* ``alloc`` becomes an ``allocate`` row.  Its size is the one the trace
  records (the caller's requested size in PyTorch 2.x; the caching allocator
  rounds the block it hands out, the trace keeps the request).
* The block's ``free`` row is placed where PyTorch recorded
  ``free_requested`` (the default, ``--free-at requested``): the moment the
  program dropped the tensor.  ``free_completed`` comes later when the block
  was used on other streams (``Tensor.record_stream``): PyTorch then waits for
  those streams' events, and only notices they completed when it next polls
  them (on a later allocation), so that position is an artefact of
  PyTorch's allocator rather than the program's behaviour.  An allocator
  under replay that tracks cross-stream use itself wants the caller's
  release, hence the default.  ``--free-at completed`` places the free where
  ``free_completed`` was recorded instead (falling back to
  ``free_requested`` for a block whose completion the trace does not hold),
  which reproduces PyTorch's own lifetimes.  Either way, frees keep the
  trace's order and a block is freed before its address is allocated again.
* ``segment_*``, ``snapshot`` and ``oom`` entries (and anything unknown) are
  ignored: they describe PyTorch's cache, not the program's requests.
* A free of an address the trace never allocated (the trace began late, or
  its ring buffer wrapped) is dropped; a block still live at the end of the
  trace keeps no free row.  An allocation of zero bytes is dropped.
* Stream handles (``cudaStream_t`` values) become 0, 1, 2, ... in order of
  first appearance; a free row carries its block's allocation stream.
  The trace does not record host threads, so every row has Thread 1.
* Time is synthetic: the first entry's ``time_us`` (or a fixed base when the
  trace has none) plus one microsecond per row, so that dv-replay's stable
  sort by time keeps the trace's order exactly.

Output ending in ``.gz`` is gzip-compressed (dv-replay reads such a file
through ``gzip -dc``).  A one-line summary goes to stderr.

Python 3 standard library only; importable (``convert_snapshot``,
``convert_entries``, ``write_csv``, ``peak_live_bytes``) by capture.py.
"""

import argparse
import collections
import dataclasses
import gzip
import io
import os
import pickle
import sys

HEADER = "Thread,Time,Action,Pointer,Size,Stream,Device,Tag,QueryId"

# Used when the trace carries no time_us: 2023-11-14T22:13:20Z, in µs.
DEFAULT_BASE_US = 1_700_000_000 * 1_000_000

# --scale rounds sizes up to this granularity, and never below it.
SCALE_GRANULE = 256

FREE_AT_CHOICES = ("requested", "completed")


@dataclasses.dataclass
class Row:
    """One row of the log, before it is given a time."""

    action: str  # "allocate" or "free"
    ptr: int
    size: int
    stream: int  # small stream id, 0, 1, 2, ... in order of first appearance


@dataclasses.dataclass
class Conversion:
    """The rows of one converted trace and what was counted on the way."""

    rows: list
    device: int
    base_us: int
    allocs: int = 0
    frees: int = 0
    streams: int = 0
    peak_live_bytes: int = 0
    live_at_end: int = 0  # blocks allocated in the rows and never freed there
    dropped_frees: int = 0  # frees of addresses the trace never allocated
    implicit_frees: int = 0  # an address allocated again with no free seen
    zero_allocs: int = 0  # allocations of 0 bytes, dropped
    truncated: bool = False  # --max-rows cut the rows
    entries: int = 0  # trace entries read
    actions: dict = dataclasses.field(default_factory=dict)  # entries per action

    def summary(self):
        """A dict of the counts (the rows themselves left out), for JSON."""
        d = dataclasses.asdict(self)
        del d["rows"]
        d["rows"] = len(self.rows)
        return d


class _DataOnlyUnpickler(pickle.Unpickler):
    """A snapshot is plain dicts, lists, tuples, strings and numbers; refuse
    anything that would import and call code."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(
            f"{module}.{name}: a memory snapshot holds plain data only; refusing to load it"
        )


def load_snapshot(path):
    """Read a pickled snapshot (plain or gzip-compressed)."""
    with open(path, "rb") as f:
        magic = f.read(2)
        f.seek(0)
        stream = gzip.GzipFile(fileobj=f) if magic == b"\x1f\x8b" else f
        return _DataOnlyUnpickler(stream).load()


def select_trace(snapshot, device=None):
    """Return (device index, trace entries) of the snapshot.

    With device None, the only device whose trace is not empty (the first
    such, with a warning, when there are several; device 0 when all are)."""
    if not isinstance(snapshot, dict) or "device_traces" not in snapshot:
        raise ValueError("not a memory snapshot with traces (no 'device_traces'): "
                         "was _record_memory_history() recording?")
    traces = snapshot["device_traces"]
    if not isinstance(traces, list) or not all(isinstance(t, list) for t in traces):
        raise ValueError("'device_traces' is not a list of lists of trace entries, one list a device")
    if device is not None:
        if not 0 <= device < len(traces):
            raise ValueError(f"device {device}: the snapshot has traces for {len(traces)} device(s)")
        return device, traces[device]
    busy = [i for i, t in enumerate(traces) if t]
    if len(busy) > 1:
        print(f"snapshot2csv: traces for devices {busy}; converting device {busy[0]} "
              "(choose with --device)", file=sys.stderr)
    if busy:
        return busy[0], traces[busy[0]]
    return 0, traces[0] if traces else []


def scale_size(size, scale):
    """size / scale, rounded up to SCALE_GRANULE bytes and at least that;
    unchanged when scale is 1."""
    if scale == 1:
        return size
    scaled = -(-size // scale)
    return max(SCALE_GRANULE, -(-scaled // SCALE_GRANULE) * SCALE_GRANULE)


@dataclasses.dataclass
class _Block:
    """An allocation seen in the trace, with the positions of its frees."""

    alloc_at: int
    addr: int
    size: int
    stream: int  # the raw stream handle
    requested_at: int = None  # entry index of free_requested
    completed_at: int = None  # entry index of free_completed
    replaced_at: int = None  # entry index of an allocation reusing addr unfreed


def _free_position(block, free_at):
    """The entry index where the block's free row goes, or None (live)."""
    if free_at == "completed" and block.completed_at is not None:
        return block.completed_at
    if block.requested_at is not None:
        return block.requested_at
    if block.completed_at is not None:  # completed without a request: odd, honour it
        return block.completed_at
    return block.replaced_at


def _check_entry(i, e, action):
    """An entry's fields the log needs: integers (not bools) in range, or
    ValueError naming the entry."""
    fields = ("addr", "size") if action == "alloc" else ("addr",)
    for name in fields:
        v = e.get(name)
        if type(v) is not int or not 0 <= v < 1 << 64:
            raise ValueError(f"trace entry {i} ({action}): {name} {v!r} is not an integer "
                             f"in 0 .. 2^64 - 1")
    stream = e.get("stream", 0)
    if type(stream) is not int or stream < 0:
        raise ValueError(f"trace entry {i} ({action}): stream {stream!r} is not an integer >= 0")


def convert_entries(entries, *, device=0, free_at="requested", scale=1, max_rows=None):
    """Turn a device's trace entries into a Conversion (rows without times)."""
    if free_at not in FREE_AT_CHOICES:
        raise ValueError(f"free_at must be one of {FREE_AT_CHOICES}, not {free_at!r}")
    if scale < 1:
        raise ValueError("scale must be at least 1")
    conv = Conversion(rows=[], device=device, base_us=DEFAULT_BASE_US)
    actions = collections.Counter()
    blocks = []  # every allocation, in trace order
    live = {}  # addr -> _Block not yet free_completed
    orphan_requests = set()  # addrs whose free_requested was already dropped

    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise ValueError(f"trace entry {i}: {type(e).__name__} {e!r:.40}, not a dict")
        action = e.get("action")
        actions[action] += 1
        if action in ("alloc", "free_requested", "free_completed"):
            _check_entry(i, e, action)
        if i == 0 and isinstance(e.get("time_us"), int) and e["time_us"] > 0:
            conv.base_us = e["time_us"]
        if action == "alloc":
            addr, size = e["addr"], e["size"]
            if size <= 0:
                conv.zero_allocs += 1
                continue
            old = live.pop(addr, None)
            if old is not None and old.requested_at is None and old.completed_at is None:
                # The address came back without any free in the trace: end the
                # old block here so that the log stays consistent.
                old.replaced_at = i
                conv.implicit_frees += 1
            block = _Block(alloc_at=i, addr=addr, size=size, stream=e.get("stream", 0))
            blocks.append(block)
            live[addr] = block
        elif action == "free_requested":
            block = live.get(e["addr"])
            if block is None:
                orphan_requests.add(e["addr"])
                conv.dropped_frees += 1
            elif block.requested_at is None:
                block.requested_at = i
        elif action == "free_completed":
            block = live.pop(e["addr"], None)
            if block is None:
                # Count a block's unknown free once, whichever half we saw.
                if e["addr"] in orphan_requests:
                    orphan_requests.discard(e["addr"])
                else:
                    conv.dropped_frees += 1
            else:
                block.completed_at = i
        # segment_alloc/free/map/unmap, snapshot, oom, ...: not the program's.

    conv.entries = len(entries)
    conv.actions = dict(actions)

    # Place every allocate and free at its trace position.  A free sorts
    # before an allocation at the same position (the implicit free above).
    events = []
    for block in blocks:
        events.append((block.alloc_at, 1, "allocate", block))
        at = _free_position(block, free_at)
        if at is not None:
            events.append((at, 0, "free", block))
    events.sort(key=lambda ev: (ev[0], ev[1]))
    if max_rows is not None and len(events) > max_rows:
        # Frees follow their allocations, so a cut never keeps a free whose
        # allocation it dropped.
        events = events[:max_rows]
        conv.truncated = True

    stream_ids = {}
    for _, _, kind, block in events:
        sid = stream_ids.setdefault(block.stream, len(stream_ids))
        conv.rows.append(Row(kind, block.addr, scale_size(block.size, scale), sid))
    conv.streams = len(stream_ids)
    conv.allocs = sum(1 for r in conv.rows if r.action == "allocate")
    conv.frees = len(conv.rows) - conv.allocs
    conv.peak_live_bytes, conv.live_at_end = peak_live_bytes(conv.rows)
    return conv


def peak_live_bytes(rows):
    """(peak of live bytes, blocks live at the end) over rows in order,
    counted as dv-replay counts its trace peak: a free ends the block at its
    pointer; an allocation of a pointer still live replaces that block."""
    live = {}
    total = peak = 0
    for r in rows:
        if r.action == "allocate":
            total -= live.get(r.ptr, 0)
            live[r.ptr] = r.size
            total += r.size
            peak = max(peak, total)
        elif r.ptr in live:
            total -= live.pop(r.ptr)
    return peak, len(live)


def _format_time(us):
    return f"{us // 1_000_000}.{us % 1_000_000:06d}"


def check_tag(tag):
    """A tag must be one short CSV field that needs no quoting."""
    if not tag or any(c in tag for c in ',"\r\n'):
        raise ValueError(f"tag {tag!r}: give a non-empty word without commas, quotes or line breaks")
    return tag


def write_csv(conv, out, *, tag="torch", thread=1):
    """Write the conversion's rows as CSV text to the file object out."""
    check_tag(tag)
    out.write(HEADER + "\n")
    for n, r in enumerate(conv.rows):
        out.write(f"{thread},{_format_time(conv.base_us + n)},{r.action},{r.ptr:#x},"
                  f"{r.size},{r.stream},{conv.device},{tag},0\n")


def open_output(path):
    """A text file to write: stdout for None or '-', gzip for '*.gz'
    (with no timestamp in its header, so that equal traces give equal files)."""
    if path is None or path == "-":
        return _NoClose(sys.stdout)
    if path.endswith(".gz"):
        raw = open(path, "wb")
        gz = gzip.GzipFile(filename=os.path.basename(path[:-3]), mode="wb", fileobj=raw, mtime=0)
        return _Closing(io.TextIOWrapper(gz, encoding="ascii", newline="\n"), raw)
    return open(path, "w", encoding="ascii", newline="\n")


class _NoClose:
    """A context manager around a stream that must stay open."""

    def __init__(self, f):
        self.f = f

    def __enter__(self):
        return self.f

    def __exit__(self, *exc):
        self.f.flush()


class _Closing:
    """A context manager that closes a text wrapper and then its raw file."""

    def __init__(self, f, raw):
        self.f, self.raw = f, raw

    def __enter__(self):
        return self.f

    def __exit__(self, *exc):
        self.f.close()
        self.raw.close()


def convert_snapshot(snapshot, out_path, *, device=None, free_at="requested", scale=1,
                     max_rows=None, tag="torch"):
    """Convert a snapshot dict and write the log to out_path (None: stdout).
    Returns the Conversion (its rows included)."""
    check_tag(tag)
    dev, entries = select_trace(snapshot, device)
    conv = convert_entries(entries, device=dev, free_at=free_at, scale=scale, max_rows=max_rows)
    with open_output(out_path) as out:
        write_csv(conv, out, tag=tag)
    return conv


def _human(n):
    """Bytes as a short human-readable figure (binary units)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def summary_line(conv):
    """The one-line summary of a conversion (printed to stderr)."""
    line = (f"device {conv.device}: {len(conv.rows)} rows, {conv.allocs} allocs, "
            f"{conv.frees} frees, peak live {conv.peak_live_bytes} bytes "
            f"({_human(conv.peak_live_bytes)}), {conv.streams} streams")
    extras = []
    if conv.live_at_end:
        extras.append(f"{conv.live_at_end} live at end")
    if conv.dropped_frees:
        extras.append(f"{conv.dropped_frees} frees of unknown blocks dropped")
    if conv.implicit_frees:
        extras.append(f"{conv.implicit_frees} addresses reused without a free")
    if conv.zero_allocs:
        extras.append(f"{conv.zero_allocs} zero-byte allocs dropped")
    if conv.truncated:
        extras.append("cut by --max-rows")
    return line + ("; " + ", ".join(extras) if extras else "")


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be at least 1")
    return value


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Convert a PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot) "
                    "into devactor's allocation log CSV for dv-replay.")
    parser.add_argument("snapshot", help="pickled snapshot (.pickle, optionally gzip-compressed)")
    parser.add_argument("-o", "--output", metavar="OUT.csv[.gz]",
                        help="output file; gzip-compressed if it ends in .gz (default: stdout)")
    parser.add_argument("--scale", type=_positive_int, default=1, metavar="N",
                        help=f"divide every size by N, rounded up to {SCALE_GRANULE} bytes "
                             f"and at least that (default 1: sizes unchanged)")
    parser.add_argument("--device", type=int, metavar="D",
                        help="which device's trace (default: the one that is not empty)")
    parser.add_argument("--max-rows", type=_positive_int, metavar="N",
                        help="keep only the first N rows")
    parser.add_argument("--free-at", choices=FREE_AT_CHOICES, default="requested",
                        help="place a free where PyTorch recorded free_requested (the program "
                             "dropped the block; default) or free_completed (PyTorch could "
                             "reuse it)")
    parser.add_argument("--tag", default="torch", help="the Tag column (default: torch)")
    args = parser.parse_args(argv)
    try:
        snapshot = load_snapshot(args.snapshot)
        conv = convert_snapshot(snapshot, args.output, device=args.device, free_at=args.free_at,
                                scale=args.scale, max_rows=args.max_rows, tag=args.tag)
    except BrokenPipeError:
        # The reader went away (| head): say nothing more, write nothing more.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (OSError, ValueError, KeyError, pickle.UnpicklingError, EOFError) as e:
        print(f"snapshot2csv: {args.snapshot}: {e}", file=sys.stderr)
        return 1
    print(f"snapshot2csv: {summary_line(conv)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
