#!/usr/bin/env python3
"""verify_prog.py - a program of our own for lab/device_verify.sh: training with varying shapes
whose batches grow as it goes (a run that dies at step k needs more after it), keeping a small
slice of every step's activations (which fragments the cache), recorded the ways users record it.

    python3 lab/verify_prog.py [--steps N] [--record MODE --snapshot PATH]
                               [--fraction-gib G] [--hold-free-gib F]

--record whole     _record_memory_history from the start, snapshot at the end (or at the death)
--record observer  the README's recipe: an OOM observer dumps the snapshot as the run dies
--record except    the try/except pattern: `except torch.OutOfMemoryError`, dump, re-raise
--fraction-gib G   torch.cuda.set_per_process_memory_fraction(G GiB / total), as a user caps a
                   run (gpusim verify applies its cap itself: leave this out under verify)
--hold-free-gib F  another library (CuPy, cudaMalloc outside PyTorch's pool) holds the device
                   but F GiB: the commonest OOM, a full device

Exits 1 with torch.OutOfMemoryError's traceback when it dies; prints one line per step.
"""
import argparse
import sys

import torch


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=18)
    p.add_argument("--record", choices=("none", "whole", "observer", "except"), default="none")
    p.add_argument("--snapshot")
    p.add_argument("--fraction-gib", type=float)
    p.add_argument("--hold-free-gib", type=float)
    return p.parse_args()


def hold_device(free_gib):
    """Take all of the device but free_gib with CuPy's plain cudaMalloc (no pool of PyTorch's),
    as a data-frame library holding its cache would."""
    import cupy
    free, _total = cupy.cuda.runtime.memGetInfo()
    keep = int(free_gib * 2**30)
    return cupy.cuda.runtime.malloc(max(0, free - keep))


def main():
    a = parse()
    torch.backends.cuda.matmul.allow_tf32 = True
    dev = torch.device("cuda")
    held = hold_device(a.hold_free_gib) if a.hold_free_gib is not None else None
    if a.fraction_gib:
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(a.fraction_gib * 2**30 / total)
    if a.record != "none":
        torch.cuda.memory._record_memory_history(max_entries=5_000_000)
    if a.record == "observer":
        torch._C._cuda_attach_out_of_memory_observer(
            lambda *args: torch.cuda.memory._dump_snapshot(a.snapshot))
    torch.manual_seed(0)
    width = 6144
    layers = [torch.nn.Linear(width, width, device=dev) for _ in range(6)]
    params = [p for l in layers for p in l.parameters()]
    opt = torch.optim.Adam(params, lr=1e-4)
    base = (1024, 3072, 2048, 4096, 1536)
    # a slice of each step's output kept on the GPU (a running log of activations): 1.2 MB
    # blocks carved out of the large segments the step freed, which pin them apart
    kept = []
    try:
        for step in range(a.steps):
            # varying shapes, and later batches larger: the memory the run needs grows
            bs = int(base[step % len(base)] * (1 + 0.25 * (step // 5)))
            x = torch.randn(bs, width, device=dev)
            h = x
            for l in layers:
                h = torch.relu(l(h))
            kept.append(h[:48].detach().clone())
            loss = h.pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del x, h, loss
            print(f"step {step} batch {bs} reserved {torch.cuda.memory_reserved()}", flush=True)
    except torch.OutOfMemoryError:
        if a.record == "except":
            torch.cuda.memory._dump_snapshot(a.snapshot)
        raise
    if a.record == "whole":
        torch.cuda.memory._dump_snapshot(a.snapshot)
    torch.cuda.synchronize()
    if held is not None:
        import cupy
        cupy.cuda.runtime.free(held)
    return 0


if __name__ == "__main__":
    sys.exit(main())
