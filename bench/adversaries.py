#!/usr/bin/env python3
"""adversaries.py OUTDIR [--seed N]... - synthetic programs that aim at where a caching policy
loses memory: the four program shapes stitch must hold against expandable segments on besides
the recorded ones (docs/stitch.md, "Synthetic adversaries"). Writes OUTDIR/adv-sN-NAME.gstrace
for each and each seed (default 1), the same bytes for the same seed:

  varying-shapes  training whose batch of tokens changes every step (0.25 to 1 x the largest):
                  every activation of every layer changes size with it, freed in reverse in
                  the backward pass, with gradients and temporaries between. Segments cut for
                  one step's sizes fit the next step's badly.
  kv-cache        generation with continuous batching: sequences start and end at random
                  lengths, each layer's key/value cache of a sequence grows by a block of
                  tokens at a time (a larger copy made, the old freed: torch.cat), and each
                  token makes short-lived temporaries. Caches of every size live side by side.
  two-streams     a training loop on the default stream fed by a side stream: the side stream
                  allocates each batch and its staging buffers (sizes varying), the main
                  stream uses them, and their frees complete only later (record_stream: a
                  free, then its free_done). A block returns to its own stream's cache only.
  graph-pools     torch.compile's CUDA graphs by shape bucket: eager warm-up steps, then a
                  capture per bucket into a private pool of its own (activations kept by the
                  pool), replays that allocate nothing, and eager work between them (the
                  optimizer, the loss) in the ordinary pools; half the pools are released at
                  the end.

Sizes are multiples of 512 bytes, a device of 80 GiB is declared (the frontier searches the
capacity itself). Standard library only."""

import argparse
import os
import random
import sys

MiB = 1 << 20


