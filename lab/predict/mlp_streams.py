"""mlp_streams.py - MLP training fed from a side stream (record_stream), one empty_cache.

One of lab/predict's programs (run unmodified, for real and under gpusim's capture): each batch
is made on a side stream and used on the main one, as a prefetching loader does, so its memory
is freed only once the main stream is done with it (Tensor.record_stream); the cache is emptied
once halfway, and the batch grows after it.
"""
import argparse

import torch
import torch.nn as nn


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=16)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4096, 8192), nn.GELU(), nn.Linear(8192, 8192), nn.GELU(),
                          nn.Linear(8192, 4096)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    side = torch.cuda.Stream()
    for step in range(args.steps):
        batch = 1024 if step < args.steps // 2 else 1536
        with torch.cuda.stream(side):
            x = torch.randn(batch, 4096, device="cuda")
            y = torch.randn(batch, 4096, device="cuda")
        torch.cuda.current_stream().wait_stream(side)
        x.record_stream(torch.cuda.current_stream())
        y.record_stream(torch.cuda.current_stream())
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, y
        if step == args.steps // 2:
            torch.cuda.empty_cache()
        print(f"step {step} batch {batch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
