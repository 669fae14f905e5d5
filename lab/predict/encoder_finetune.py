"""encoder_finetune.py - a Transformer encoder classifier fine-tuned with gradient accumulation.

One of lab/predict's programs (run unmodified, for real and under gpusim's capture):
nn.TransformerEncoder with dropout, Adam, two micro-batches per step, and an evaluation pass
under torch.no_grad every fourth step with a larger batch.
"""
import argparse

import torch
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self, vocab=30000, d=768, layers=6, classes=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, 12, 3072, dropout=0.1, batch_first=True,
                                           norm_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.cls = nn.Linear(d, classes)

    def forward(self, idx):
        return self.cls(self.enc(self.emb(idx)).mean(dim=1))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=8)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = Classifier().cuda()
    opt = torch.optim.Adam(model.parameters(), lr=2e-5)
    lossf = nn.CrossEntropyLoss()
    for step in range(args.steps):
        model.train()
        for micro in range(2):
            idx = torch.randint(0, 30000, (16, 384), device="cuda")
            y = torch.randint(0, 4, (16,), device="cuda")
            (lossf(model(idx), y) / 2).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 4 == 3:
            model.eval()
            with torch.no_grad():
                idx = torch.randint(0, 30000, (64, 384), device="cuda")
                acc = (model(idx).argmax(-1) == 0).float().mean()
            print(f"step {step} eval {acc.item():.3f}")


if __name__ == "__main__":
    main()
