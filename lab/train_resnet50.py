#!/usr/bin/env python3
"""Train ResNet-50 for a few seeded steps on the GPU, under PyTorch's own caching allocator or
under gpusim's pluggable allocator (build/libgpusim_torch.so), and write what happened as JSON:
the loss of every step, every step's time, and the peak reserved memory.

    python3 lab/train_resnet50.py --allocator native -o native.json
    GPUSIM_POLICY=pytorch GPUSIM_STATS=stats.json \\
        python3 lab/train_resnet50.py --allocator gpusim -o gpusim.json

Under gpusim the peak reserved memory is in the GPUSIM_STATS file (peak_reserved_bytes), written
when the process exits: PyTorch's memory_stats() does not see into a pluggable allocator.

The data are random images and labels from a seeded generator, so two runs see the same batches;
cuDNN is held to deterministic algorithms so the losses can be compared between allocators.
Step times are taken between two torch.cuda.synchronize() calls; the first step pays for cuDNN's
and the allocator's warm-up, so summaries use the median of the steps after it. This script is
for the device machine (PyTorch needed); the project itself uses only the standard library.
"""
import argparse
import json
import statistics
import sys
import time


def resnet50(torch):
    """torchvision's ResNet-50 where it is installed, else the same architecture written out
    (bottleneck blocks 3-4-6-3, 25.6M parameters)."""
    try:
        import torchvision
        return torchvision.models.resnet50(), "torchvision"
    except ImportError:
        pass
    nn = torch.nn

    class Bottleneck(nn.Module):
        def __init__(self, cin, mid, stride):
            super().__init__()
            cout = mid * 4
            self.body = nn.Sequential(
                nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
                nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid),
                nn.ReLU(inplace=True),
                nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.short = None
            if stride != 1 or cin != cout:
                self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                           nn.BatchNorm2d(cout))
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            s = x if self.short is None else self.short(x)
            return self.relu(self.body(x) + s)

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for mid, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            layers.append(Bottleneck(cin, mid, stride if b == 0 else 1))
            cin = mid * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)]
    return nn.Sequential(*layers), "written out"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--allocator", choices=("native", "gpusim"), required=True)
    ap.add_argument("--lib", default="build/libgpusim_torch.so", help="gpusim's pluggable allocator")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()

    import torch
    if a.allocator == "gpusim":
        # Before the first CUDA allocation: the allocator cannot change once one was made.
        alloc = torch.cuda.memory.CUDAPluggableAllocator(a.lib, "gpusim_malloc", "gpusim_free")
        torch.cuda.memory.change_current_allocator(alloc)
    torch.manual_seed(a.seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    model, source = resnet50(torch)
    model = model.cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(a.seed)
    losses, times = [], []
    for _ in range(a.steps):
        x = torch.randn(a.batch, 3, 224, 224, generator=gen).cuda()
        y = torch.randint(0, 1000, (a.batch,), generator=gen).cuda()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    out = {
        "allocator": a.allocator,
        "model": source,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0),
        "batch": a.batch,
        "seed": a.seed,
        "losses": losses,
        "step_seconds": times,
        "median_step_seconds_after_first": statistics.median(times[1:]) if len(times) > 1 else times[0],
    }
    if a.allocator == "native":
        out["max_memory_reserved"] = torch.cuda.max_memory_reserved()
        out["max_memory_allocated"] = torch.cuda.max_memory_allocated()
    with open(a.output, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps({k: out[k] for k in ("allocator", "losses", "median_step_seconds_after_first")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
