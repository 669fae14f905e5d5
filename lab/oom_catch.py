#!/usr/bin/env python3
"""Fill GPU memory under a cap, catch the out-of-memory error, free, go on and finish: the same
program under PyTorch's own allocator (the cap set by torch.cuda.set_per_process_memory_fraction)
and under gpusim's pluggable allocator (the cap in GPUSIM_CAPACITY), to show that an OOM under
libgpusim_torch.so reaches the program as torch.OutOfMemoryError, that torch.cuda.empty_cache()
releases gpusim's cache, and that the program ends with the same results as under PyTorch.

    python3 lab/oom_catch.py --allocator native --cap 4200MiB -o native.json
    GPUSIM_CAPACITY=4200MiB python3 lab/oom_catch.py --allocator gpusim \\
        --lib build/torch/libgpusim_torch.so -o gpusim.json
    python3 lab/oom_catch.py --compare native.json gpusim.json

The steps, each catching torch.OutOfMemoryError where the cap is met:
  1. fill: 256 MiB tensors, each filled with its own value, until an OOM;
  2. free every other one, then 128 MiB tensors until an OOM (they reuse the freed blocks);
  3. a 2 GiB request, which cannot fit: an OOM;
  4. free the 128 MiB tensors and half the rest, torch.cuda.empty_cache(): the driver's free
     memory (cudaMemGetInfo) shows what went back;
  5. the 2 GiB request again, now with room, filled;
  6. a checksum of every live tensor, read back from the GPU.
The results compared are the counts, where each OOM happened, the bytes empty_cache gave back
and the checksum. libgpusim_torch_oom.so must lie beside the library (torch/build-oom.sh);
under gpusim the library's reset function is set to gpusim_empty_cache so that
torch.cuda.empty_cache() reaches it. This script is for the device machine (PyTorch needed).
"""
import argparse
import ctypes
import json
import os
import sys

MiB = 1 << 20
SIZES = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
COMPARED = ("n_fill", "n_half", "ooms", "released_by_empty_cache_bytes", "big_after_empty_cache",
            "checksum", "finished")


def parse_size(s):
    for unit in ("GiB", "MiB", "KiB", "B"):
        if s.endswith(unit):
            return int(float(s[:-len(unit)]) * SIZES[unit])
    return int(s)


def use_gpusim(torch, lib):
    """The three lines of the README, and the reset function behind torch.cuda.empty_cache()."""
    shim = os.path.join(os.path.dirname(os.path.abspath(lib)), "libgpusim_torch_oom.so")
    if not os.path.exists(shim) and not os.environ.get("GPUSIM_TORCH_OOM"):
        sys.exit("oom_catch.py: no %s: an OOM would give PyTorch a null pointer "
                 "(torch/build-oom.sh builds it)" % shim)
    alloc = torch.cuda.memory.CUDAPluggableAllocator(lib, "gpusim_malloc", "gpusim_free")
    so = ctypes.CDLL(lib)
    alloc.allocator().set_reset_fn(ctypes.cast(so.gpusim_empty_cache, ctypes.c_void_p).value)
    torch.cuda.memory.change_current_allocator(alloc)


def run(args):
    import torch
    out = {"allocator": args.allocator, "torch": torch.__version__, "ooms": [], "messages": []}
    if args.allocator == "gpusim":
        use_gpusim(torch, args.lib)
    cap = parse_size(args.cap)
    total = torch.cuda.get_device_properties(0).total_memory
    if args.allocator == "native":
        torch.cuda.set_per_process_memory_fraction(cap / total, 0)
    out.update(cap_bytes=cap, device_total_bytes=total, device=torch.cuda.get_device_name(0))
    torch.cuda.init()
    free0 = torch.cuda.mem_get_info()[0]

    def tensor(nbytes, value):
        t = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        t.fill_(value % 251 + 1)
        return t

    def oom(step, e):
        out["ooms"].append([step, type(e).__module__ + "." + type(e).__name__])
        out["messages"].append(str(e).splitlines()[0][:200])

    live = []
    try:  # 1. fill
        for i in range(1000):
            live.append(tensor(256 * MiB, i))
    except torch.OutOfMemoryError as e:
        oom("fill", e)
    out["n_fill"] = len(live)
    del live[::2]  # 2. every other one freed, then smaller tensors into the holes
    half = []
    try:
        for i in range(1000):
            half.append(tensor(128 * MiB, 1000 + i))
    except torch.OutOfMemoryError as e:
        oom("half", e)
    out["n_half"] = len(half)
    try:  # 3. no room
        live.append(tensor(2048 * MiB, 7))
    except torch.OutOfMemoryError as e:
        oom("big", e)
    half.clear()  # 4. freed, then the cache released
    del live[::2]
    torch.cuda.synchronize()
    before = torch.cuda.mem_get_info()[0]
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    after = torch.cuda.mem_get_info()[0]
    out["released_by_empty_cache_bytes"] = after - before
    out["driver_used_before_empty_cache_bytes"] = free0 - before
    try:  # 5. room now
        live.append(tensor(2048 * MiB, 9))
        out["big_after_empty_cache"] = True
    except torch.OutOfMemoryError as e:
        oom("big again", e)
        out["big_after_empty_cache"] = False
    # 6. what the tensors hold, read back: a uint8 sum is an int64 copy of its input, eight times
    # its size, so 16 MiB at a time (128 MiB of copy) stays far under the cap
    out["checksum"] = sum(int(t[k:k + 16 * MiB].sum().item())
                          for t in live for k in range(0, t.numel(), 16 * MiB))
    out["live_tensors"] = len(live)
    out["finished"] = True
    return out


def compare(a_path, b_path):
    a, b = (json.load(open(p)) for p in (a_path, b_path))
    same = True
    for k in COMPARED:
        ok = a.get(k) == b.get(k)
        same &= ok
        print("%-32s %-28s %-28s %s" % (k, json.dumps(a.get(k)), json.dumps(b.get(k)),
                                         "equal" if ok else "DIFFERENT"))
    print("results equal" if same else "results differ")
    return 0 if same else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--allocator", choices=["native", "gpusim"], default="native")
    ap.add_argument("--lib", default="build/torch/libgpusim_torch.so")
    ap.add_argument("--cap", default="4200MiB", help="the memory cap (default 4200MiB)")
    ap.add_argument("-o", "--output", help="write the results as JSON here (default: stdout)")
    ap.add_argument("--compare", nargs=2, metavar="JSON", help="compare two runs' results")
    args = ap.parse_args()
    if args.compare:
        return compare(*args.compare)
    out = run(args)
    text = json.dumps(out, indent=1)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
