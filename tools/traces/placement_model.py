#!/usr/bin/env python3
"""A model of placement over repeated passes of an allocation trace.

Not the pool: a question asked of the traces.  Each trace is replayed
PASSES times (everything still live is freed between passes, as a
training loop's steps do), sizes rounded to 512 bytes, one stream.

bestfit   Best fit over one address range that grows only at its top,
          nothing ever moved: reserved is the top, in 2 MiB granules.
alias     Addresses placed by the same best fit over address space that
          is never short (reserved once, much larger than the device),
          and physical 2 MiB granules bound to address granules only
          while some block lies in them.  A binding is kept when the
          block goes: the granule's physical memory may later serve
          another address (an alias), and the old address takes it back
          with no driver call when it is free again.  A binding is made
          (create or map, then set access) only where an address's own
          granule is in use elsewhere, or it never had one.  The choice
          of a free granule is conflict-aware: each address granule
          learns which others were ever live with it, and a granule
          whose other aliases never were is preferred (oldest free
          first); a new granule is made instead, while fewer than
          SLACK x the most ever live at once exist, when every free one
          conflicts.

Prints, per trace and pass: physical (or reserved) over the trace's peak
live bytes, and the driver bindings of that pass.  Standard library only.

handles   As alias, but a run of unbound granules in one allocation binds
          one handle of that many granules (at most --cap): fewer driver
          mappings, coarser aliases.

    placement_model.py [--passes N] [--slack X] [--cap N]
                       [--policy bestfit|alias|handles] TRACE.csv.gz ...
"""
import argparse
import bisect
import gzip
import sys

G = 2 << 20


def load(path):
    """(is_alloc, pointer, size) rows of a devactor or RMM CSV log."""
    rows = []
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        head = next(f).strip().split(",")
        ia, ip, iz = head.index("Action"), head.index("Pointer"), head.index("Size")
        for line in f:
            p = line.rstrip("\n").split(",")
            act = p[ia]
            if act == "allocate":
                rows.append((True, int(p[ip], 16), int(p[iz])))
            elif act in ("free", "deallocate"):
                rows.append((False, int(p[ip], 16), int(p[iz])))
    return rows


def peak_live(rows):
    live, cur, peak = {}, 0, 0
    for a, ptr, size in rows:
        if a:
            if ptr in live:
                cur -= live.pop(ptr)
            live[ptr] = size
            cur += size
            peak = max(peak, cur)
        elif ptr in live:
            cur -= live.pop(ptr)
    return peak


class BestFit:
    """Free ranges by address and by (size, address); growth at the top."""

    def __init__(self):
        self.by_addr = {}
        self.addrs = []
        self.by_size = []
        self.top = 0

    def _add(self, a, n):
        self.by_addr[a] = n
        bisect.insort(self.addrs, a)
        bisect.insort(self.by_size, (n, a))

    def _rm(self, a):
        n = self.by_addr.pop(a)
        del self.addrs[bisect.bisect_left(self.addrs, a)]
        del self.by_size[bisect.bisect_left(self.by_size, (n, a))]
        return n

    def alloc(self, n):
        i = bisect.bisect_left(self.by_size, (n, -1))
        if i < len(self.by_size):
            fn, a = self.by_size[i]
            self._rm(a)
            if fn > n:
                self._add(a + n, fn - n)
            return a
        a = self.top
        if self.addrs:
            la = self.addrs[-1]
            if la + self.by_addr[la] == self.top:
                a = la
                self._rm(la)
        self.top = a + n
        return a

    def free(self, a, n):
        i = bisect.bisect_left(self.addrs, a)
        if i < len(self.addrs) and a + n == self.addrs[i]:
            n += self._rm(self.addrs[i])
        if i > 0:
            pa = self.addrs[i - 1]
            if pa + self.by_addr[pa] == a:
                n += self._rm(pa)
                a = pa
        if a + n == self.top:
            self.top = a
        else:
            self._add(a, n)


