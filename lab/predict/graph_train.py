"""graph_train.py - an MLP training step captured once with torch.cuda.graph, then replayed.

One of lab/predict's programs (run unmodified, for real and under gpusim's capture), as
PyTorch's CUDA graphs documentation shows it: warm-up on a side stream, capture of forward,
backward and optimizer step into the graph's private pool, replays with new data copied into the
static input.
"""
import argparse

import torch
import torch.nn as nn


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--replays", type=int, default=20)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2048, 8192), nn.ReLU(), nn.Linear(8192, 8192), nn.ReLU(),
                          nn.Linear(8192, 1000)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    static_x = torch.randn(512, 2048, device="cuda")
    static_y = torch.randint(0, 1000, (512,), device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            loss_fn(model(static_x), static_y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_loss = loss_fn(model(static_x), static_y)
        static_loss.backward()
        opt.step()
    for i in range(args.replays):
        static_x.copy_(torch.randn(512, 2048, device="cuda"))
        static_y.copy_(torch.randint(0, 1000, (512,), device="cuda"))
        g.replay()
    # eager evaluation beside the graph's pool
    with torch.no_grad():
        big = torch.randn(4096, 2048, device="cuda")
        print("eval", model(big).shape, float(static_loss))


if __name__ == "__main__":
    main()
