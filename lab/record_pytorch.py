#!/usr/bin/env python3
"""Record real PyTorch CUDA-caching-allocator reference runs for gpusim.

Each scenario is a small seeded fp32 program run on a real GPU with the allocator's history
recorded from before its first allocation:

    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                             max_entries=MAX_ENTRIES)

and leaves two files in --out, named WORKLOAD__POLICY__CAP like ../shared/traces/pytorch-2.11-h100:

    NAME.pickle.gz  gzipped torch.cuda.memory._snapshot() (what traces/convert.py reads)
    NAME.json       what the run reported: workload, conf (PYTORCH_CUDA_ALLOC_CONF), cap_gib,
                    total_bytes, torch, device, outcome ("ok", or "oom" with "error": the text),
                    iter_seconds, memory_stats (device 0) and memory_stats_by_device
                    {"0": {...}, "1": {...}} for every device used, mem_get_info, n_trace_events,
                    trace_actions (count of each action), plus a "details" object that says
                    what this scenario did (batch sizes, markers, attempts).

POLICY is "default" (PYTORCH_CUDA_ALLOC_CONF unset) or "expandable_segments"
("expandable_segments:True"); CAP is "nocap" or the GiB the allocator may reserve, set with
torch.cuda.set_per_process_memory_fraction(CAP * 2**30 / total_memory). PyTorch reads
PYTORCH_CUDA_ALLOC_CONF once per process, so this script runs every scenario x policy in a
fresh child process of itself (the hidden --child mode) and only orchestrates in the parent.

Scenarios (--list prints them):
  sidestream  MLP training; batches made on a side stream and used on the main stream
              (record_stream), activations read on a second side stream (record_stream): deferred
              frees (free_requested ... later free_completed); exactly one
              torch.cuda.empty_cache() after step 12, then 12 more steps.
  oomdie      MLP training with a batch that grows 1.3x a step under a 1.5 GiB cap until it
              runs out of memory; an OOM observer (torch._C._cuda_attach_out_of_memory_observer)
              takes the snapshot and memory_stats at the OOM, as users do; the child then exits
              with the error (exit status 3). outcome "oom".
  oomcatch    a batch-size finder under a 2 GiB cap: each try a full training step; tries
              65536, halves on torch.OutOfMemoryError, bisects between the last good and bad
              batch, then trains 8 steps with the batch found (an OOM there is caught too and
              the batch cut to 7/8). outcome "ok", num_ooms > 0.
  cut         200 MLP training steps (tens of thousands of events) recorded with
              max_entries=2000: the snapshot holds only the tail of the run.
  llmgen      LLM-style generation with a KV cache (Hugging Face GPT-2, random weights, fp32;
              a hand-written decoder if transformers is missing) over prompts of varied length
              and batch, until about 400k trace events (default policy only).
  graph       a whole training step captured with torch.cuda.graph (warm-up on a side stream as
              PyTorch's docs show), then eager allocations around g.replay() calls.
  graphpool   two graphs sharing one private pool (pool=g1.pool()), replayed in capture order,
              with eager work around them; then the graphs are deleted.
  mempool     eager training, then one phase inside torch.cuda.use_mem_pool(torch.cuda.MemPool()),
              the pool's tensors used and freed outside it, the pool deleted, more training.
  twogpu      model parallel in one process: half the layers on cuda:0, half on cuda:1, AdamW,
              8 steps, caps 2.5 GiB on cuda:0 and 2 GiB on cuda:1 (needs 2 GPUs; not in --all).
  sidecnn     torchvision ResNet-18 trained on 160x160 images with batches made on a side stream
              (record_stream), cudnn.benchmark (cuDNN tries workspaces; under a cap the tries
              fail with OOMs PyTorch catches), batch 96/128/64/112, one empty_cache; under the
              default, expandable segments and max_split_size_mb:128, without a cap and at
              0.9 of that policy's own uncapped peak (not in --all).
  compiled    a 4-layer transformer encoder trained under torch.compile(mode="reduce-overhead"):
              CUDA-graph trees in private pools, two shapes (each its own graph); without a
              cap and at 0.97 of the uncapped peak (not in --all).

Examples:
  python3 lab/record_pytorch.py --list
  python3 lab/record_pytorch.py --all --out refs            # every single-GPU scenario
  python3 lab/record_pytorch.py --scenario oomdie --scenario cut --policy default --out refs
  python3 lab/record_pytorch.py --scenario twogpu --out refs   # on a machine with 2 GPUs
  python3 lab/record_pytorch.py --all --dry-run               # print the plan, run nothing
  python3 traces/convert.py refs/cut__default__nocap.pickle.gz -o /tmp/cut.gstrace.gz \\
      --reference /tmp/cut.ref.json                              # then convert one

The parent writes DIR/summary.json (one entry per child: name, exit status, outcome, seconds)
and prints one line per child. A child's exit status: 0 ok, 3 the run ended in an OOM (expected
for oomdie), anything else a failure (its traceback is in its log, DIR/NAME.log).
Needs PyTorch with CUDA on the machine where it runs (the children import it); the parent
itself imports only the standard library.
"""

import argparse
import collections
import gc
import gzip
import json
import os
import pickle
import subprocess
import sys
import time
import traceback

GiB = 1 << 30
POLICIES = {"default": "", "expandable_segments": "expandable_segments:True",
            "max_split_size_mb": "max_split_size_mb:128"}
