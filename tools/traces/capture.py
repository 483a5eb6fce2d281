#!/usr/bin/env python3
"""Capture PyTorch CUDA allocation traces of a few workloads for dv-replay.

    capture.py --out DIR [--only NAME[,NAME...]] [--quick] [--keep-pickle]

For each workload (see workloads.py: cnn, transformer, inference,
multistream), from a clean start (synchronize, empty the cache and the
cuBLAS workspaces, reset the peak statistics), this records PyTorch's
caching-allocator history (torch.cuda.memory._record_memory_history, no
stack traces), runs the workload, takes torch.cuda.memory._snapshot() and
stops recording.  It writes

    DIR/NAME.csv.gz   the trace as devactor's allocation log (snapshot2csv.py)
    DIR/NAME.json     metadata: model and shapes, versions, GPU, counts, peaks
    DIR/NAME.pickle   the snapshot itself, with --keep-pickle
    DIR/summary.json  the environment and every workload's metadata

A workload that fails is reported and the others still run; the exit
status is then 1.  Needs a CUDA GPU, PyTorch 2.x and nothing else.
"""

import argparse
import ctypes
import datetime
import gc
import importlib.util
import json
import math
import os
import pickle
import platform
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))

WORKLOADS = ("cnn", "transformer", "inference", "multistream")
DEFAULT_MAX_ENTRIES = 2_000_000
DEFAULT_SEED = 1234


def load_sibling(name):
    """Import tools/traces/NAME.py by path (this directory need not be a package)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def human(n):
    """Bytes in GiB/MiB for progress lines."""
    return f"{n / (1 << 30):.2f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.1f} MiB"


# ---------------------------------------------------------------------------
# Environment
# ---------------------------------------------------------------------------


def driver_version(index):
    """The NVIDIA driver release from nvidia-smi, or None."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader",
                              "-i", str(index)], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else None