class Aliased:
    def __init__(self, slack):
        self.slack = slack
        self.va = BestFit()
        self.bytes_in = {}   # address granule -> live bytes in it
        self.bound = {}      # address granule -> physical granule
        self.owner = {}      # physical granule -> address granule using it
        self.free_at = {}    # free physical granule -> when it was freed
        self.aliases = {}    # physical granule -> bitset of address granules
        self.seen = {}       # address granule -> bitset of those ever live with it
        self.live_bits = 0
        self.nphys = self.nlive = self.peak_live = 0
        self.binds = self.t = 0

    def _conflicts(self, v, q):
        """Aliases of q ever live together with v."""
        mine = self.seen.get(v, 0)
        n = 0
        bits = self.aliases[q] & ~(1 << v)
        while bits:
            w = (bits & -bits).bit_length() - 1
            bits &= bits - 1
            if (mine >> w) & 1 or (self.seen.get(w, 0) >> v) & 1:
                n += 1
        return n

    def _bind(self, v):
        self.live_bits |= 1 << v
        self.seen[v] = self.seen.get(v, 0) | self.live_bits
        p = self.bound.get(v)
        if p is not None and p in self.free_at:
            del self.free_at[p]
            self.owner[p] = v
            return
        best = None
        for q, when in self.free_at.items():
            key = (self._conflicts(v, q), when)
            if best is None or key < best[0]:
                best = (key, q)
        if best is None or (best[0][0] > 0 and self.nphys < self.slack * self.peak_live):
            q = self.nphys
            self.nphys += 1
            self.aliases[q] = 0
        else:
            q = best[1]
            del self.free_at[q]
        if p is not None:
            self.aliases[p] &= ~(1 << v)
        self.bound[v] = q
        self.aliases[q] |= 1 << v
        self.owner[q] = v
        self.binds += 1

    def _touch(self, a, n):
        """Count [a, a + n) in its granules; those that became live."""
        new = []
        for v in range(a // G, (a + n - 1) // G + 1):
            part = min(a + n, (v + 1) * G) - max(a, v * G)
            if v in self.bytes_in:
                self.bytes_in[v] += part
                continue
            self.bytes_in[v] = part
            self.nlive += 1
            new.append(v)
        self.peak_live = max(self.peak_live, self.nlive)
        return new

    def alloc(self, n):
        a = self.va.alloc(n)
        self.t += 1
        for v in self._touch(a, n):
            self._bind(v)
        return a

    def _idle(self, v):
        """Address granule v holds nothing now: its physical granule is free."""
        p = self.bound[v]
        del self.owner[p]
        self.free_at[p] = self.t

    def free(self, a, n):
        self.t += 1
        for v in range(a // G, (a + n - 1) // G + 1):
            self.bytes_in[v] -= min(a + n, (v + 1) * G) - max(a, v * G)
            if self.bytes_in[v] == 0:
                del self.bytes_in[v]
                self.nlive -= 1
                self.live_bits &= ~(1 << v)
                self._idle(v)
        self.va.free(a, n)


class Handles(Aliased):
    """Aliased, but a run of unbound granules in one allocation binds one
    handle of that many granules (at most CAP): fewer, larger driver
    mappings.  A handle's mappings are its aliases; one wanted while its
    handle serves another is unmapped whole.  Where no free handle of the
    run's size is free of conflicts and the slack is spent, the run is
    made of smaller free handles, largest first."""

    def __init__(self, slack, cap):
        super().__init__(slack)
        self.cap = cap
        self.size = []       # handle -> granules
        self.maps = []       # handle -> first granules of its mappings
        self.serving = []    # handle -> the mapping in use, or None
        self.where = {}      # address granule -> (handle, first granule)
        self.calls = {"create": 0, "map": 0, "unmap": 0}

    def _conflicts_run(self, run, q):
        n = 0
        for m in self.maps[q]:
            for w in range(m, m + self.size[q]):
                for v in run:
                    if w != v and ((self.seen.get(v, 0) >> w) & 1 or (self.seen.get(w, 0) >> v) & 1):
                        n += 1
        return n

    def _new(self, k):
        self.size.append(k)
        self.maps.append([])
        self.serving.append(None)
        self.nphys += k
        self.calls["create"] += 1
        return len(self.size) - 1

    def _map(self, q, piece):
        self.maps[q].append(piece[0])
        self.serving[q] = piece[0]
        for v in piece:
            self.where[v] = (q, piece[0])
        self.calls["map"] += 1
        self.binds += 1

    def _take(self, q):
        del self.free_at[q]
        return q

    def _bind_run(self, run):
        k = len(run)
        same = sorted((self._conflicts_run(run, q), t, q)
                      for q, t in self.free_at.items() if self.size[q] == k)
        if same and same[0][0] == 0:
            return self._map(self._take(same[0][2]), run)
        if self.nphys + k <= self.slack * self.peak_live:
            return self._map(self._new(k), run)
        if same:
            return self._map(self._take(same[0][2]), run)
        i = 0
        while i < k:
            fits = sorted((-self.size[q], self._conflicts_run(run[i:i + self.size[q]], q), t, q)
                          for q, t in self.free_at.items() if self.size[q] <= k - i)
            if not fits:
                return self._map(self._new(k - i), run[i:])
            q = self._take(fits[0][3])
            self._map(q, run[i:i + self.size[q]])
            i += self.size[q]

    def alloc(self, n):
        a = self.va.alloc(n)
        new = self._touch(a, n)
        for v in new:
            self.live_bits |= 1 << v
        for v in new:
            self.seen[v] = self.seen.get(v, 0) | self.live_bits
        unbound = set()
        for v in new:
            if v not in self.where:
                unbound.add(v)
                continue
            q, first = self.where[v]
            if self.serving[q] == first:
                continue
            if self.serving[q] is None:
                self.serving[q] = first
                del self.free_at[q]
                continue
            self.maps[q].remove(first)       # serving elsewhere: unmap this alias
            self.calls["unmap"] += 1
            for w in range(first, first + self.size[q]):
                del self.where[w]
                if w in self.bytes_in:
                    unbound.add(w)
        run = []
        for v in sorted(unbound):
            if run and (v != run[-1] + 1 or len(run) == self.cap):
                self._bind_run(run)
                run = []
            run.append(v)
        if run:
            self._bind_run(run)
        return a

    def _idle(self, v):
        q, first = self.where[v]
        if self.serving[q] == first and not any(
                w in self.bytes_in for w in range(first, first + self.size[q])):
            self.serving[q] = None
            self.free_at[q] = self.t


def replay(rows, passes, policy, slack, cap):
    heap = (Handles(slack, cap) if policy == "handles" else
            Aliased(slack) if policy == "alias" else BestFit())
    peak_reserved = 0
    for i in range(passes):
        live = {}
        b0 = getattr(heap, "binds", 0)
        for is_alloc, ptr, size in rows:
            n = -(-max(size, 1) // 512) * 512
            if ptr in live:
                heap.free(*live.pop(ptr))
            if is_alloc:
                live[ptr] = (heap.alloc(n), n)
                if policy == "bestfit":
                    peak_reserved = max(peak_reserved, -(-heap.top // G) * G)
        for blk in live.values():
            heap.free(*blk)
        if policy != "bestfit":
            yield i + 1, heap.nphys * G, heap.binds - b0
        else:
            yield i + 1, peak_reserved, 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--slack", type=float, default=1.08)
    ap.add_argument("--policy", choices=("bestfit", "alias", "handles"), default="alias")
    ap.add_argument("--cap", type=int, default=32, help="handles: granules at most per handle")
    ap.add_argument("traces", nargs="+")
    o = ap.parse_args()
    if o.passes < 1 or not o.slack >= 1.0 or o.cap < 1:
        ap.error("--passes and --cap at least 1, --slack at least 1")
    print("trace,policy,slack,pass,held_over_live,bindings")
    for path in o.traces:
        rows = load(path)
        live = peak_live(rows)
        name = path.rsplit("/", 1)[-1].split(".")[0]
        for i, held, binds in replay(rows, o.passes, o.policy, o.slack, o.cap):
            print(f"{name},{o.policy},{o.slack:g},{i},{held / live:.3f},{binds}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
