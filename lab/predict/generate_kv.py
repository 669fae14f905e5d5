"""generate_kv.py - LLM-style generation with a KV cache that grows a token at a time, bf16.

One of lab/predict's programs (run unmodified, for real and under gpusim's capture). Prompts of
seeded lengths and batch sizes; greedy decoding of a fixed number of new tokens, the cache grown
with torch.cat as simple generation loops do.
"""
import argparse
import random

import torch
import torch.nn as nn
import torch.nn.functional as F


class Layer(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, cache):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        if cache is not None:
            k, v = torch.cat((cache[0], k), dim=2), torch.cat((cache[1], v), dim=2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)))), (k, v)


class Decoder(nn.Module):
    def __init__(self, vocab, d, heads, layers, ctx):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.layers = nn.ModuleList(Layer(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx, start, caches):
        pos = torch.arange(start, start + idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        new = []
        for layer, c in zip(self.layers, caches):
            x, c = layer(x, c)
            new.append(c)
        return self.head(self.ln(x[:, -1:])), new


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--prompts", type=int, default=6)
    ap.add_argument("--new-tokens", type=int, default=48)
    args = ap.parse_args()
    torch.manual_seed(0)
    rnd = random.Random(1)
    model = Decoder(32000, 1024, 16, 12, 2048).to("cuda", torch.bfloat16).eval()
    with torch.inference_mode():
        for p in range(args.prompts):
            batch, length = rnd.choice((1, 4, 8, 16)), rnd.choice((64, 200, 500, 1000))
            idx = torch.randint(0, 32000, (batch, length), device="cuda")
            logits, caches = model(idx, 0, [None] * len(model.layers))
            out = [idx]
            for i in range(args.new_tokens):
                nxt = logits[:, -1].argmax(-1, keepdim=True)
                out.append(nxt)
                logits, caches = model(nxt, length + i, caches)
            text = torch.cat(out, dim=1)
            print(f"prompt {p}: batch {batch} length {length} -> {tuple(text.shape)}")
            del caches, logits, text, out


if __name__ == "__main__":
    main()
