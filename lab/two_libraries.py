#!/usr/bin/env python3
"""two_libraries.py - two libraries on one GPU, as the story goes: CuPy processes data in
chunks and frees them (its pool keeps the memory), then PyTorch trains on what it produced.

Runs natively (CuPy's MemoryPool and PyTorch's caching allocator) or unmodified under
`gpusim run --clients MODE` (the two are then two clients of gpusim's allocator). With
LAB_BUDGET=BYTES the device is first filled, outside both allocators, until the allocators
together have BYTES (a GPU shared with another program): a raw cudaMalloc of the rest, made
after both libraries' handles exist so that nothing outside the allocators comes later.

Writes LAB_OUT (JSON): outcome ("ok", or "oom" and in which phase), the results (values CuPy computed and
the trained weights' sum, as exact hex floats, compared bit for bit with the native run's), each phase's peak as the
native allocators report it (native runs), and the budget: the device's free bytes after the
ballast plus what the allocators held then (the device a replay of the trace must be given).

LAB_SCALE (default 1.0) scales every size. Needs torch and cupy (the GPU machine).
"""
import ctypes
import json
import os
import sys

# deterministic cuBLAS (use_deterministic_algorithms below), set before the first handle
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import cupy as cp  # noqa: E402
import torch  # noqa: E402

MiB = 1 << 20
SCALE = float(os.environ.get("LAB_SCALE", "1.0"))
OUT = os.environ.get("LAB_OUT", "two_libraries.json")


def gpusim_lib():
    """libgpusim_torch.so when this process runs under gpusim run (its reserved bytes), else
    None: found in the process's own mappings, as the hook loaded it."""
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if path.endswith("libgpusim_torch.so"):
                lib = ctypes.CDLL(path)
                lib.gpusim_reserved.restype = ctypes.c_size_t
                lib.gpusim_reserved.argtypes = (ctypes.c_int,)
                return lib
    return None


def held(lib):
    """Bytes the allocators hold from the device now."""
    if lib is not None:
        return lib.gpusim_reserved(0)
    return torch.cuda.memory_reserved() + cp.get_default_memory_pool().total_bytes()


def warm_up():
    """Both libraries' handles and workspaces made before the ballast: cuBLAS for each, CuPy's
    reductions, PyTorch's autograd."""
    a = torch.randn(512, 512, device="cuda", requires_grad=True)
    (a @ a).sum().backward()
    x = cp.ones((512, 512), dtype=cp.float32)
    float((x @ x)[0, 0])
    del a, x
    torch.cuda.synchronize()


def etl(n_elems, chunks):
    """CuPy's part: every chunk made and kept until all are read, then freed (the pool keeps
    them). Returns values read from them and the features PyTorch trains on (on the host)."""
    kept, sums = [], []
    for i in range(chunks):
        # elementwise only: CuPy's float scans and reductions may sum in another order from
        # one run to the next, and the outputs are compared bit for bit across runs
        a = cp.arange(n_elems, dtype=cp.float32)
        b = cp.sin(a * cp.float32(1e-6 * (i + 1)))
        c = b * b + cp.cos(a)
        kept.append(c)
        del a, b
    for c in kept:
        sums.append(float(c[-1]) + float(c[len(c) // 3]))
    feats = cp.stack([c[: 1 << 16] for c in kept]).T.copy()  # 65536 x chunks
    feats = cp.asnumpy(feats)
    del kept, c
    cp.cuda.Device().synchronize()
    return sums, feats


def train(feats, batch, width, steps):
    """PyTorch's part: an MLP on batches built from CuPy's features."""
    torch.manual_seed(0)
    x0 = torch.from_numpy(feats).cuda()
    model = torch.nn.Sequential(
        torch.nn.Linear(x0.shape[1], width), torch.nn.ReLU(),
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, 1)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    for s in range(steps):
        idx = torch.arange(batch, device="cuda") % x0.shape[0]
        xb = x0[idx] * (1.0 + 0.01 * s)
        loss = model(xb).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    return sum(p.double().sum().item() for p in model.parameters())


def main():
    torch.use_deterministic_algorithms(True)
    lib = gpusim_lib()
    res = {"under_gpusim": lib is not None, "scale": SCALE}
    warm_up()
    budget = int(os.environ.get("LAB_BUDGET", "0"))
    ballast = None
    if budget:
        free, _ = cp.cuda.runtime.memGetInfo()
        have = held(lib)
        size = (free + have - budget) // (2 * MiB) * (2 * MiB)
        if size > 0:
            ballast = cp.cuda.runtime.malloc(size)
        free_after, _ = cp.cuda.runtime.memGetInfo()
        res.update(ballast=size, held_at_ballast=have, device_budget=free_after + have)
    n = int(128 * MiB * SCALE) // 4 * 4
    try:
        res["phase"] = "etl"
        sums, feats = etl(n, 8)
        res["etl_values"] = [v.hex() for v in sums]
        if lib is None:
            res["etl_pool_bytes"] = cp.get_default_memory_pool().total_bytes()
        res["phase"] = "train"
        total = train(feats, int(32768 * SCALE), 4096, 4)
        res["weights_sum"] = total.hex()
        if lib is None:
            res["train_peak_reserved"] = torch.cuda.max_memory_reserved()
        res["outcome"] = "ok"
    except (torch.OutOfMemoryError, cp.cuda.memory.OutOfMemoryError) as e:
        res["outcome"] = "oom"
        res["oom"] = str(e).splitlines()[0][:300]
    res["held_at_end"] = held(lib)
    with open(OUT, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps({k: res[k] for k in ("outcome", "phase")}))
    if ballast is not None:
        cp.cuda.runtime.free(ballast)
    return 0


if __name__ == "__main__":
    sys.exit(main())