BOTH = ("default", "expandable_segments")
THREE = ("default", "expandable_segments", "max_split_size_mb")
DEFAULT_MAX_ENTRIES = 5_000_000
EXIT_OOM = 3

# name -> (policies, cap_gib, max_entries, child timeout s, in --all). cap_gib: None (no cap), a
# float, {device: float}, or a list of caps run in turn under each policy, where a string "xF"
# is F times the peak reserved of the same scenario and policy run without a cap (recorded
# first, in the same folder), rounded to 0.01 GiB: caps near a program's own peak.
SCENARIOS = collections.OrderedDict([
    ("sidestream", (BOTH, None, DEFAULT_MAX_ENTRIES, 150, True)),
    ("oomdie", (BOTH, 1.5, DEFAULT_MAX_ENTRIES, 150, True)),
    ("oomcatch", (BOTH, 2.0, DEFAULT_MAX_ENTRIES, 150, True)),
    ("cut", (BOTH, None, 2000, 150, True)),
    ("graph", (BOTH, None, DEFAULT_MAX_ENTRIES, 150, True)),
    ("graphpool", (BOTH, None, DEFAULT_MAX_ENTRIES, 150, True)),
    ("mempool", (BOTH, None, DEFAULT_MAX_ENTRIES, 150, True)),
    ("llmgen", (("default",), None, DEFAULT_MAX_ENTRIES, 300, True)),
    ("twogpu", (("default",), {0: 2.5, 1: 2.0}, DEFAULT_MAX_ENTRIES, 200, False)),
    ("sidecnn", (THREE, [None, "x0.9"], DEFAULT_MAX_ENTRIES, 240, False)),
    ("compiled", (BOTH, [None, "x0.97"], DEFAULT_MAX_ENTRIES, 400, False)),
])

LLMGEN_TARGET_EVENTS = 400_000


def cap_label(cap):
    if cap is None:
        return "nocap"
    if isinstance(cap, dict):
        return "+".join(f"{cap[d]:g}" for d in sorted(cap))
    return f"{cap:g}"


def run_name(scenario, policy, cap=None):
    """cap: the run's own (a scenario with a list of caps); else the scenario's one cap."""
    if cap is None and not isinstance(SCENARIOS[scenario][1], list):
        cap = SCENARIOS[scenario][1]
    return f"{scenario}__{policy}__{cap_label(cap)}"


def scenario_caps(scenario):
    cap = SCENARIOS[scenario][1]
    return cap if isinstance(cap, list) else [cap]


def resolve_cap(scenario, policy, cap, out):
    """A cap "xF": F times the peak reserved of this scenario and policy without a cap, as that
    run recorded it in out (None when it has not run or failed)."""
    if not isinstance(cap, str):
        return cap
    path = os.path.join(out, run_name(scenario, policy, None) + ".json")
    try:
        with open(path) as f:
            peak = json.load(f)["memory_stats"]["reserved_bytes.all.peak"]
    except (OSError, KeyError, ValueError):
        return None
    return round(float(cap[1:]) * peak / GiB, 2)


# =============================================================================================
# Child side: one scenario under one policy, in its own process.
# =============================================================================================

