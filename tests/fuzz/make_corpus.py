#!/usr/bin/env python3
"""Write dv-fuzz's seed corpus (tests/fuzz/corpus/), one small input per
feature of the harness, in the byte format api_fuzz.c decodes:

    config c0 c1, then per operation an opcode byte and its operands.

Each seed is a short, correct program (or one planted misuse) so that the
fuzzer starts from every area at once instead of finding its way there.
The byte layout mirrors api_fuzz.c (LLVMFuzzerTestOneInput and the op_*
decoders); if that changes, regenerate with

    python3 tests/fuzz/make_corpus.py

The files are named after what they exercise, so a failure on one of them
reads as a regression of that feature.
"""
import os
import struct
import sys

# Opcodes, in the order of api_fuzz.c's enum (OP__COUNT = 24).
(ALLOC, ALLOC_ASYNC, RELEASE, RETAIN, ACCESS, HTOD, DTOH, MEMSET, DTOD, SYNC, FLUSH, WAIT,
 EVENT, TASK, LAUNCH, STALE, BAD, WORKER, JOIN, STATS, RESET, RECREATE, PEER, FAULT) = range(24)

# Allocation sizes by selector (pick_size's table).
SIZE = {0: 0, 1: 1, 3: 2, 8: 3, 255: 4, 256: 5, 4096: 6, 4097: 7, 65536: 8, 256 << 10: 10,
        (1 << 20) + 1: 11, 16 << 20: 12, 1 << 30: 14, 1 << 48: 19, 2**64 - 1: 21}

# Actor configuration bytes (decode_config).
def config(streams=4, pool=True, guard=False, budget=False, check=False, sync=False,
           queue=0, shared=False, delay=False, direct=False, devices=1):
    c0 = (streams - 1) | (0 if pool else 8) | (16 if guard else 0) | (32 if budget else 0)
    c0 |= (64 if check else 0) | (128 if sync else 0)
    c1 = queue | (8 if shared else 0) | (16 if delay else 0) | (0x60 if direct else 0)
    c1 |= 0x80 if devices == 2 else 0
    if direct:
        c0 |= 0x18  # direct_alloc needs pool off and guard on in the decoder
    return bytes([c0, c1])

def flags(peer=False, async_=False, try_=False, extra=0):
    return (1 if peer else 0) | (2 if async_ else 0) | (4 if try_ else 0) | extra

def size_sel(size):
    if size in SIZE:
        return bytes([SIZE[size]])
    assert 1 <= size <= 8192
    return bytes([0x30]) + struct.pack("<H", size - 1)  # 1 + u16 % 8192

def alloc(size=4096, stream=0, tag=0, async_=False, try_=False, peer=False):
    op = ALLOC_ASYNC if async_ else ALLOC
    return bytes([op, flags(peer, async_, try_)]) + size_sel(size) + bytes([stream, tag])

def buf(i):
    return i  # a live buffer, searched from slot i

STALE_H = 0xd0  # the newest stale handle
NULL_H = 0xfc

def random_h(bits):
    return bytes([0xf0]) + struct.pack("<Q", bits)

def h(x):
    return x if isinstance(x, bytes) else bytes([x])

# Offsets and lengths: 0x00 is "0" / "the rest of the block", 0xa0 "half",
# 0xc0 "the last byte" / "half the rest", 0xe0+k the odd values.
OFF0, OFF_HALF, OFF_LAST, OFF_END, OFF_PAST, OFF_HUGE = 0x00, 0xa0, 0xc0, 0xe0, 0xe2, 0xe3
LEN_REST, LEN_ONE, LEN_HALF, LEN_ZERO, LEN_OVER, LEN_HUGE = 0x00, 0xa0, 0xc0, 0xe0, 0xe1, 0xe3

def host(op, b, off=OFF0, length=LEN_REST, stream=0, value=7, async_=False, try_=False,
         peer=False, extra=0):
    return bytes([op, flags(peer, async_, try_, extra)]) + h(b) + bytes([off, length, stream, value])

def off_at(n):
    """An offset of exactly n (< the block's size): selector 0x40 and a u16."""
    return bytes([0x40]) + struct.pack("<H", n)

def dtod(d, s, doff=OFF0, soff=OFF0, length=LEN_REST, stream=0, async_=False, peer=False):
    return (bytes([DTOD, flags(peer, async_)]) + h(d) + h(s) + h(doff) + h(soff)
            + bytes([length, stream]))

def sync(stream=0, async_=False, peer=False):
    return bytes([SYNC, flags(peer, async_), stream])

def flush(peer=False):
    return bytes([FLUSH, flags(peer)])

def wait(sel=0, mode=0):
    return bytes([WAIT, sel, mode])