class Trace:
    """A trace's rows, ids handed out in allocation order; version 3 once a pool op is written."""

    def __init__(self, name):
        self.name = name
        self.rows = []
        self.next_id = 1
        self.pools = False

    def _row(self, op, stream, ident, size):
        n = len(self.rows)
        self.rows.append(f"{n},{n},{op},torch,0,{stream},{ident},{size}")

    def alloc(self, size, stream=0):
        size = max(512, (int(size) + 511) // 512 * 512)
        ident = self.next_id
        self.next_id += 1
        self._row("alloc", stream, ident, size)
        return (ident, size)

    def free(self, block, stream=0):
        self._row("free", stream, block[0], block[1])
        return block

    def grow(self, block, size, stream=0):
        """block copied into a larger one (torch.cat): the new one made before the old goes."""
        new = self.alloc(size, stream)
        self.free(block, stream)
        return new

    def free_done(self, block, stream=0):
        self._row("free_done", stream, block[0], block[1])

    def empty_cache(self):
        self._row("empty_cache", 0, 0, 0)

    def pool(self, op, pool, stream=0, flag=0):
        self.pools = True
        self._row(op, stream, pool, flag)

    def text(self):
        head = [f"# gpusim-trace {3 if self.pools else 1}",
                f"# source: bench/adversaries.py {self.name}",
                f"# device_total_bytes: {80 << 30}",
                "seq,time_us,op,client,device,stream,id,size"]
        return "\n".join(head + self.rows) + "\n"


def layers_forward(t, rng, widths, scale, stream=0):
    """One forward pass: each layer's activation kept, a temporary made and freed."""
    acts = []
    for w in widths:
        tmp = t.alloc(w * scale * rng.uniform(0.5, 2.0), stream)
        acts.append(t.alloc(w * scale, stream))
        t.free(tmp, stream)
    return acts


def layers_backward(t, rng, acts, stream=0):
    """The backward pass: activations freed last layer first, a gradient made per layer."""
    grad = None
    for a in reversed(acts):
        g = t.alloc(a[1] * rng.uniform(0.8, 1.2), stream)
        if grad:
            t.free(grad, stream)
        t.free(a, stream)
        grad = g
    t.free(grad, stream)


def varying_shapes(rng):
    t = Trace("varying-shapes")
    widths = [rng.choice((4, 6, 8, 12, 16)) * MiB for _ in range(24)]
    weights = [t.alloc(rng.randint(2, 40) * MiB) for _ in range(30)]
    state = [t.alloc(w[1] * 2) for w in weights]     # the optimizer's moments
    for _ in range(60):
        scale = rng.uniform(0.25, 1.0)
        acts = layers_forward(t, rng, widths, scale)
        layers_backward(t, rng, acts)
        upd = [t.alloc(w[1]) for w in weights[:8]]   # the optimizer's temporaries
        for u in upd:
            t.free(u)
    for b in weights + state:
        t.free(b)
    return t


def kv_cache(rng):
    t = Trace("kv-cache")
    layers, per_token, block = 12, 96 * 1024, 32   # bytes a token a layer; tokens a growth
    weights = [t.alloc(rng.randint(8, 64) * MiB) for _ in range(20)]
    live = []       # [tokens, target, caches]
    started = 0
    for _ in range(2500):
        while len(live) < 8 and started < 160:
            n = rng.randint(16, 512)
            live.append([n, n + rng.randint(16, 1024),
                         [t.alloc(n * per_token) for _ in range(layers)]])
            started += 1
        if not live:
            break
        tmp = [t.alloc(len(live) * rng.randint(1, 4) * MiB) for _ in range(3)]
        for s in live:
            s[0] += 1
            if s[0] % block == 0:                  # grow every cache by a block of tokens
                s[2] = [t.grow(c, (s[0] + block) * per_token) for c in s[2]]
        for b in tmp:
            t.free(b)
        for s in [s for s in live if s[0] >= s[1]]:
            for c in s[2]:
                t.free(c)
            live.remove(s)
    for s in live:
        for c in s[2]:
            t.free(c)
    for w in weights:
        t.free(w)
    return t


def two_streams(rng):
    t = Trace("two-streams")
    side = 7
    widths = [rng.choice((2, 4, 8, 16)) * MiB for _ in range(16)]
    weights = [t.alloc(rng.randint(4, 32) * MiB) for _ in range(16)]
    waiting = []    # frees of batches whose completion is still to come
    for _ in range(80):
        batch = t.alloc(rng.randint(16, 96) * MiB, side)      # made on the side stream
        staging = t.alloc(rng.randint(1, 24) * MiB, side)
        t.free(staging, side)
        acts = layers_forward(t, rng, widths, rng.uniform(0.4, 1.0))
        layers_backward(t, rng, acts)
        waiting.append(t.free(batch, side))                  # used on the main stream
        if len(waiting) > 2:
            t.free_done(waiting.pop(0), side)
    for b in waiting:
        t.free_done(b, side)
    for w in weights:
        t.free(w)
    return t


def graph_pools(rng):
    t = Trace("graph-pools")
    widths = [rng.choice((4, 8, 12)) * MiB for _ in range(20)]
    weights = [t.alloc(rng.randint(4, 48) * MiB) for _ in range(24)]
    buckets = [0.25, 0.5, 0.75, 1.0]
    for scale in buckets:                            # eager warm-up at each shape
        layers_backward(t, rng, layers_forward(t, rng, widths, scale))
    kept = {}
    for pool, scale in enumerate(buckets, 1):        # a capture per bucket, into its pool
        t.pool("pool_begin", pool, stream=pool)
        acts = layers_forward(t, rng, widths, scale, stream=pool)
        out = t.alloc(widths[-1] * scale, pool)
        for a in acts[:-4]:
            t.free(a, pool)
        kept[pool] = acts[-4:] + [out]
        t.pool("pool_end", pool, stream=pool)
    for _ in range(40):                              # replays, and eager work between
        loss = t.alloc(rng.randint(1, 8) * MiB)
        upd = [t.alloc(w[1]) for w in weights[:6]]
        for b in upd + [loss]:
            t.free(b)
    for pool in (1, 3):                              # two graphs let go
        for b in kept[pool]:
            t.free(b, pool)
        t.pool("pool_release", pool, stream=pool)
    t.empty_cache()
    for _ in range(10):
        layers_backward(t, rng, layers_forward(t, rng, widths, 1.0))
    for w in weights:
        t.free(w)
    return t


PROGRAMS = {"varying-shapes": varying_shapes, "kv-cache": kv_cache,
            "two-streams": two_streams, "graph-pools": graph_pools}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--seed", type=int, action="append")
    args = ap.parse_args(argv)
    os.makedirs(args.outdir, exist_ok=True)
    for seed in args.seed or [1]:
        for name, make in PROGRAMS.items():
            text = make(random.Random(f"{seed}:{name}")).text()
            path = os.path.join(args.outdir, f"adv-s{seed}-{name}.gstrace")
            with open(path + ".tmp", "w") as f:
                f.write(text)
            os.replace(path + ".tmp", path)
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