class Ctx:
    """What every scenario shares: the cap, the recording, the markers, the output files."""

    def __init__(self, torch, scenario, policy, out, cap=None):
        self.torch = torch
        self.scenario, self.policy, self.out = scenario, policy, out
        _, scap, self.max_entries, _, _ = SCENARIOS[scenario]
        cap = cap if isinstance(scap, list) else scap
        self.caps = cap if isinstance(cap, dict) else ({0: cap} if cap is not None else {})
        self.cap = cap
        self.devices = [0, 1] if scenario == "twogpu" else [0]
        self.name = run_name(scenario, policy, cap)
        self.iter_seconds = []
        self.details = {}
        self.snapshot_taken = False      # set once the snapshot file is written (OOM observer)
        self.oom_state = None            # memory_stats etc. captured in the OOM observer

    def path(self, ext):
        return os.path.join(self.out, self.name + ext)

    def start(self):
        torch = self.torch
        if not torch.cuda.is_available():
            raise SystemExit("no CUDA device visible to PyTorch")
        if torch.cuda.device_count() < len(self.devices):
            raise SystemExit(f"{self.scenario} needs {len(self.devices)} GPUs; "
                             f"{torch.cuda.device_count()} visible")
        torch.manual_seed(0)
        # The cap before the recording, as the shared reference runs did; neither allocates.
        for d, cap in self.caps.items():
            total = torch.cuda.get_device_properties(d).total_memory
            torch.cuda.set_per_process_memory_fraction(cap * GiB / total, device=d)
        torch.cuda.memory._record_memory_history(
            enabled="all", context=None, stacks="python", max_entries=self.max_entries)

    def mark(self, label):
        """Tag the trace entries that follow with user_metadata (a phase name), where this
        PyTorch has it; convert.py ignores the field, a reader of the pickle can use it."""
        f = getattr(self.torch.cuda.memory, "_set_memory_metadata", None)
        if f is not None:
            f(label)
        self.details.setdefault("markers", []).append(label)

    def count_events_now(self):
        """Trace events recorded so far, per device (takes a snapshot: small traces only)."""
        s = self.torch.cuda.memory._snapshot()
        return [len(t) for t in s["device_traces"]]

    def stats(self):
        torch = self.torch
        by_dev = {str(d): dict(torch.cuda.memory_stats(d)) for d in self.devices}
        info = {str(d): list(torch.cuda.mem_get_info(d)) for d in self.devices}
        return by_dev, info

    def write_snapshot(self, snap):
        tmp = self.path(".pickle.gz.tmp")
        with gzip.open(tmp, "wb", compresslevel=9) as f:
            pickle.dump(snap, f)
        os.replace(tmp, self.path(".pickle.gz"))
        self.snapshot_taken = True

    def finish(self, outcome, error=None):
        torch = self.torch
        if self.oom_state is not None:
            by_dev, info, snap_counts = self.oom_state
        else:
            for d in self.devices:
                torch.cuda.synchronize(d)
            by_dev, info = self.stats()
            snap_counts = None
        if not self.snapshot_taken:
            snap = torch.cuda.memory._snapshot()
            snap_counts = trace_counts(snap)
            self.write_snapshot(snap)
            del snap
        torch.cuda.memory._record_memory_history(enabled=None)
        n_events, actions, actions_by_dev = snap_counts
        props = torch.cuda.get_device_properties(0)
        doc = {
            "workload": self.scenario,
            "conf": POLICIES[self.policy],
            "cap_gib": (self.cap if not isinstance(self.cap, dict) else self.cap[0]),
            "total_bytes": props.total_memory,
            "torch": torch.__version__,
            "cuda_runtime": torch.version.cuda,
            "device": torch.cuda.get_device_name(0),
            "outcome": outcome,
        }
        if error is not None:
            doc["error"] = error
        if isinstance(self.cap, dict):
            doc["cap_gib_by_device"] = {str(d): c for d, c in self.cap.items()}
            doc["total_bytes_by_device"] = {
                str(d): torch.cuda.get_device_properties(d).total_memory for d in self.devices}
            doc["device_by_device"] = {str(d): torch.cuda.get_device_name(d) for d in self.devices}
        doc.update({
            "iter_seconds": self.iter_seconds,
            "memory_stats": by_dev["0"],
            "memory_stats_by_device": by_dev,
            "mem_get_info": info["0"],
            "mem_get_info_by_device": info,
            "max_entries": self.max_entries,
            "n_trace_events": n_events,
            "trace_actions": actions,
            "trace_actions_by_device": actions_by_dev,
            "details": self.details,
        })
        if self.oom_state is not None:
            doc["memory_stats_note"] = ("memory_stats, mem_get_info and the snapshot were taken "
                                        "in the OOM observer, at the OOM")
            at_exit, _ = self.stats()
            doc["memory_stats_at_exit_by_device"] = at_exit
        tmp = self.path(".json.tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, self.path(".json"))
        print(f"{self.name}: outcome {outcome}, {n_events} trace events, "
              f"peak reserved {by_dev['0'].get('reserved_bytes.all.peak', 0) / GiB:.3f} GiB, "
              f"retries {by_dev['0'].get('num_alloc_retries')}, "
              f"OOMs {by_dev['0'].get('num_ooms')}", flush=True)


def trace_counts(snap):
    traces = snap["device_traces"]
    by_dev = {}
    total = collections.Counter()
    for d, t in enumerate(traces):
        c = collections.Counter(e["action"] for e in t)
        if t:
            by_dev[str(d)] = dict(c)
        total.update(c)
    return sum(len(t) for t in traces), dict(total), by_dev


def mlp(nn, d_in, width, depth, d_out):
    layers, d = [], d_in
    for _ in range(depth):
        layers += [nn.Linear(d, width), nn.ReLU()]
        d = width
    layers.append(nn.Linear(d, d_out))
    return nn.Sequential(*layers)


def pool_repr(pool_id):
    """A pool id as JSON: PyTorch hands out (int, int) tuples; anything else as its repr."""
    try:
        return [int(v) for v in pool_id]
    except (TypeError, ValueError):
        return repr(pool_id)


def timed_step(ctx, fn, sync=True):
    t0 = time.perf_counter()
    r = fn()
    if sync:
        ctx.torch.cuda.synchronize()
    ctx.iter_seconds.append(time.perf_counter() - t0)
    return r


# --- scenarios ---------------------------------------------------------------------------------

def sc_sidestream(ctx):
    torch = ctx.torch
    F = torch.nn.functional
    dev = "cuda:0"
    d_in, width, depth, d_out = 1024, 2048, 4, 1024
    model = mlp(torch.nn, d_in, width, depth, d_out).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batches = [256, 512, 384, 768]
    steps, empty_at = 24, 12
    main = torch.cuda.current_stream()
    s_data, s_aux = torch.cuda.Stream(), torch.cuda.Stream()
    ctx.details.update(model=f"MLP {d_in}-{width}x{depth}-{d_out}, AdamW", batches=batches,
                       steps=steps, empty_cache_before_step=empty_at,
                       streams={"main": main.cuda_stream, "data": s_data.cuda_stream,
                                "aux": s_aux.cuda_stream},
                       iter_seconds_note="host time per step, no synchronize (a synchronize "
                                         "would complete every deferred free at once)")

    def produce(b):
        # The next batch is made on the data stream while the main stream trains.
        with torch.cuda.stream(s_data):
            raw = torch.randn(b, d_in, device=dev)
            x = (raw - raw.mean(dim=1, keepdim=True)) / (raw.std(dim=1, keepdim=True) + 1e-5)
            y = torch.randn(b, d_out, device=dev)
            del raw
        return x, y

    stats_hist = []
    ctx.mark("step0")
    nxt = produce(batches[0])
    for step in range(steps):
        if step == empty_at:
            ctx.details["events_before_empty_cache_by_device"] = ctx.count_events_now()
            ctx.mark("empty_cache")
            torch.cuda.empty_cache()
            ctx.mark(f"step{step}")
        t0 = time.perf_counter()
        main.wait_stream(s_data)
        x, y = nxt
        x.record_stream(main)
        y.record_stream(main)
        nxt = produce(batches[(step + 1) % len(batches)]) if step + 1 < steps else None
        out = model(x)
        loss = F.mse_loss(out, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        # Statistics of the activations on the aux stream: out is read there.
        s_aux.wait_stream(main)
        with torch.cuda.stream(s_aux):
            act = out.detach()
            st = torch.stack([act.square().mean(), act.abs().max()])
        out.record_stream(s_aux)
        stats_hist.append(st)
        if len(stats_hist) > 3:
            stats_hist.pop(0)
        del x, y, out, loss, act, st
        ctx.iter_seconds.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    ctx.details["last_stats"] = [float(v) for v in stats_hist[-1]]


def sc_oomdie(ctx):
    torch = ctx.torch
    F = torch.nn.functional
    dev = "cuda:0"
    d_in, width, depth, d_out = 1024, 2048, 6, 1024

    def observer(device, alloc, allowed_or_total, device_free):
        if ctx.snapshot_taken:
            return
        snap = torch.cuda.memory._snapshot()
        counts = trace_counts(snap)
        by_dev, info = ctx.stats()
        ctx.oom_state = (by_dev, info, counts)
        ctx.details["observer_args"] = {"device": device, "alloc": alloc,
                                        "allowed_or_total": allowed_or_total,
                                        "device_free": device_free}
        ctx.write_snapshot(snap)

    torch._C._cuda_attach_out_of_memory_observer(observer)
    model = mlp(torch.nn, d_in, width, depth, d_out).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    b = 2048
    done = []
    ctx.details.update(model=f"MLP {d_in}-{width}x{depth}-{d_out}, AdamW",
                       batch_rule="2048, then x1.3 rounded down to a multiple of 64, each step",
                       batches_done=done)
    for step in range(60):
        ctx.mark(f"step{step}")
        ctx.details["batch_at_oom"] = b

        def one():
            x = torch.randn(b, d_in, device=dev)
            y = torch.randn(b, d_out, device=dev)
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        timed_step(ctx, one)
        done.append(b)
        b = int(b * 1.3) // 64 * 64
    raise SystemExit("oomdie never ran out of memory: raise the batch growth or lower the cap")


def sc_oomcatch(ctx):
    torch = ctx.torch
    F = torch.nn.functional
    dev = "cuda:0"
    d_in, width, depth, d_out = 1024, 2048, 6, 1024
    model = mlp(torch.nn, d_in, width, depth, d_out).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    attempts = []
    ctx.details.update(model=f"MLP {d_in}-{width}x{depth}-{d_out}, AdamW",
                       finder="each try is one full training step (forward, backward, AdamW "
                              "step); try 65536; halve on OOM until a step fits; then 3 "
                              "bisection tries between the last fit and the last OOM (multiples "
                              "of 256); then 8 training steps with the largest fit, where an OOM "
                              "is caught too and the batch cut to 7/8 (multiple of 256)",
                       attempts=attempts)

    def train_step(b):
        x = torch.randn(b, d_in, device=dev)
        y = torch.randn(b, d_out, device=dev)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()

    def attempt(b, phase):
        ctx.mark(f"{phase}{b}")
        ok, err = False, None
        t0 = time.perf_counter()
        try:
            train_step(b)
            ok = True
        except torch.OutOfMemoryError as e:
            err = str(e).splitlines()[0]
        # Outside the except block: the traceback (and the tensors its frames hold) is gone.
        opt.zero_grad(set_to_none=True)
        gc.collect()
        attempts.append({"phase": phase, "batch": b, "fits": ok, "error": err})
        if phase == "train" and ok:
            ctx.iter_seconds.append(time.perf_counter() - t0)
        return ok

    b, bad = 65536, None
    while b >= 256 and not attempt(b, "try"):
        bad = b
        b //= 2
    if b < 256:
        raise SystemExit("oomcatch: nothing fits")
    good = b
    for _ in range(3):
        if bad is None:
            break
        mid = (good + bad) // 2 // 256 * 256
        if mid <= good:
            break
        if attempt(mid, "try"):
            good = mid
        else:
            bad = mid
    ctx.details["batch_found"] = good
    steps = 0
    while steps < 8:
        if attempt(good, "train"):
            steps += 1
        else:
            good = max(256, good * 7 // 8 // 256 * 256)
    ctx.details["batch_trained"] = good


def sc_cut(ctx):
    torch = ctx.torch
    F = torch.nn.functional
    dev = "cuda:0"
    d_in, width, depth, d_out = 512, 1024, 4, 512
    model = mlp(torch.nn, d_in, width, depth, d_out).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    batches = [128, 192, 256, 320, 96]
    steps = 200
    ctx.details.update(model=f"MLP {d_in}-{width}x{depth}-{d_out}, SGD momentum",
                       batches=batches, steps=steps)
    for step in range(steps):
        b = batches[step % len(batches)]

        def one():
            x = torch.randn(b, d_in, device=dev)
            y = torch.randn(b, d_out, device=dev)
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        timed_step(ctx, one)
    ctx.details["allocations_made"] = torch.cuda.memory_stats()["allocation.all.allocated"]


def _gpt2(ctx):
    import transformers
    torch = ctx.torch
    cfg = transformers.GPT2Config()          # GPT-2 small: 12 layers, 768 wide, 1024 positions
    model = transformers.GPT2LMHeadModel(cfg).to("cuda:0").eval()
    ctx.details["model"] = (f"Hugging Face GPT-2 small (random init), transformers "
                            f"{transformers.__version__}, generate(do_sample=False, "
                            f"use_cache=True)")

    def generate(ids, n_new):
        with torch.inference_mode():
            return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                  max_new_tokens=n_new, min_new_tokens=n_new, do_sample=False,
                                  use_cache=True, pad_token_id=cfg.eos_token_id)
    return generate, cfg.vocab_size, cfg.n_positions


def _handwritten_decoder(ctx):
    torch = ctx.torch
    nn, F = torch.nn, torch.nn.functional
    d, heads, layers, vocab, npos = 768, 12, 12, 50257, 1024

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x, cache):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
            if cache is not None:                  # the growing KV cache: a new tensor a step
                k = torch.cat([cache[0], k], dim=2)
                v = torch.cat([cache[1], v], dim=2)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
            return x, (k, v)

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(npos, d)
            self.layers = nn.ModuleList(Layer() for _ in range(layers))
            self.ln = nn.LayerNorm(d)

        def forward(self, ids, pos0, caches):
            pos = torch.arange(pos0, pos0 + ids.shape[1], device=ids.device)
            x = self.wte(ids) + self.wpe(pos)
            new = []
            for layer, c in zip(self.layers, caches):
                x, c = layer(x, c)
                new.append(c)
            return self.ln(x[:, -1]) @ self.wte.weight.t(), new

    model = Decoder().to("cuda:0").eval()
    ctx.details["model"] = "hand-written GPT-2-small-like decoder (transformers missing), greedy"

    def generate(ids, n_new):
        with torch.inference_mode():
            logits, caches = model(ids, 0, [None] * layers)
            out = [ids]
            for i in range(n_new):
                nxt = logits.argmax(-1, keepdim=True)
                out.append(nxt)
                logits, caches = model(nxt, ids.shape[1] + i, caches)
            return torch.cat(out, dim=1)
    return generate, vocab, npos


def sc_llmgen(ctx):
    import random
    torch = ctx.torch
    if os.environ.get("RECORD_LLM") == "handwritten":
        generate, vocab, npos = _handwritten_decoder(ctx)
        ctx.details["decoder_note"] = "RECORD_LLM=handwritten (the GPT-2 child failed before)"
    else:
        try:
            generate, vocab, npos = _gpt2(ctx)
        except ImportError as e:
            ctx.details["transformers_import_error"] = str(e)
            generate, vocab, npos = _handwritten_decoder(ctx)
    rng = random.Random(0)
    requests = []
    ctx.details.update(requests=requests, target_events=LLMGEN_TARGET_EVENTS,
                       stop_rule="new requests until 3 x allocations made >= target_events")
    g = torch.Generator().manual_seed(0)
    while torch.cuda.memory_stats()["allocation.all.allocated"] * 3 < LLMGEN_TARGET_EVENTS:
        b = rng.choice([1, 1, 2, 4, 8])
        plen = rng.randint(8, 600)
        n_new = rng.randint(16, 48)
        n_new = min(n_new, npos - plen)
        ids = torch.randint(0, vocab, (b, plen), generator=g).to("cuda:0")
        ctx.mark(f"r{len(requests)}")
        t0 = time.perf_counter()
        out = generate(ids, n_new)
        torch.cuda.synchronize()
        ctx.iter_seconds.append(time.perf_counter() - t0)
        requests.append({"batch": b, "prompt": plen, "new_tokens": n_new,
                         "out_len": int(out.shape[1])})
        del ids, out
        if len(requests) >= 400:
            break


def sc_graph(ctx):
    torch = ctx.torch
    dev = "cuda:0"
    d_in, width, depth, n_cls, n = 512, 1024, 3, 10, 256
    model = mlp(torch.nn, d_in, width, depth, n_cls).to(dev)
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    static_input = torch.randn(n, d_in, device=dev)
    static_target = torch.randint(0, n_cls, (n,), device=dev)
    ctx.details.update(model=f"MLP {d_in}-{width}x{depth}-{n_cls}, SGD, batch {n}",
                       capture="forward+backward+SGD step, torch.cuda.graph(g)",
                       eager="new batch each replay, accuracy and loss history, an eager "
                             "4x-batch forward every 4th replay")
    ctx.mark("warmup")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(static_input), static_target)
            loss.backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)
    del loss
    ctx.mark("capture")
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_y = model(static_input)
        static_loss = loss_fn(static_y, static_target)
        static_loss.backward()
        opt.step()
    ctx.details["graph_pool"] = pool_repr(g.pool())
    hist = []
    for i in range(16):
        ctx.mark(f"replay{i}")

        def one():
            data = torch.randn(n, d_in, device=dev)
            target = torch.randint(0, n_cls, (n,), device=dev)
            static_input.copy_(data)
            static_target.copy_(target)
            g.replay()
            acc = (static_y.argmax(1) == static_target).float().mean()
            hist.append(torch.stack([static_loss.detach().clone(), acc]))
            if len(hist) > 5:
                hist.pop(0)
            if i % 4 == 3:
                with torch.no_grad():
                    big = model(torch.randn(4 * n, d_in, device=dev))
                    hist.append(big.mean().reshape(1).repeat(2))
        timed_step(ctx, one)
    ctx.mark("teardown")
    del g, static_y, static_loss
    gc.collect()
    ctx.details["last"] = [float(v) for v in hist[-1]]