def release(b):
    return bytes([RELEASE, b])

def retain(b):
    return bytes([RETAIN, b])

def access(b, try_=False):
    return bytes([ACCESS, 1 if try_ else 0, b])

def ev_create(timing=False, peer=False, bad=False):
    f = flags(peer) | (6 if bad else (2 if timing else 0))
    return bytes([EVENT, 0, f])

def ev_record(e=0, stream=0, async_=False):
    return bytes([EVENT, 1, 8 if async_ else 0, e, stream])

def ev_wait(e=0, stream=1, peer=False):
    return bytes([EVENT, 3, flags(peer), e, stream])

def ev_sync(e=0):
    return bytes([EVENT, 4, 0, e])

def ev_query(e=0):
    return bytes([EVENT, 5, 0, e])

def ev_elapsed(a=0, b=1):
    return bytes([EVENT, 6, 0, a, b])

def ev_destroy(e=0, then_use=None):
    f = 0 if then_use is None else 0x40 | (then_use << 4)
    return bytes([EVENT, 7, f, e])

T_HOST_WRITE, T_HOST_CHECK, T_LAUNCH, T_POST, T_BAD_CALLS, T_CHECK_CTX = 1, 2, 4, 8, 16, 32
T_SCRATCH, T_CLEANUP, T_DEADLK = 64, 128, 256

def task(b, behaviour=0, ret=0, stream=0, values=0, async_=False, seed=0x1234):
    beh = (behaviour & 0x3f) | (values << 6)
    beh2 = behaviour >> 6
    return (bytes([TASK, flags(False, async_), beh, beh2, ret]) + h(b) + bytes([stream]) +
            struct.pack("<I", seed))

K_FILL, K_COPY, K_ADD, K_CHECKSUM, K_POKE, K_SPIN, K_EMPTY, K_STORE, K_TOUCH8, K_MINE = range(10)

def launch(kernel, operands, variant=0, stream=0, async_=False, value=0x01020304, g=0x05):
    return (bytes([LAUNCH, flags(False, async_), kernel, variant, g, stream]) +
            struct.pack("<I", value) + bytes(operands))

def bad(what, arg=0):
    extra = {31: b"\x85\xff\xff\xff", 32: bytes([what % 4])}.get(what, b"")
    return bytes([BAD, what, 0, arg, 0]) + extra

def stale(what, handle=STALE_H):
    return bytes([STALE, what]) + h(handle)

def worker(kind, b=0, stream=1, stream2=2):
    f = kind << 1
    if kind == 2:  # allocate and write, hand over
        return bytes([WORKER, f, stream, stream2]) + struct.pack("<HI", 1000, 0xabcdef)
    return bytes([WORKER, f, stream, stream2, b]) + struct.pack("<HH", 3, 900) + bytes([0x5a])

def join():
    return bytes([JOIN])

def stats(peer=False):
    return bytes([STATS, flags(peer)])

def reset(peer=False):
    return bytes([RESET, flags(peer)])

def recreate(cfg):
    return bytes([RECREATE]) + cfg

def peer(device=1, streams=2):
    sel = {1: 0, 7: 2, 0: 3}[device]
    return bytes([PEER, sel | ((streams - 1) << 2)])

def fault(kind, *operands, peer_=False):
    return bytes([FAULT, kind, flags(peer_)]) + bytes(operands)

