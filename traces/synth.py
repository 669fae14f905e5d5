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
  dataframe-then-torch
                    Two libraries on one 80 GiB GPU, one after the other. A data-frame library
                    (client "cupy": CuPy's memory pool) loads the columns of a table, joins
                    and groups it, about 55 GiB at its peak, and frees everything; its pool
                    keeps the memory cached. Then PyTorch (client "torch") loads a model's
                    weights and asks for 40 GiB at once, and trains a few steps. Nothing of
                    the data frame is in use, but with an allocator per library the device
                    has only what the first one did not cache: the story behind
                    "CUDA out of memory" between cuDF/CuPy and PyTorch.
  producer-consumer
                    Two libraries interleaved on one GPU (15 GiB by default): each step a
                    producer (client "cupy") makes a batch and scratch buffers of varying
                    size, a consumer (client "torch") computes on it with activations of
                    varying size, then both free what they made. About 12 GiB is live at the
                    peak; each allocator's cache grows to its own high-water marks in pieces
                    the other cannot use, so with an allocator each the device runs out.

Every trace is deterministic for its options (--seed drives the random layer widths), and is
written whole (temporary file, then rename); gzip-compressed when OUTPUT ends in ".gz", with a
zero timestamp so the same options always give the same bytes. OUTPUT "-" is stdout. Exit 0
when the trace is written, 2 on any error (bad usage, a size past what a trace holds, a device
past 2^44 bytes, an output that cannot be written), with one line on stderr.

Examples:
  python3 traces/synth.py batch-alternate -o /tmp/alt.gstrace
  build/gpusim replay /tmp/alt.gstrace --policy pytorch --policy pytorch:expandable_segments:True
  python3 traces/synth.py dataframe-then-torch -o /tmp/story.gstrace
  build/gpusim replay /tmp/story.gstrace --clients separate,shared,cooperative \
      --policy pytorch --policy cupy=cupy

Standard library only.
"""

import argparse
import os
import random
import sys

# The converter's package, gsconvert (the project's writer and limits), found as traces/convert.py
# finds it: beside this script in the source tree, in ../share/gpusim once installed (this
# script is then BINDIR/gpusim-synth, the package in DATADIR/gpusim).
_HERE = os.path.dirname(os.path.realpath(__file__))
_INSTALLED = os.path.join(_HERE, "..", "share", "gpusim")
if (not os.path.isdir(os.path.join(_HERE, "gsconvert"))
        and os.path.isdir(os.path.join(_INSTALLED, "gsconvert"))):
    # (no __pycache__ written into the installed tree: it stays what meson installed)
    sys.dont_write_bytecode = True
    _HERE = _INSTALLED
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
from gsconvert.model import ConvertError, EXIT_ERROR, MAX_DEVICE_BYTES, U64_LIMIT  # noqa: E402
from gsconvert.cli import _OneLineParser  # noqa: E402
from gsconvert.output import maybe_gzip, write_whole  # noqa: E402

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
        if size >= U64_LIMIT:  # the trace's size column is 64 bits: gpusim would refuse the file
            raise ConvertError(f"a request of {size} bytes: more than a trace can hold (2^64 - 1); "
                               f"choose smaller sizes")
        ident = self.next_id
        self.next_id += 1
        self._emit("alloc", ident, size, client, stream)
        return ident

    def free(self, ident, size, client="torch", stream=0):
        self._emit("free", ident, size, client, stream)

    def mark(self, n, client="torch"):
        self._emit("mark", 0, n, client)

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


def gib_sizes(rng, total, parts, unit=512):
    """parts sizes, multiples of unit, that vary around total/parts and sum to about total."""
    weights = [rng.uniform(0.6, 1.4) for _ in range(parts)]
    scale = total / sum(weights)
    return [max(unit, int(w * scale) // unit * unit) for w in weights]


def dataframe_then_torch(args):
    rng = random.Random(args.seed)
    w = Writer(
        f"synth dataframe-then-torch frame={args.frame_gib}GiB torch={args.torch_gib}GiB "
        f"columns={args.columns} seed={args.seed}",
        args.device_total,
    )
    df = "cupy"
    # The data frame: columns (about 55% of the frame), then a join's hash table and output
    # and a group-by's partial results (the rest), with small masks and indices between.
    w.mark(0, df)
    frame = args.frame_gib * GiB
    columns = [(w.alloc(sz, df), sz) for sz in gib_sizes(rng, frame * 0.55, args.columns)]
    work = []
    for step, sz in enumerate(gib_sizes(rng, frame * 0.45, args.columns // 2)):
        mask = rng.randrange(64, 4096) * KiB
        m = w.alloc(mask, df)
        work.append((w.alloc(sz, df), sz))
        w.free(m, mask, df)
        if step % 3 == 2:  # a group-by step reuses the space of an earlier partial result
            ident, size = work.pop(0)
            w.free(ident, size, df)
            work.append((w.alloc(size - size // 4 // 512 * 512, df), size - size // 4 // 512 * 512))
    for ident, size in reversed(work):
        w.free(ident, size, df)
    for ident, size in reversed(columns):
        w.free(ident, size, df)
    # PyTorch: the model's weights, the one large request, then training steps.
    w.mark(1)
    weights = [(w.alloc(sz), sz) for sz in gib_sizes(rng, args.weights_gib * GiB, 64)]
    big = args.torch_gib * GiB
    big_id = w.alloc(big)
    for it in range(args.steps):
        w.mark(2 + it)
        acts = [(w.alloc(sz), sz) for sz in gib_sizes(rng, GiB, 32)]
        for ident, size in reversed(acts):
            w.free(ident, size)
    w.free(big_id, big)
    for ident, size in reversed(weights):
        w.free(ident, size)
    return w


def producer_consumer(args):
    rng = random.Random(args.seed)
    w = Writer(
        f"synth producer-consumer steps={args.steps} seed={args.seed}", args.device_total)
    prod, cons = "cupy", "torch"
    weights = [(w.alloc(sz, cons), sz) for sz in gib_sizes(rng, GiB, 16)]
    for it in range(args.steps):
        w.mark(it)
        batch = rng.randrange(args.min_batch_mib, args.max_batch_mib + 1) * MiB
        b = w.alloc(batch, prod)
        scratch = [(w.alloc(sz, prod), sz) for sz in gib_sizes(rng, batch // 2, 3)]
        for ident, size in scratch:
            w.free(ident, size, prod)
        acts = [(w.alloc(sz, cons), sz)
                for sz in gib_sizes(rng, batch * rng.uniform(1.0, 2.0), 8)]
        for ident, size in reversed(acts):
            w.free(ident, size, cons)
        w.free(b, batch, prod)
    for ident, size in reversed(weights):
        w.free(ident, size, cons)
    return w


def positive(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"'{text}' must be > 0")
    return v


def device_bytes(text):
    v = positive(text)
    if v > MAX_DEVICE_BYTES:
        raise argparse.ArgumentTypeError(f"'{text}' is more than gpusim simulates (2^44 bytes)")
    return v


def main(argv=None):
    p = _OneLineParser(
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
    a.add_argument("--device-total", type=device_bytes, default=80 * GiB,
                   help="device_total_bytes header (default 80 GiB)")
    d = sub.add_parser("dataframe-then-torch",
                       help="a data-frame library caches ~55 GiB, then PyTorch asks for 40 GiB")
    d.add_argument("--frame-gib", type=positive, default=55,
                   help="the data frame's peak, GiB (default 55)")
    d.add_argument("--columns", type=positive, default=24, help="columns (default 24)")
    d.add_argument("--weights-gib", type=positive, default=2,
                   help="PyTorch's model weights, GiB (default 2)")
    d.add_argument("--torch-gib", type=positive, default=40,
                   help="PyTorch's one large request, GiB (default 40)")
    d.add_argument("--steps", type=positive, default=3, help="training steps (default 3)")
    d.add_argument("--seed", type=int, default=1, help="seed of the sizes (default 1)")
    d.add_argument("--device-total", type=device_bytes, default=80 * GiB,
                   help="device_total_bytes header (default 80 GiB)")
    c = sub.add_parser("producer-consumer",
                       help="two libraries interleaved: a producer's batches, a consumer's activations")
    c.add_argument("--steps", type=positive, default=40, help="steps (default 40)")
    c.add_argument("--min-batch-mib", type=positive, default=1024,
                   help="smallest batch, MiB (default 1024)")
    c.add_argument("--max-batch-mib", type=positive, default=4096,
                   help="largest batch, MiB (default 4096)")
    c.add_argument("--seed", type=int, default=1, help="seed of the sizes (default 1)")
    c.add_argument("--device-total", type=device_bytes, default=15 * GiB,
                   help="device_total_bytes header (default 15 GiB)")
    for sp in (a, d, c):
        sp.add_argument("-o", "--output", required=True, help="output file (.gz: compressed; -: stdout)")
    args = p.parse_args(argv)
    if args.scenario == "batch-alternate" and args.min_kib > args.max_kib:
        p.error("--min-kib must not exceed --max-kib")
    if args.scenario == "producer-consumer" and args.min_batch_mib > args.max_batch_mib:
        p.error("--min-batch-mib must not exceed --max-batch-mib")

    try:
        w = {"batch-alternate": batch_alternate, "dataframe-then-torch": dataframe_then_torch,
             "producer-consumer": producer_consumer}[args.scenario](args)
        write_whole(args.output, maybe_gzip(args.output, w.text()))  # "-": stdout
    except ConvertError as e:
        print(f"synth.py: {e}", file=sys.stderr)
        return EXIT_ERROR
    return 0


if __name__ == "__main__":
    sys.exit(main())