def cuda_driver_api_version():
    """cuDriverGetVersion() from libcuda (e.g. 12040 for CUDA 12.4), or None."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int()
        if libcuda.cuDriverGetVersion(ctypes.byref(version)) == 0:
            return version.value
    except (OSError, AttributeError):
        pass
    return None


def environment(torch, device):
    """Versions and the GPU, for the metadata."""
    props = torch.cuda.get_device_properties(device)
    backend = getattr(torch.cuda.memory, "get_allocator_backend", None)
    return {
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "cudnn_version": torch.backends.cudnn.version(),
        "gpu_name": props.name,
        "gpu_total_memory_bytes": props.total_memory,
        "gpu_compute_capability": f"{props.major}.{props.minor}",
        "gpu_multiprocessors": props.multi_processor_count,
        "driver_version": driver_version(device.index),
        "cuda_driver_api_version": cuda_driver_api_version(),
        "allocator_backend": backend() if backend else None,
        "pytorch_cuda_alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
        "python_version": platform.python_version(),
        "platform": platform.platform(),
    }


# ---------------------------------------------------------------------------
# Recording
# ---------------------------------------------------------------------------


def start_recording(torch, max_entries):
    """Start recording allocator history without stack traces; returns the
    API flavour used, for stop_recording."""
    record = torch.cuda.memory._record_memory_history
    # PyTorch >= 2.1: enabled/context/stacks strings; newer ones also take
    # clear_history, which empties what an earlier recording left.
    for kwargs in (dict(clear_history=True), {}):
        try:
            record(enabled="all", context=None, stacks="python", max_entries=max_entries, **kwargs)
            return "strings"
        except TypeError:
            continue
    # PyTorch 2.0: a bool and trace_alloc_* arguments.
    record(True, record_context=False, trace_alloc_max_entries=max_entries,
           trace_alloc_record_context=False)
    return "legacy"


def stop_recording(torch, flavour):
    record = torch.cuda.memory._record_memory_history
    if flavour == "strings":
        record(enabled=None)
    else:
        record(False)


def fresh_start(torch, device):
    """Leave the allocator as a new process would: nothing cached, peaks reset."""
    gc.collect()
    torch.cuda.synchronize(device)
    clear_workspaces = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear_workspaces is not None:
        clear_workspaces()  # cuBLAS keeps a workspace per stream from the allocator
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)


def snapshot_active_blocks(snapshot, device_index):
    """(count, bytes) of blocks PyTorch still had allocated at the snapshot."""
    count = size = 0
    for seg in snapshot.get("segments", []):
        if seg.get("device", device_index) != device_index:
            continue
        for block in seg.get("blocks", []):
            if block.get("state") == "active_allocated":
                count += 1
                size += block.get("requested_size", block.get("size", 0))
    return count, size


# ---------------------------------------------------------------------------
# One workload
# ---------------------------------------------------------------------------


def capture(torch, converter, runner, name, args, device, env):
    """Trace one workload; write its files; return its metadata."""
    meta = {"workload": name, "status": "running", "quick": args.quick, "seed": args.seed,
            "date_utc": utc_now(), **env}
    fresh_start(torch, device)
    meta["memory_allocated_at_start"] = torch.cuda.memory_allocated(device)
    meta["memory_reserved_at_start"] = torch.cuda.memory_reserved(device)
    flavour = start_recording(torch, args.max_entries)
    meta["record_api"] = flavour
    try:
        t0 = time.perf_counter()
        info = runner(device, quick=args.quick, seed=args.seed)
        gc.collect()  # anything in a reference cycle is freed inside the trace too
        torch.cuda.synchronize(device)
        meta["wall_time_s"] = round(time.perf_counter() - t0, 3)
        snapshot = torch.cuda.memory._snapshot()
    finally:
        stop_recording(torch, flavour)
    meta["torch_max_memory_allocated"] = torch.cuda.max_memory_allocated(device)
    meta["torch_max_memory_reserved"] = torch.cuda.max_memory_reserved(device)
    result = info["result"]
    if isinstance(result, float) and not math.isfinite(result):
        result = str(result)  # JSON has no NaN or infinity
    meta.update(description=info["description"], config=info["config"], result=result)

    csv_path = os.path.join(args.out, f"{name}.csv.gz")
    conv = converter.convert_snapshot(snapshot, csv_path, device=device.index, tag=name)
    counts = conv.summary()
    meta.update(
        trace_entries=counts["entries"],
        trace_actions=counts["actions"],
        trace_may_have_wrapped=counts["entries"] >= args.max_entries,
        rows=counts["rows"],
        allocs=counts["allocs"],
        frees=counts["frees"],
        streams=counts["streams"],
        live_at_end=counts["live_at_end"],
        dropped_frees=counts["dropped_frees"],
        implicit_frees=counts["implicit_frees"],
        free_at="requested",
        trace_peak_live_bytes=counts["peak_live_bytes"],
    )
    meta["snapshot_active_blocks"], meta["snapshot_active_bytes"] = \
        snapshot_active_blocks(snapshot, device.index)
    files = {"csv": os.path.basename(csv_path), "pickle": None}
    if args.keep_pickle:
        pickle_path = os.path.join(args.out, f"{name}.pickle")
        with open(pickle_path, "wb") as f:
            pickle.dump(snapshot, f, protocol=pickle.HIGHEST_PROTOCOL)
        files["pickle"] = os.path.basename(pickle_path)
    meta["files"] = files
    meta["status"] = "ok"
    return meta, conv


def write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Capture PyTorch CUDA allocation traces of a few workloads and write them "
                    "as dv-replay logs (DIR/NAME.csv.gz) with metadata (DIR/NAME.json, "
                    "DIR/summary.json).",
        epilog=f"Workloads: {', '.join(WORKLOADS)}.  Needs a CUDA GPU and PyTorch 2.x.")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory (made if absent)")
    parser.add_argument("--only", metavar="NAME[,NAME...]",
                        help="capture only these workloads (default: all, in the order listed below)")
    parser.add_argument("--quick", action="store_true",
                        help="fewer steps and smaller shapes: a smoke test of seconds")
    parser.add_argument("--keep-pickle", action="store_true",
                        help="also write the raw snapshot, DIR/NAME.pickle (snapshot2csv.py "
                             "converts it again, e.g. with --free-at completed)")
    parser.add_argument("--max-entries", type=int, default=DEFAULT_MAX_ENTRIES, metavar="N",
                        help=f"history ring buffer size (default {DEFAULT_MAX_ENTRIES})")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"default {DEFAULT_SEED}")
    args = parser.parse_args(argv)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in WORKLOADS]
        if unknown or not names:
            parser.error(f"--only: unknown workload(s) {', '.join(unknown) or '(none given)'}; "
                         f"choose from {', '.join(WORKLOADS)}")
        args.names = [n for n in WORKLOADS if n in names]
    else:
        args.names = list(WORKLOADS)
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        import torch
    except ImportError as e:
        print(f"capture: cannot import torch: {e}", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("capture: no CUDA device is available to torch", file=sys.stderr)
        return 1
    converter = load_sibling("snapshot2csv")
    workloads = load_sibling("workloads")
    os.makedirs(args.out, exist_ok=True)

    device = torch.device("cuda", torch.cuda.current_device())
    torch.backends.cudnn.benchmark = False  # no autotuning allocations in the traces
    env = environment(torch, device)
    if env["allocator_backend"] not in (None, "native"):
        print(f"capture: the allocator backend is {env['allocator_backend']}; history is "
              "recorded by the native caching allocator only (unset "
              "PYTORCH_CUDA_ALLOC_CONF's backend)", file=sys.stderr)
        return 1
    print(f"capture: torch {env['torch_version']}, CUDA {env['cuda_version']}, "
          f"{env['gpu_name']} (driver {env['driver_version'] or 'unknown'}), "
          f"{'quick, ' if args.quick else ''}into {args.out}", flush=True)

    results, failed = [], []
    started = time.perf_counter()
    for k, name in enumerate(args.names, 1):
        tag = f"[{k}/{len(args.names)}] {name}"
        print(f"{tag}: running", flush=True)
        try:
            meta, conv = capture(torch, converter, workloads.RUNNERS[name], name, args, device, env)
            print(f"{tag}: {meta['wall_time_s']:.2f} s, {meta['trace_entries']} trace entries; "
                  f"{converter.summary_line(conv)}", flush=True)
            print(f"{tag}: torch max allocated {human(meta['torch_max_memory_allocated'])}, "
                  f"max reserved {human(meta['torch_max_memory_reserved'])}; trace peak live "
                  f"{human(meta['trace_peak_live_bytes'])}", flush=True)
            if meta["trace_may_have_wrapped"]:
                print(f"{tag}: warning: the trace filled --max-entries; its start may be lost",
                      flush=True)
            del conv
        except Exception as e:  # report, clean up, and go on with the next workload
            meta = {"workload": name, "status": "failed", "quick": args.quick,
                    "date_utc": utc_now(), "error": f"{type(e).__name__}: {e}", **env}
            print(f"{tag}: FAILED: {meta['error']}", file=sys.stderr, flush=True)
            traceback.print_exc()
            failed.append(name)
        write_json(os.path.join(args.out, f"{name}.json"), meta)
        results.append(meta)
        try:
            fresh_start(torch, device)  # nothing of this workload into the next
        except Exception as e:  # a broken context fails what follows, not the summary
            print(f"{tag}: cleanup failed: {e}", file=sys.stderr, flush=True)

    write_json(os.path.join(args.out, "summary.json"), {
        "date_utc": utc_now(),
        "quick": args.quick,
        "seed": args.seed,
        "environment": env,
        "workloads": results,
        "failed": failed,
        "total_wall_time_s": round(time.perf_counter() - started, 3),
    })
    print(f"capture: {len(results) - len(failed)} of {len(results)} workloads captured"
          f"{'; failed: ' + ', '.join(failed) if failed else ''}; summary in "
          f"{os.path.join(args.out, 'summary.json')}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
