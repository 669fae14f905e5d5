#!/usr/bin/env python3
"""One workload on the GPU under PyTorch's own allocator or gpusim's pluggable allocator
(build/libgpusim_torch.so), written as JSON: its outputs (every step's loss, or every generated
token's hash), every step's time, and native PyTorch's peak reserved memory. lab/device_stitch.sh
runs each workload three ways (native, native with expandable_segments:True, gpusim's stitch) and
lab/device_stitch_summary.py compares them.

    python3 lab/device_stitch.py --workload resnet50 --allocator native -o native.json
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \\
        python3 lab/device_stitch.py --workload gpt2 --allocator native -o expandable.json
    GPUSIM_POLICY=stitch GPUSIM_STATS=stats.json \\
        python3 lab/device_stitch.py --workload llmgen --allocator gpusim -o stitch.json

Workloads (all seeded; fp32, TF32 off, deterministic algorithms, so the outputs of the three
allocators can be compared bit for bit):
  resnet50  ResNet-50 training (lab/train_resnet50.py's model and data: batch 64 of random
            224x224 images, SGD lr 0.1 momentum 0.9); a step is one forward+backward+update.
  gpt2      GPT-2 small training (Hugging Face GPT2LMHeadModel, random init, 124M parameters),
            batch 8 of 512 random tokens, AdamW lr 1e-4; attention through PyTorch's math kernel
            (the fused kernels' backward passes are not all deterministic).
  llmgen    LLM generation: the same GPT-2 small (random weights, eval), greedy generate() with
            its growing KV cache over a seeded list of requests (batch 1-8, prompts of 8-600
            tokens, 16-48 new tokens); a step is one request. Outputs: each request's tokens,
            hashed (sha256 of the token ids), and the hash of them all.
  gpt2var   GPT-2 small training with varying shapes: every step a seeded batch of sequences
            of 64-1024 tokens, 1 to 8192 / length of them, AdamW lr 1e-4; the shapes that make
            a caching allocator split and fragment.
  twostream ResNet-50 training (batch 32 at 224x224) whose batches are made on a side stream
            (random images generated there, handed to the main stream with wait_stream and
            record_stream), so freed blocks wait for the other stream before reuse.

--cap-bytes N runs under a cap: native PyTorch through
torch.cuda.set_per_process_memory_fraction(N / total) before the first allocation; under gpusim
the cap is the library's (GPUSIM_CAPACITY, or `gpusim run --capacity`: --allocator hooked is a
program whose allocator `gpusim run` has already put in place). An OOM ends the run with
"outcome": "oom" and the step it died in; a complete run has "outcome": "ok".

Under gpusim the peak reserved memory is the library's own figure, in the GPUSIM_STATS file written
at exit (PyTorch's memory_stats() does not see into a pluggable allocator). Step times are taken
between two torch.cuda.synchronize() calls; summaries drop the first --warmup steps. This script is
for the device machine (PyTorch and transformers needed); the project itself uses only the
standard library.
"""
import argparse
import hashlib
import json
import os
import statistics
import sys
import time


def resnet50_training(torch):
    """lab/train_resnet50.py's ResNet-50 on the GPU with its optimiser and loss: (model, opt,
    loss_fn, where the model came from)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from train_resnet50 import resnet50
    model, source = resnet50(torch)
    model = model.cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return model, opt, torch.nn.CrossEntropyLoss(), source


def resnet50_steps(torch, a):
    model, opt, loss_fn, source = resnet50_training(torch)
    gen = torch.Generator().manual_seed(a.seed)

    def step(i):
        x = torch.randn(64, 3, 224, 224, generator=gen).cuda()
        y = torch.randint(0, 1000, (64,), generator=gen).cuda()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        return time.perf_counter() - t0, loss.item()
    return step, {"model": f"ResNet-50 ({source}), batch 64, SGD"}


def gpt2_model(torch):
    import transformers
    cfg = transformers.GPT2Config()          # GPT-2 small: 12 layers, 768 wide, 1024 positions
    model = transformers.GPT2LMHeadModel(cfg).cuda()
    return model, cfg, f"Hugging Face GPT-2 small (random init), transformers {transformers.__version__}"


def gpt2_train_step(torch, model, opt, ids):
    """One timed training step of GPT-2 on the token ids: (seconds, loss)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    with sdpa_kernel([SDPBackend.MATH]):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
    opt.step()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, loss.item()


def gpt2_steps(torch, a):
    model, cfg, desc = gpt2_model(torch)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(a.seed)

    def step(i):
        ids = torch.randint(0, cfg.vocab_size, (8, 512), generator=gen).cuda()
        return gpt2_train_step(torch, model, opt, ids)
    return step, {"model": desc + ", batch 8 x 512 tokens, AdamW, SDPA math kernel"}


def llmgen_steps(torch, a):
    import random
    from torch.nn.attention import SDPBackend, sdpa_kernel
    model, cfg, desc = gpt2_model(torch)
    model.eval()
    rng = random.Random(a.seed)
    gen = torch.Generator().manual_seed(a.seed)

    def step(i):
        b = rng.choice([1, 1, 2, 4, 8])
        plen = rng.randint(8, 600)
        n_new = rng.randint(16, 48)
        ids = torch.randint(0, cfg.vocab_size, (b, plen), generator=gen).cuda()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.inference_mode(), sdpa_kernel([SDPBackend.MATH]):
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                 max_new_tokens=n_new, min_new_tokens=n_new, do_sample=False,
                                 use_cache=True, pad_token_id=cfg.eos_token_id)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        toks = out[:, plen:].cpu().tolist()
        h = hashlib.sha256(json.dumps(toks).encode()).hexdigest()
        return dt, {"batch": b, "prompt": plen, "new_tokens": n_new, "sha256": h}
    return step, {"model": desc + ", greedy generate(use_cache=True), SDPA math kernel"}