def sc_graphpool(ctx):
    torch = ctx.torch
    dev = "cuda:0"
    n = 256
    a = mlp(torch.nn, 512, 1024, 2, 1024).to(dev).eval()
    b = mlp(torch.nn, 1024, 2048, 2, 10).to(dev).eval()
    static_in = torch.randn(n, 512, device=dev)
    ctx.details.update(model="A: MLP 512-1024x2-1024, B: MLP 1024-2048x2-10, inference, "
                             f"batch {n}",
                       capture="g1 = A(static_in); g2 = B(g1's output) with pool=g1.pool(); "
                               "replayed g1 then g2")
    ctx.mark("warmup")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(3):
            b(a(static_in))
    torch.cuda.current_stream().wait_stream(s)
    ctx.mark("capture1")
    g1 = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g1):
        mid = a(static_in)
    ctx.mark("capture2")
    g2 = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g2, pool=g1.pool()):
        out = b(mid)
    ctx.details["graph_pools"] = [pool_repr(g1.pool()), pool_repr(g2.pool())]
    keep = []
    for i in range(16):
        ctx.mark(f"replay{i}")

        def one():
            static_in.copy_(torch.randn(n, 512, device=dev))
            g1.replay()
            g2.replay()
            probs = out.softmax(1)
            keep.append(probs.max(1).values.clone())
            if len(keep) > 4:
                keep.pop(0)
            if i % 4 == 3:
                with torch.no_grad():
                    keep.append(b(a(torch.randn(2 * n, 512, device=dev))).mean(1))
        timed_step(ctx, one)
    ctx.mark("teardown")
    del g1, g2, mid, out
    gc.collect()
    torch.cuda.synchronize()
    ctx.details["kept"] = len(keep)