SEEDS = {
    # Memory and copies.
    "copy-roundtrip": config() + alloc(4096) + host(HTOD, 0, stream=1) + host(DTOH, 0, stream=2)
                      + release(0),
    "copy-async": config(streams=3) + alloc(65536, stream=2) + host(HTOD, 0, stream=0, async_=True)
                  + host(DTOH, 0, stream=1, async_=True) + sync(1) + wait(0) + wait(1),
    "memset-partial": config() + alloc(4097) + host(MEMSET, 0, off=OFF_HALF, length=LEN_ONE)
                      + host(DTOH, 0, stream=3),
    "dtod-overlap": config() + alloc(4096) + host(HTOD, 0)
                    + dtod(0, 0, doff=off_at(16), soff=OFF0, length=LEN_HALF) + host(DTOH, 0),
    "dtod-two-blocks": config(streams=2) + alloc(4096) + alloc(4096, stream=1) + host(HTOD, 0)
                       + dtod(1, 0, stream=1) + host(DTOH, 1, stream=0),
    "odd-ranges": config() + alloc(256 << 10) + host(HTOD, 0, off=OFF_END, length=LEN_ONE)
                  + host(HTOD, 0, off=OFF_LAST, length=LEN_OVER) + host(DTOH, 0, length=LEN_HUGE)
                  + host(MEMSET, 0, length=LEN_ZERO) + host(DTOH, 0, off=OFF_HUGE),
    "odd-sizes": config() + alloc(0) + alloc(1) + alloc(3) + alloc(1 << 30) + alloc(1 << 48)
                 + alloc(2**64 - 1) + access(1) + access(2, True) + stats(),
    "alloc-async-try": config(queue=1) + alloc(4096, async_=True, try_=True)
                       + alloc(4096, async_=True) + wait(0) + host(MEMSET, 0, async_=True, try_=True),
    "streams-out-of-range": config(streams=2) + alloc(4096, stream=0xf8) + alloc(4096)
                            + host(HTOD, 0, stream=0xff) + sync(0xfa) + sync(1, async_=True),
    "retain-release": config() + alloc(4096) + retain(0) + release(0) + access(0) + release(0)
                      + stale(3) + stale(2) + stale(0),
    "random-handles": config() + alloc(16) + stale(0, random_h(0x0100000000000001))
                      + stale(2, random_h(0x00ffffff00000001)) + stale(3, random_h(0))
                      + host(HTOD, random_h(0x0200000000000005)) + host(MEMSET, NULL_H),
    "budget": config(budget=True) + alloc(16 << 20) + alloc((1 << 20) + 1) + alloc((1 << 20) + 1)
              + host(HTOD, 0) + host(MEMSET, 2) + stats(),
    "guard-nopool": config(pool=False, guard=True) + alloc(4097) + host(HTOD, 0) + release(0)
                    + alloc(4097) + host(DTOH, 0),
    "direct-alloc": config(direct=True) + alloc(4096) + host(HTOD, 0) + task(0, T_HOST_WRITE)
                    + task(NULL_H),
    "checker-cross-stream": config(streams=4, check=True) + alloc(4096) + host(HTOD, 0, stream=0)
                            + host(MEMSET, 0, stream=1, async_=True) + host(DTOH, 0, stream=2)
                            + dtod(0, 0, doff=0x80, soff=0, length=LEN_ONE, stream=3) + stats(),
    "synchronous-delay": config(sync=True, delay=True, shared=True, queue=2) + alloc(4096)
                         + host(HTOD, 0, async_=True) + host(DTOH, 0, stream=1, async_=True)
                         + flush() + wait(1),
    # Events.
    "events": config(streams=3) + alloc(4096) + ev_create() + host(HTOD, 0, async_=True)
              + host(DTOH, 0, async_=True) + ev_record(0, 0) + ev_wait(0, 1) + sync(1)
              + ev_sync(0) + ev_query(0),
    "events-timing": config() + ev_create(timing=True) + ev_create(timing=True) + ev_record(0, 0)
                     + ev_record(1, 1, async_=True) + ev_elapsed(0, 1) + ev_sync(1)
                     + ev_elapsed(0, 1) + ev_create(bad=True),
    "event-destroyed-use": config() + ev_create() + ev_record(0) + ev_destroy(0, then_use=0)
                           + ev_create() + ev_destroy(0, then_use=2),
    "event-after-reset": config() + ev_create() + ev_record(0) + reset() + ev_sync(0)
                         + ev_query(0) + ev_record(0) + ev_sync(0),
    # Tasks.
    "task-host-write": config() + alloc(4096) + task(0, T_HOST_WRITE | T_CHECK_CTX)
                       + host(DTOH, 0, stream=1),
    "task-host-check": config(streams=2) + alloc(4096) + host(HTOD, 0, stream=1)
                       + task(0, T_HOST_CHECK | T_CLEANUP, stream=0),
    "task-launch-post": config() + alloc(4096) + task(0, T_LAUNCH | T_POST, values=2)
                        + host(DTOH, 0),
    "task-scratch": config(check=True) + alloc(4096) + task(0, T_SCRATCH | T_CHECK_CTX)
                    + task(0, T_SCRATCH, stream=1) + host(DTOH, 0, stream=2),
    "task-deadlk": config() + alloc(4096) + peer(1) + task(0, T_DEADLK | T_HOST_WRITE)
                   + task(0, T_BAD_CALLS),
    "task-errors": config() + alloc(4096) + task(0, T_HOST_WRITE, ret=4) + task(0, ret=10)
                   + task(0, ret=11, async_=True) + host(DTOH, 0) + wait(0),
    # Launches.
    "launch-fill-copy": config(streams=2) + alloc(4096) + alloc(4096)
                        + launch(K_FILL, [0, OFF0, 0x40, 0x00])
                        + launch(K_COPY, [1, 0, OFF0, OFF0, 0x00, 0x04], stream=1)
                        + host(DTOH, 1),
    "launch-add-checksum": config() + alloc(4096) + alloc(4096) + host(HTOD, 0) + host(HTOD, 1)
                           + launch(K_ADD, [0, 0, 1, 0x40, 0x00])
                           + launch(K_CHECKSUM, [0, 1, 0x20, 0x00, OFF0]) + host(DTOH, 1),
    "launch-store-args": config() + alloc(256) + launch(K_STORE, [0, OFF0], value=0x89abcdef)
                         + host(DTOH, 0) + launch(K_POKE, [0, OFF0, 0x10, 0x00]),
    "launch-bad": config() + alloc(4096) + launch(K_FILL, [0, OFF0, 1, 0], variant=200)
                  + launch(K_FILL, [0, OFF0, 1, 0], variant=203)
                  + launch(K_COPY, [0, 0, OFF0, 0xa0, 1, 0], variant=207)
                  + launch(K_FILL, [0, OFF0, 1, 0], variant=209)
                  + launch(K_FILL, [0, OFF0, 1, 0], variant=210)
                  + launch(K_EMPTY, [], variant=211) + launch(K_TOUCH8, [0, 0, 1, 2, 0, 4, 1, 3, 1, 5, 1]),
    "launch-own-image": config() + alloc(4096) + launch(K_MINE, [0, OFF0, 0x10, 0x00])
                        + launch(K_FILL, [0, OFF_HALF, 0x10, 0x00]) + host(DTOH, 0)
                        + bad(19),
    "launch-spin-async": config(streams=2) + launch(K_SPIN, [], async_=True, value=5000)
                         + launch(K_EMPTY, [], stream=1, async_=True) + flush() + wait(0, 2),
    # Two actors.
    "peer-copy": config(devices=2) + alloc(4096) + peer(1) + alloc(4096, peer=True)
                 + host(HTOD, 0) + dtod(1, 0, peer=True) + host(DTOH, 1, peer=True),
    "peer-events": config(devices=2) + peer(1, 3) + ev_create() + ev_record(0, 1)
                   + ev_wait(0, 2, peer=True) + sync(2, peer=True) + peer(),
    "peer-busy": config() + peer(0) + peer(7) + peer(1),
    # Threads.
    "worker-read": config(streams=3) + alloc(4096) + host(HTOD, 0) + worker(0, 0) + join(),
    "worker-write": config(streams=3) + alloc(4096) + worker(1, 0) + join() + host(DTOH, 0),
    "worker-alloc": config(streams=3) + worker(2) + join() + host(DTOH, 0, stream=2) + stats(),
    # Whole actors.
    "reset": config() + alloc(4096) + host(HTOD, 0, async_=True) + reset() + stale(0)
             + host(DTOH, STALE_H) + alloc(4096) + stats(),
    "recreate": config() + alloc(4096) + recreate(config(streams=8, guard=True, check=True))
                + stale(2) + alloc(4097) + host(MEMSET, 0),
    "bad-arguments-1": config() + alloc(16) + ev_create() + b"".join(bad(w) for w in range(20)),
    "bad-arguments-2": config(devices=2) + alloc(16) + ev_create() + peer(1)
                       + b"".join(bad(w) for w in range(20, 40)),
    # Faults.
    "fault-fail-alloc": config() + fault(0, 1) + alloc(4096) + alloc(4096) + host(HTOD, 0)
                        + host(HTOD, 1),
    "fault-poison": config(streams=2) + alloc(4096) + host(HTOD, 0, async_=True) + fault(1)
                    + host(DTOH, 0) + reset() + alloc(4096) + host(HTOD, 0),
    "fault-inject": config() + alloc(4096) + fault(2, 0x10, 1, 0) + host(HTOD, 0) + sync(0)
                    + reset() + alloc(16),
    "fault-fatal": config(devices=2) + peer(1) + alloc(4096) + fault(3) + host(HTOD, 0)
                   + alloc(16, peer=True) + recreate(config()),
    "fault-illegal-address": config() + alloc(4096) + fault(4) + stats() + access(0),
    # The fixed findings' reproducers (docs/FUZZING.md), kept as regressions.
    # (8: "stream_sync" in dv_sim_call_name's order; 4: code 700.)
    "known-2-guard-scratch-uaf": config(streams=5, pool=False, guard=True, sync=True)
                                 + alloc(4096) + fault(2, 8, 4, 0),
    "known-3-checker-scratch": config(streams=8, check=True) + alloc(1, stream=1) + release(0)
                               + alloc(258, stream=5) + task(0, T_SCRATCH, stream=5),
}


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):
        os.remove(os.path.join(out, name))
    for name, data in sorted(SEEDS.items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print("%d seeds in %s" % (len(SEEDS), out), file=sys.stderr)


if __name__ == "__main__":
    main()
