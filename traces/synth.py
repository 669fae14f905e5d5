#!/usr/bin/env python3
"""Synthetic allocation traces for scenarios no recorded trace shows on its own.

Usage:
  python3 traces/synth.py SCENARIO [options] -o OUTPUT

Scenarios:
  batch-alternate   The case from PyTorch's note on expandable segments
                    (c10/cuda/CUDACachingAllocator.cpp, "Note [Expandable Segments]"): a model
                    of many layers runs with a batch size that alternates between N and N+1.
                    Each layer saves a narrow activation (batch x a) and a wide one
                    (batch x a x k) for the backward pass, which frees them all, last layer
                    first. With cudaMalloc segments, the N+1 requests only partly fit the
                    segments cut for N, and every layer leaves a free sliver at the end of a
                    segment that no later request of that layer can use; the allocator must
                    cudaMalloc again. An expandable segment lets the frees coalesce into one
                    range, so its peak reserved stays near the peak of live memory.

Every trace is deterministic for its options (--seed drives the random layer widths), and is
written whole (temporary file, then rename); gzip-compressed when OUTPUT ends in ".gz", with a
zero timestamp so the same options always give the same bytes. OUTPUT "-" is stdout.

Example:
  python3 traces/synth.py batch-alternate -o /tmp/alt.gstrace
  build/gpusim replay /tmp/alt.gstrace --policy pytorch --policy pytorch:expandable_segments:True

Standard library only.
"""

import argparse
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from convert import ConvertError, maybe_gzip, write_whole  # noqa: E402  (the project's writer)

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


class Writer:
    """Accumulates trace events; ids are handed out in allocation order."""

    def __init__(self, source, device_total):
        self.lines = [
            "# gpusim-trace 1",
            f"# source: {source}",
            f"# device_total_bytes: {device_total}",
            "seq,time_us,op,client,device,stream,id,size",
        ]
        self.seq = 0
        self.next_id = 1

    def _emit(self, op, ident, size, client="torch", stream=0):
        # A microsecond per event: the traces model order, not timing.
        self.lines.append(f"{self.seq},{self.seq},{op},{client},0,{stream},{ident},{size}")
        self.seq += 1

    def alloc(self, size, client="torch", stream=0):
        ident = self.next_id
        self.next_id += 1
        self._emit("alloc", ident, size, client, stream)
        return ident

    def free(self, ident, size, client="torch", stream=0):
        self._emit("free", ident, size, client, stream)

    def mark(self, n):
        self._emit("mark", 0, n)

    def text(self):
        return ("\n".join(self.lines) + "\n").encode()


def batch_alternate(args):
    rng = random.Random(args.seed)
    # Per-sample bytes of each layer's narrow activation, in 4 KiB steps, and the factor that
    # makes the wide one: fixed per layer, as a model's shapes are.
    layers = []
    for _ in range(args.layers):
        narrow = rng.randrange(args.min_kib, args.max_kib + 1, 4) * KiB
        layers.append((narrow, rng.randint(2, 6)))
    w = Writer(
        f"synth batch-alternate layers={args.layers} batch={args.batch} "
        f"iterations={args.iterations} seed={args.seed}",
        args.device_total,
    )
    for it in range(args.iterations):
        w.mark(it)
        b = args.batch + (it % 2)
        saved = []
        for narrow, k in layers:  # forward: save both activations of every layer
            for size in (b * narrow, b * narrow * k):
                saved.append((w.alloc(size), size))
        for ident, size in reversed(saved):  # backward: free them, last layer first
            w.free(ident, size)
    return w


def positive(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"'{text}' must be > 0")
    return v


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="synth.py",
        description="Write a synthetic gpusim trace.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("Scenarios:")[1].split("Every trace")[0].rstrip(),
    )
    sub = p.add_subparsers(dest="scenario", required=True, metavar="SCENARIO")
    a = sub.add_parser("batch-alternate", help="batch size alternating between N and N+1")
    a.add_argument("--layers", type=positive, default=48, help="layers (default 48)")
    a.add_argument("--batch", type=positive, default=8, help="N: batches alternate N, N+1 (default 8)")
    a.add_argument("--iterations", type=positive, default=8, help="iterations (default 8)")
    a.add_argument("--min-kib", type=positive, default=1024,
                   help="smallest per-sample narrow activation, KiB (default 1024)")
    a.add_argument("--max-kib", type=positive, default=4096,
                   help="largest per-sample narrow activation, KiB (default 4096)")
    a.add_argument("--seed", type=int, default=1, help="seed of the layer widths (default 1)")
    a.add_argument("--device-total", type=positive, default=80 * GiB,
                   help="device_total_bytes header (default 80 GiB)")
    for sp in (a,):
        sp.add_argument("-o", "--output", required=True, help="output file (.gz: compressed; -: stdout)")
    args = p.parse_args(argv)
    if args.scenario == "batch-alternate" and args.min_kib > args.max_kib:
        p.error("--min-kib must not exceed --max-kib")

    w = batch_alternate(args)
    data = maybe_gzip(args.output, w.text())
    if args.output == "-":
        sys.stdout.buffer.write(data)
    else:
        try:
            write_whole(args.output, data)
        except ConvertError as e:
            print(f"synth.py: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