def sc_mempool(ctx):
    torch = ctx.torch
    F = torch.nn.functional
    dev = "cuda:0"
    d_in, width, depth, d_out = 1024, 2048, 4, 1024
    model = mlp(torch.nn, d_in, width, depth, d_out).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ctx.details.update(model=f"MLP {d_in}-{width}x{depth}-{d_out}, AdamW",
                       phases="6 training steps; MemPool phase (buffers + 4 no-grad forwards "
                              "inside use_mem_pool, used and freed outside it); 6 training "
                              "steps; del pool; 4 training steps")

    def train(tag, k, b=512):
        for i in range(k):
            ctx.mark(f"{tag}{i}")

            def one():
                x = torch.randn(b, d_in, device=dev)
                y = torch.randn(b, d_out, device=dev)
                loss = F.mse_loss(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            timed_step(ctx, one)

    train("a", 6)
    ctx.mark("pool")
    pool = torch.cuda.MemPool()
    ctx.details["pool_id"] = pool_repr(pool.id)
    with torch.cuda.use_mem_pool(pool):
        buffers = [torch.empty(bs, width, device=dev) for bs in (4096, 1024, 3000, 64)]
        with torch.no_grad():
            outs = [model(torch.randn(bs, d_in, device=dev)) for bs in (256, 1024, 512, 2048)]
    total = sum(o.float().sum() for o in outs) + sum(bf.zero_().sum() for bf in buffers)
    ctx.details["pool_phase_checksum"] = float(total)
    del buffers, outs, total
    train("b", 6)
    ctx.mark("del_pool")
    torch.cuda.synchronize()
    del pool
    gc.collect()
    train("c", 4)


def sc_twogpu(ctx):
    torch = ctx.torch
    nn, F = torch.nn, torch.nn.functional
    d0, d1 = "cuda:0", "cuda:1"
    width = 4096
    part0 = nn.Sequential(nn.Linear(1024, width), nn.ReLU(),
                          *[m for _ in range(3) for m in (nn.Linear(width, width), nn.ReLU())]
                          ).to(d0)
    part1 = nn.Sequential(*[m for _ in range(3) for m in (nn.Linear(width, width), nn.ReLU())],
                          nn.Linear(width, 1024)).to(d1)
    opt = torch.optim.AdamW(list(part0.parameters()) + list(part1.parameters()), lr=1e-4)
    batches = [1024, 1536, 2048, 1280]
    ctx.details.update(model=f"MLP 1024-{width}x4 on {d0}, {width}x3-1024 on {d1}, AdamW",
                       batches=batches, steps=8)
    for step in range(8):
        ctx.mark(f"step{step}")
        bsz = batches[step % len(batches)]

        def one():
            x = torch.randn(bsz, 1024, device=d0)
            y = torch.randn(bsz, 1024, device=d1)
            h = part0(x).to(d1)
            loss = F.mse_loss(part1(h), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize(d0)
        timed_step(ctx, one)


def sc_sidecnn(ctx):
    """A CNN trained with its batches made on a side stream (record_stream), cuDNN choosing
    algorithms by trial (benchmark mode: under a cap, cuDNN's workspace tries fail with OOMs
    that PyTorch catches and retries), batch sizes that vary, one empty_cache."""
    torch = ctx.torch
    import torchvision
    F = torch.nn.functional
    dev = "cuda:0"
    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet18(num_classes=100).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batches = [96, 128, 64, 112]
    steps, empty_at = 16, 8
    main = torch.cuda.current_stream()
    s_data = torch.cuda.Stream()
    ctx.details.update(model="torchvision resnet18 (100 classes), SGD momentum, 160x160 images,"
                             " cudnn.benchmark", batches=batches, steps=steps,
                       empty_cache_before_step=empty_at)

    def produce(b):
        with torch.cuda.stream(s_data):
            raw = torch.rand(b, 3, 160, 160, device=dev)
            x = (raw - 0.5) / 0.25
            y = torch.randint(0, 100, (b,), device=dev)
            del raw
        return x, y

    losses = []
    nxt = produce(batches[0])
    for step in range(steps):
        if step == empty_at:
            ctx.mark("empty_cache")
            torch.cuda.empty_cache()
        ctx.mark(f"step{step}")
        t0 = time.perf_counter()
        main.wait_stream(s_data)
        x, y = nxt
        x.record_stream(main)
        y.record_stream(main)
        nxt = produce(batches[(step + 1) % len(batches)]) if step + 1 < steps else None
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach())
        del x, y, loss
        ctx.iter_seconds.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    ctx.details["last_loss"] = float(losses[-1])


def sc_compiled(ctx):
    """A transformer block trained under torch.compile(mode="reduce-overhead"): CUDA-graph trees,
    their private pools, shapes that change (each a recompile and a new graph)."""
    torch = ctx.torch
    nn, F = torch.nn, torch.nn.functional
    dev = "cuda:0"
    d, heads, n_cls = 512, 8, 64
    layer = nn.TransformerEncoderLayer(d, heads, 4 * d, batch_first=True, dropout=0.0)
    model = nn.Sequential(nn.TransformerEncoder(layer, 4), nn.Linear(d, n_cls)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    shapes = [(32, 128), (16, 256), (32, 128)]
    ctx.details.update(model=f"TransformerEncoder 4x{d} ({heads} heads) + linear, AdamW",
                       compile='torch.compile(mode="reduce-overhead")', shapes=shapes)

    def step_fn(x, y):
        out = model(x)
        loss = F.cross_entropy(out.reshape(-1, n_cls), y.reshape(-1))
        loss.backward()
        return loss.detach()

    step_c = torch.compile(step_fn, mode="reduce-overhead")
    losses = []
    for rnd in range(3):
        for i, (b, t) in enumerate(shapes):
            ctx.mark(f"r{rnd}s{i}")

            def one():
                torch.compiler.cudagraph_mark_step_begin()
                x = torch.randn(b, t, d, device=dev)
                y = torch.randint(0, n_cls, (b, t), device=dev)
                loss = step_c(x, y)
                opt.step()
                opt.zero_grad(set_to_none=True)
                losses.append(loss.clone())
            timed_step(ctx, one)
    ctx.details["last_loss"] = float(losses[-1])


SCENARIO_FUNCS = {
    "sidestream": sc_sidestream, "oomdie": sc_oomdie, "oomcatch": sc_oomcatch, "cut": sc_cut,
    "llmgen": sc_llmgen, "graph": sc_graph, "graphpool": sc_graphpool, "mempool": sc_mempool,
    "twogpu": sc_twogpu, "sidecnn": sc_sidecnn, "compiled": sc_compiled,
}


def child_main(scenario, policy, out, cap=None):
    import torch
    ctx = Ctx(torch, scenario, policy, out, cap)
    want = POLICIES[policy]
    got = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    if got != want:
        raise SystemExit(f"PYTORCH_CUDA_ALLOC_CONF is {got!r}, expected {want!r}")
    ctx.start()
    t0 = time.perf_counter()
    try:
        SCENARIO_FUNCS[scenario](ctx)
    except torch.OutOfMemoryError as e:
        ctx.details["seconds"] = time.perf_counter() - t0
        ctx.details["traceback_tail"] = traceback.format_exc().splitlines()[-6:]
        ctx.finish("oom", str(e))
        print(f"{ctx.name}: exits with the OOM:\n{e}", file=sys.stderr, flush=True)
        return EXIT_OOM
    ctx.details["seconds"] = time.perf_counter() - t0
    ctx.finish("ok")
    return 0


# =============================================================================================
# Parent side: the plan, one child process per scenario x policy.
# =============================================================================================

def plan(args):
    names = args.scenario or [s for s, v in SCENARIOS.items() if v[4]]
    runs = []
    for s in names:
        for p in SCENARIOS[s][0]:
            if args.policy and p not in args.policy:
                continue
            for c in scenario_caps(s) if args.caps is None else args.caps:
                runs.append((s, p, c))
    return runs


def caps_arg(text):
    """--caps: "none", "xF" (F times the same policy's uncapped peak) or GiB, comma-separated."""
    caps = []
    for item in text.split(","):
        item = item.strip()
        if item == "none":
            caps.append(None)
        elif item.startswith("x") and _is_float(item[1:]) and float(item[1:]) > 0:
            caps.append(item)
        elif _is_float(item) and float(item) > 0:
            caps.append(float(item))
        else:
            raise argparse.ArgumentTypeError(f"'{item}' is not none, xF or a number of GiB")
    return caps


def _is_float(text):
    try:
        float(text)
        return True
    except ValueError:
        return False


def run_child(cmd, env, log, timeout):
    with open(log, "w") as lf:
        try:
            return subprocess.run(cmd, env=env, stdout=lf, stderr=subprocess.STDOUT,
                                  timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            return "timeout"


def parent_main(args):
    runs = plan(args)
    if not runs:
        print("record_pytorch.py: nothing to run (check --scenario/--policy)", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    summary = []
    me = os.path.abspath(__file__)
    for s, p, c in runs:
        cap = c if args.dry_run else resolve_cap(s, p, c, args.out)
        if isinstance(c, str) and cap is None and not args.dry_run:
            print(f"{s}__{p}__{c}: skipped: its run without a cap did not record a peak",
                  flush=True)
            continue
        name = run_name(s, p, cap) if not isinstance(cap, str) else f"{s}__{p}__{cap}"
        env = dict(os.environ)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        if POLICIES[p]:
            env["PYTORCH_CUDA_ALLOC_CONF"] = POLICIES[p]
        env["PYTHONUNBUFFERED"] = "1"
        cmd = [sys.executable, me, "--child", s, "--child-policy", p, "--out", args.out]
        if cap is not None and isinstance(SCENARIOS[s][1], list):
            cmd += ["--child-cap", str(cap)]
        timeout = args.timeout or SCENARIOS[s][3]
        if args.dry_run:
            conf = POLICIES[p] or "(unset)"
            print(f"{name}: PYTORCH_CUDA_ALLOC_CONF={conf} {' '.join(cmd)}  [timeout {timeout}s]")
            continue
        log = os.path.join(args.out, name + ".log")
        t0 = time.perf_counter()
        rc = run_child(cmd, env, log, timeout)
        if s == "llmgen" and rc not in (0, EXIT_OOM) and "RECORD_LLM" not in env:
            # Transformers' GPT-2 failed (an API change, say): the hand-written decoder instead.
            print(f"{name}: rc {rc} with GPT-2; again with the hand-written decoder", flush=True)
            os.replace(log, os.path.join(args.out, name + ".gpt2-failed.log"))
            env["RECORD_LLM"] = "handwritten"
            rc = run_child(cmd, env, log, timeout)
        secs = time.perf_counter() - t0
        outcome = None
        jpath = os.path.join(args.out, name + ".json")
        if os.path.exists(jpath):
            with open(jpath) as f:
                outcome = json.load(f).get("outcome")
        # a run capped near its own peak may die of the cap: that is a result, not a failure
        expected = (rc == EXIT_OOM) if s == "oomdie" else (
            rc in (0, EXIT_OOM) if isinstance(c, str) else rc == 0)
        entry = {"name": name, "rc": rc, "outcome": outcome, "seconds": round(secs, 1),
                 "as_expected": expected}
        summary.append(entry)
        with open(log) as lf:
            tail = lf.read().strip().splitlines()[-1:] or [""]
        print(f"{name}: rc {rc} outcome {outcome} {secs:.1f}s "
              f"{'' if expected else 'UNEXPECTED '}| {tail[0][:200]}", flush=True)
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
    if args.dry_run:
        return 0
    return 0 if all(e["as_expected"] for e in summary) else 1


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="record_pytorch.py", description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", action="append", choices=list(SCENARIOS), metavar="NAME",
                   help="record this scenario (repeatable): " + ", ".join(SCENARIOS))
    p.add_argument("--all", action="store_true",
                   help="every single-GPU scenario (all but twogpu)")
    p.add_argument("--policy", action="append", choices=list(POLICIES),
                   help="only these policies (repeatable; default: each scenario's own list)")
    p.add_argument("--out", default="refs", help="output folder (default: refs)")
    p.add_argument("--caps", type=caps_arg, metavar="LIST",
                   help="the caps to run instead of the scenario's own, for a scenario with a "
                        "list of caps (sidecnn, compiled): none, xF (F times the same policy's "
                        "uncapped peak, run first) or GiB, comma-separated: none,x0.8")
    p.add_argument("--timeout", type=int, help="seconds per child (default: per scenario)")
    p.add_argument("--list", action="store_true", help="list the scenarios and their runs")
    p.add_argument("--dry-run", action="store_true", help="print the children, run none")
    p.add_argument("--child", choices=list(SCENARIOS), help=argparse.SUPPRESS)
    p.add_argument("--child-policy", choices=list(POLICIES), help=argparse.SUPPRESS)
    p.add_argument("--child-cap", type=float, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child is None and not a.list and not a.all and not a.scenario:
        p.error("say --all, --scenario NAME or --list")
    if a.all and a.scenario:
        p.error("--all and --scenario exclude each other")
    if a.caps is not None and not all(isinstance(SCENARIOS[s][1], list)
                                      for s in (a.scenario or [])):
        p.error("--caps needs scenarios with a list of caps (sidecnn, compiled)")
    return a


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    if a.child:
        return child_main(a.child, a.child_policy, a.out, a.child_cap)
    if a.list:
        for s, (pols, cap, me, _, in_all) in SCENARIOS.items():
            runs = ", ".join(f"{s}__{p}__{c}" if isinstance(c, str) else run_name(s, p, c)
                             for p in pols for c in scenario_caps(s))
            print(f"{s:11s} max_entries {me:>9} {'' if in_all else '(not in --all) '}{runs}")
        return 0
    return parent_main(a)


if __name__ == "__main__":
    sys.exit(main())
