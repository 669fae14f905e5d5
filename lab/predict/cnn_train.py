"""cnn_train.py - a ResNet-18 (torchvision) trained with SGD and momentum, fp32, channels first.

One of lab/predict's programs (run unmodified, for real and under gpusim's capture). cuDNN picks
its convolution algorithms and their workspaces on the device: what a capture cannot know.
"""
import argparse

import torch
import torch.nn.functional as F
import torchvision


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=100).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(args.steps):
        x = torch.randn(args.batch, 3, 224, 224, device="cuda")
        y = torch.randint(0, 100, (args.batch,), device="cuda")
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
