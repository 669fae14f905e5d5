#!/usr/bin/env python3
"""test_capture.py SRCDIR - gpusim's capture (torch/capture) with real PyTorch: each case an
unmodified program run under the hook, its trace read back and checked
against what PyTorch's caching allocator is asked in a real run (docs/capture.md says why each
rule holds). Skips (exit 77) where PyTorch or a CUDA device is missing, as on CI (PyTorch's fake CUDA tensors
need a device to exist; none of its memory is used); run on the GPU machine by
lab/device_predict.sh. Standard library besides the programs' own torch.
"""
import os
import subprocess
import sys
import tempfile
import textwrap

SRC = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
MiB = 2**20


def capture(program, tmp, name):
    out = os.path.join(tmp, name + ".gstrace")
    prog = os.path.join(tmp, name + ".py")
    with open(prog, "w") as f:
        f.write(textwrap.dedent(program))
    env = dict(os.environ, GPUSIM_CAPTURE_OUT=out,
               PYTHONPATH=os.path.join(SRC, "torch", "capture"))
    r = subprocess.run([sys.executable, prog], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, f"{name}: exit {r.returncode}\n{r.stderr[-3000:]}"
    head, rows = {}, []
    with open(out) as f:
        for line in f:
            if line.startswith("# ") and ": " in line:
                k, v = line[2:].rstrip("\n").split(": ", 1)
                head[k] = v
            elif line[0].isdigit():
                seq, t, op, client, dev, stream, ident, size = line.rstrip("\n").split(",")
                rows.append((op, int(stream), int(ident), int(size)))
    return head, rows, r.stdout


def allocs(rows):
    return [r[3] for r in rows if r[0] == "alloc"]


def case_sizes_and_views(tmp):
    head, rows, _ = capture("""
        import torch
        x = torch.empty(1000, device="cuda")          # 4000 bytes
        z = torch.empty(0, device="cuda")             # no request
        y = x[10:]                                    # a view: no request, keeps x alive
        del x
        torch.cuda.synchronize()
        w = torch.empty(3, 5, dtype=torch.float16, device="cuda")
        del y
        torch.cuda.empty_cache()
        """, tmp, "sizes")
    assert allocs(rows) == [4000, 30], rows
    ops = [r[0] for r in rows]
    # x is freed only when its view goes, after w was made
    assert ops == ["alloc", "alloc", "free", "empty_cache"], rows
    assert head["captured"].startswith("gpusim-capture 1"), head
    assert head["capture_outcome"] == "ok", head


def case_autograd(tmp):
    _, rows, _ = capture("""
        import torch
        a = torch.randn(256, 256, device="cuda", requires_grad=True)   # 262144 bytes
        b = (a * a).sum()
        b.backward()
        print("grad", tuple(a.grad.shape))
        """, tmp, "autograd")
    sizes = allocs(rows)
    assert sizes[0] == 262144, sizes
    assert 262144 in sizes[1:], sizes        # a * a, kept for backward, and the gradient
    assert sum(1 for r in rows if r[0] == "free") >= 2, rows


def case_matmul_workspaces(tmp):
    _, rows, _ = capture("""
        import torch
        a = torch.randn(64, 64, device="cuda", requires_grad=True)
        b = a @ a
        c = b @ a
        c.sum().backward()
        """, tmp, "matmul")
    sizes = allocs(rows)
    # forward: the first product's output, then cuBLAS's workspace and cuBLASLt's, once
    assert sizes[:4] == [16384, 16384, 32 * MiB, MiB], sizes
    assert sizes.count(32 * MiB) == 2, sizes   # the backward's own cuBLAS handle
    assert sizes.count(MiB) == 1, sizes        # one cuBLASLt workspace per stream


def case_record_stream(tmp):
    _, rows, _ = capture("""
        import torch
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            x = torch.empty(1 << 20, device="cuda")
        x.record_stream(torch.cuda.current_stream())
        del x
        y = torch.empty(10, device="cuda")
        """, tmp, "streams")
    ops = [(r[0], r[1] != 0) for r in rows]
    # made on the side stream; its free waits for the main stream's use: completed at the next
    # request (the capture assumes the GPU kept pace)
    assert ops == [("alloc", True), ("free", True), ("free_done", True), ("alloc", False)], rows


def case_values_read_back(tmp):
    head, rows, out = capture("""
        import torch
        x = torch.ones(10, device="cuda")
        s = x.sum().item()
        if (x > 0).any():
            print("any")
        print("sum", s)
        """, tmp, "item")
    assert "sum 0.0" in out, out              # the stand-in, in the tensor's own kind
    assert "any" not in out, out              # bool of a tensor: False
    assert "values read back (stand-in 0): 2" in head["capture_unknown"], head


def case_optimizer_foreach(tmp):
    _, rows, out = capture("""
        import torch
        import torch.optim.optimizer as oo
        m = torch.nn.Linear(256, 256).cuda()
        ps = list(m.parameters())
        print("choice", oo._default_to_fused_or_foreach(ps, False, False))
        opt = torch.optim.AdamW(ps)
        m(torch.randn(8, 256, device="cuda")).sum().backward()
        torch.nn.utils.clip_grad_norm_(ps, 1.0)
        opt.step()
        """, tmp, "optim")
    # as for real CUDA tensors: the multi-tensor kernels, not one parameter at a time
    assert "choice (False, True)" in out, out
    sizes = allocs(rows)
    assert sizes.count(262144) >= 4, sizes     # weight, its grad, exp_avg, exp_avg_sq


def case_graph(tmp):
    _, rows, _ = capture("""
        import torch
        m = torch.nn.Linear(128, 128).cuda()
        x = torch.randn(32, 128, device="cuda")
        m(x)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = m(x)
        g.replay()
        del g
        """, tmp, "graph")
    ops = [r[0] for r in rows]
    assert "pool_begin" in ops and "pool_end" in ops and "pool_release" in ops, ops
    begin = ops.index("pool_begin")
    # the graph's capture keeps the eager cuBLAS workspace and makes its own in the pool; the
    # generator's seed and offset (8 bytes each) come first, on the capture stream, and go
    # when the graph does, before its pool
    assert "empty_cache" in ops[:begin], ops
    assert 32 * MiB in allocs(rows[begin:]), rows
    assert allocs(rows[:begin]).count(32 * MiB) == 1, rows
    assert not [r for r in rows[:begin] if r[0] == "free" and r[3] == 32 * MiB], rows
    assert allocs(rows[:begin])[-2:] == [8, 8], rows
    release = ops.index("pool_release")
    assert [r[3] for r in rows[release - 2:release]] == [8, 8], rows


PROBED = """
    import torch
    x = torch.randn(1536, 8192, device="cuda")
    g = x.sum(0)                 # a reduction over the batch: split across blocks
    m = x.mean()
    w = torch.randn(64, 64, 3, 3, device="cuda")
    i = torch.randn(32, 64, 56, 56, device="cuda")
    y = torch.nn.functional.conv2d(i, w, padding=1)   # cuDNN chooses, and takes a workspace
    """


def transients(rows):
    """The sizes of the allocations freed in a program that frees none of its own tensors:
    what kernels took and gave back inside their calls."""
    freed = {r[2] for r in rows if r[0] == "free"}
    return [r[3] for r in rows if r[0] == "alloc" and r[2] in freed]


def kept(rows):
    freed = {r[2] for r in rows if r[0] == "free"}
    return [r[3] for r in rows if r[0] == "alloc" and r[2] not in freed]


def case_probe(tmp):
    """Each distinct operation run once on the device: its kernel's own requests (a split
    reduction's buffer, cuDNN's workspace) are in the trace; with the probe off they are not."""
    head, rows, _ = capture(PROBED, tmp, "probed")
    os.environ["GPUSIM_CAPTURE_PROBE"] = "0"
    try:
        head0, rows0, _ = capture(PROBED, tmp, "unprobed")
    finally:
        del os.environ["GPUSIM_CAPTURE_PROBE"]
    assert "run once on the device" in head["captured"], head
    assert "no GPU memory used" in head0["captured"], head0
    assert "cuDNN workspace" in head0.get("capture_unknown", ""), head0
    assert "cuDNN workspace" not in head.get("capture_unknown", ""), head
    # the outputs are the same requests; the probed trace has the kernels' transients besides
    assert kept(rows) == allocs(rows0), (allocs(rows), allocs(rows0))
    assert transients(rows) and not transients(rows0), (rows, rows0)
    print("probed transients:", transients(rows), head.get("capture_unknown"))


def main():
    try:
        # (from a folder of no package: the source tree's torch/ is no PyTorch)
        subprocess.run([sys.executable, "-c", "import torch; assert torch.cuda.device_count()"],
                       check=True,
                       capture_output=True, timeout=120, cwd=tempfile.gettempdir())
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
        print("test_capture: no PyTorch or no CUDA device here: skipped")
        return 77
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn in sorted(globals().items()):
            if name.startswith("case_"):
                try:
                    fn(tmp)
                    print(f"ok   {name}")
                except AssertionError as e:
                    failed += 1
                    print(f"FAIL {name}: {e}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