def gpt2var_steps(torch, a):
    import random
    model, cfg, desc = gpt2_model(torch)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rng = random.Random(a.seed)
    gen = torch.Generator().manual_seed(a.seed)

    def step(i):
        seq = rng.choice([64, 128, 192, 256, 384, 512, 768, 1024])
        b = rng.randint(1, max(1, 8192 // seq))     # at most 8192 tokens a step
        ids = torch.randint(0, cfg.vocab_size, (b, seq), generator=gen).cuda()
        dt, loss = gpt2_train_step(torch, model, opt, ids)
        return dt, [b, seq, loss]
    return step, {"model": desc + ", batches of 64-1024-token sequences, <= 8192 tokens, AdamW, SDPA math"}


def twostream_steps(torch, a):
    model, opt, loss_fn, source = resnet50_training(torch)
    main, side = torch.cuda.current_stream(), torch.cuda.Stream()
    gen = torch.Generator(device="cuda").manual_seed(a.seed)

    def produce():
        # the next batch is made on the side stream while the main stream trains
        with torch.cuda.stream(side):
            x = torch.randn(32, 3, 224, 224, device="cuda", generator=gen)
            y = torch.randint(0, 1000, (32,), device="cuda", generator=gen)
        return x, y

    nxt = [produce()]

    def step(i):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        main.wait_stream(side)
        x, y = nxt[0]
        x.record_stream(main)   # freed by the main stream's last use, not the side stream's
        y.record_stream(main)
        nxt[0] = produce()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        del x, y
        torch.cuda.synchronize()
        return time.perf_counter() - t0, loss.item()
    return step, {"model": f"ResNet-50 ({source}), batch 32 made on a side stream, SGD"}


WORKLOADS = {"resnet50": (resnet50_steps, 20), "gpt2": (gpt2_steps, 20), "llmgen": (llmgen_steps, 40),
             "gpt2var": (gpt2var_steps, 30), "twostream": (twostream_steps, 20)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--workload", choices=sorted(WORKLOADS), required=True)
    ap.add_argument("--allocator", choices=("native", "gpusim", "hooked"), required=True,
                    help="native: PyTorch's own; gpusim: --lib put in place here; hooked: put in "
                    "place by `gpusim run`")
    ap.add_argument("--lib", default="build/libgpusim_torch.so", help="gpusim's pluggable allocator")
    ap.add_argument("--steps", type=int, help="steps (default: 20; llmgen 40 requests)")
    ap.add_argument("--warmup", type=int, default=3, help="steps left out of the time summary")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cap-bytes", type=int, help="native: the memory fraction's cap in bytes")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    make, default_steps = WORKLOADS[a.workload]
    steps = a.steps or default_steps
    if steps <= a.warmup:
        ap.error("--steps must be more than --warmup")

    # cuBLAS is deterministic on one stream only with a fixed workspace; set before CUDA starts.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    if a.allocator == "gpusim":
        # Before the first CUDA allocation: the allocator cannot change once one was made.
        alloc = torch.cuda.memory.CUDAPluggableAllocator(a.lib, "gpusim_malloc", "gpusim_free")
        torch.cuda.memory.change_current_allocator(alloc)
    if a.cap_bytes and a.allocator == "native":
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, a.cap_bytes / total))
    torch.manual_seed(a.seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # warn_only: some backward kernels (adaptive average pooling) have no deterministic version;
    # the outputs are compared anyway, which is the check that matters.
    torch.use_deterministic_algorithms(True, warn_only=True)
    step, details = make(torch, a)
    times, outputs, outcome = [], [], {"outcome": "ok"}
    for i in range(steps):
        try:
            dt, o = step(i)
        except torch.OutOfMemoryError as e:
            outcome = {"outcome": "oom", "oom_step": i, "error": str(e).split("\n")[0][:300]}
            break
        times.append(dt)
        outputs.append(o)
    timed = times[a.warmup:] or times or [float("nan")]
    out = {
        "workload": a.workload,
        "allocator": a.allocator,
        "pytorch_cuda_alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "gpusim_policy": os.environ.get("GPUSIM_POLICY", "") if a.allocator == "gpusim" else "",
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0),
        "seed": a.seed,
        "cap_bytes": a.cap_bytes,
        **outcome,
        "warmup": a.warmup,
        "details": details,
        "outputs": outputs,
        "outputs_sha256": hashlib.sha256(json.dumps(outputs).encode()).hexdigest(),
        "step_seconds": times,
        "median_step_seconds": statistics.median(timed),
        "min_step_seconds": min(timed),
        "max_step_seconds": max(timed),
    }
    if a.allocator == "native":
        out["max_memory_reserved"] = torch.cuda.max_memory_reserved()
        out["max_memory_allocated"] = torch.cuda.max_memory_allocated()
    with open(a.output, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps({k: out[k] for k in ("workload", "allocator", "pytorch_cuda_alloc_conf",
                                          "gpusim_policy", "outcome", "outputs_sha256",
                                          "median_step_seconds")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
