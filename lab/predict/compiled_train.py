"""compiled_train.py - a transformer encoder's training step under torch.compile's CUDA graphs.

One of lab/predict's programs (run unmodified, for real and under gpusim's allocator):
torch.compile(mode="reduce-overhead") records the step into CUDA-graph trees, whose private pools
hold the graphs' memory; two input shapes alternate (each its own graph), and the optimizer step
runs eagerly beside them.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    torch.manual_seed(0)
    d, heads, classes = 512, 8, 64
    layer = nn.TransformerEncoderLayer(d, heads, 4 * d, batch_first=True, dropout=0.0)
    model = nn.Sequential(nn.TransformerEncoder(layer, 4), nn.Linear(d, classes)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(x, y):
        loss = F.cross_entropy(model(x).reshape(-1, classes), y.reshape(-1))
        loss.backward()
        return loss.detach()

    compiled = torch.compile(step, mode="reduce-overhead")
    for r in range(args.rounds):
        for i, (batch, length) in enumerate([(32, 128), (16, 256)]):
            torch.compiler.cudagraph_mark_step_begin()
            x = torch.randn(batch, length, d, device="cuda")
            y = torch.randint(0, classes, (batch, length), device="cuda")
            loss = compiled(x, y).clone()
            opt.step()
            opt.zero_grad(set_to_none=True)
            print(f"step r{r}s{i} {float(loss):.6f}")


if __name__ == "__main__":
    main()
