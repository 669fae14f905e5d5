"""gpt_varlen.py - a GPT-style decoder trained on batches of varying length, bf16 autocast.

One of lab/predict's programs: plain PyTorch, no gpusim in it, run unmodified for real and under
gpusim's capture (lab/device_predict.sh). Seeded: the lengths are the same in every run.
"""
import argparse
import random

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, d, heads, layers, ctx):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args()
    torch.manual_seed(0)
    rnd = random.Random(0)
    dev = "cuda"
    model = GPT(32000, 768, 12, 8, 1024).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for step in range(args.steps):
        t = rnd.choice((256, 384, 512, 768, 1024))
        idx = torch.randint(0, 32000, (args.batch, t + 1), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(idx[:, :-1])
            loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]),
                                   idx[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step} len {t} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
