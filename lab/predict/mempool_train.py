"""mempool_train.py - MLP training with a phase inside a torch.cuda.MemPool.

One of lab/predict's programs (run unmodified, for real and under gpusim's allocator): training
steps, then evaluation buffers and no-grad forwards made inside torch.cuda.use_mem_pool (the
pool's own segments), used after the block, freed, the pool deleted, and training again with a
larger batch. What the pool held must go back to the ordinary pools only once the pool is gone.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=6)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2048, 8192), nn.GELU(), nn.Linear(8192, 8192), nn.GELU(),
                          nn.Linear(8192, 2048)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def train(tag, batch):
        for i in range(args.steps):
            x = torch.randn(batch, 2048, device="cuda")
            y = torch.randn(batch, 2048, device="cuda")
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            print(f"step {tag}{i} {float(loss):.6f}")

    train("a", 1024)
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        buffers = [torch.empty(n, 8192, device="cuda") for n in (4096, 1024, 3000, 64)]
        with torch.no_grad():
            outs = [model(torch.randn(n, 2048, device="cuda")) for n in (256, 2048, 512, 4096)]
    # used outside the block: the memory stays the pool's
    total = sum(float(o.float().sum()) for o in outs) + sum(float(b.zero_().sum()) for b in buffers)
    print(f"eval {total:.3f}")
    del buffers, outs
    train("b", 1536)
    torch.cuda.synchronize()
    del pool
    train("c", 2048)


if __name__ == "__main__":
    main()
