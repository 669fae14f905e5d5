"""probe.py - what a real kernel asks the allocator for, learnt by running it once on the device.

A fake tensor shows what an operator's meta function says its outputs are; the real kernel may
ask the caching allocator for more (cuDNN's convolution workspaces, which cuDNN chooses on the
device; the accumulation buffer and semaphores of a CUDA reduction split across blocks, sized by
its launch configuration; the intermediates of a fused kernel such as the Transformer encoder
layer's fast path) or for outputs of other sizes than the meta function's. None of that can be
computed on the CPU without reimplementing each library's heuristics, and the capture already
needs a CUDA device to be visible (docs/capture.md). So each distinct operation (the operator,
its inputs' shapes, strides and dtypes, its other arguments) is run once, for real, on inputs of
those shapes filled with harmless values, while the allocator records its history; what the call
allocated and freed, in order, is the script the capture then writes each time the program runs
that operation:

- ("out", LEAF, BYTES): the output at pytree leaf LEAF, at the size the real kernel asked for;
- ("alloc", TAG, BYTES), ("free", TAG): memory the kernel took and gave back inside the call.

What the call allocated and kept that is no output (cuBLAS's per-handle workspace, made at a
handle's first product) is left out: kernels.py models those once per handle and stream.

Cost: the device memory of one operation's inputs, outputs and transients at a time (never the
program's), bounded by GPUSIM_CAPTURE_PROBE_BUDGET (bytes; default half the device's free memory
when the first probe runs); an operation over the budget is not probed and is counted. Values:
floating-point inputs hold 0.5, integers and booleans 0 (valid indices, probabilities and targets,
so no kernel trips a device-side assertion); an operation whose allocations depend on its inputs'
values is the capture's unknown anyway (mode.py). GPUSIM_CAPTURE_PROBE=0 turns probing off.

A kernel can still take the process down (one that reads on the host an argument the probe made
up): the name of the operator being probed is kept in GPUSIM_CAPTURE_PROBE_MARK's file while its
probe runs, and gpusim (cli/capture.c) runs the capture again with it in
GPUSIM_CAPTURE_PROBE_SKIP (comma-separated operator names, "aten.NAME.OVERLOAD"), counted in
the trace header.
"""
import os
import sys

import torch
from torch.utils import _pytree as pytree
from torch._subclasses import fake_tensor as ft

# Operators not run: they allocate nothing beyond what their schema shows (views, metadata), act
# on the storage itself (resize, set), or check values (an assertion on values of 0.5 or 0 would
# fail on the device and poison the CUDA context for every later probe).
SKIP_NAMES = frozenset((
    "detach", "alias", "lift_fresh", "lift_fresh_copy", "resize_", "resize_as_", "set_",
    "_resize_output_", "_local_scalar_dense", "record_stream", "_assert_async",
    "_functional_assert_async", "_assert_scalar", "_functional_assert_scalar",
    "_assert_tensor_metadata", "sym_constrain_range", "sym_constrain_range_for_size",
    "_make_dep_token", "empty", "empty_strided", "empty_like", "new_empty",
    "new_empty_strided"))

HISTORY_ENTRIES = 1 << 16


class Result:
    __slots__ = ("script", "value")

    def __init__(self, script, value):
        self.script = script
        self.value = value


class Probe:
    def __init__(self, torch, unknowns, env):
        self.torch = torch
        self.unknowns = unknowns
        self.enabled = env.get("GPUSIM_CAPTURE_PROBE", "1") != "0"
        self.budget = int(env.get("GPUSIM_CAPTURE_PROBE_BUDGET", "0") or 0)
        # the real entry points, taken before patches.py replaces them with stand-ins
        cuda = torch.cuda
        self.lazy_init = cuda._lazy_init
        self.mem_get_info = cuda.mem_get_info
        self.record = cuda.memory._record_memory_history
        self.snapshot = cuda.memory._snapshot
        # operators whose probe killed an earlier run of this capture (cli/capture.c runs it
        # again with them named here), and the file that names the one being probed
        self.skip = frozenset(n for n in env.get("GPUSIM_CAPTURE_PROBE_SKIP", "").split(",") if n)
        self.mark = None
        if self.enabled and env.get("GPUSIM_CAPTURE_PROBE_MARK"):
            self.mark = os.open(env["GPUSIM_CAPTURE_PROBE_MARK"],
                                os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self.cache = {}
        self.started = False
        self.probed = 0
        self.differed = 0
        self.peak = 0

    def _count(self, what):
        self.unknowns[what] = self.unknowns.get(what, 0) + 1

    def _start(self):
        self.started = True
        self.lazy_init()
        free, _total = self.mem_get_info(0)
        if not self.budget:
            self.budget = free // 2
        self.record("all", context=None, stacks="python", max_entries=HISTORY_ENTRIES)

    def summary(self):
        """For the trace header: what the probes cost the device."""
        if not self.probed:
            return "no GPU memory used"
        said = (f"{self.probed} distinct operations run once on the device to learn their "
                f"kernels' requests (peak {self.peak} bytes reserved by the probes)")
        if self.differed:
            said += (f", {self.differed} of whose decisions the device made otherwise than the "
                     "meta functions (the device's stand)")
        return said

    def run(self, func, args, kwargs, fake_out):
        """The Result for one operation (cached by its signature), or None where it is not
        probed or the probe failed (the meta function's outputs stand)."""
        if not self.enabled or func.is_view or func._overloadpacket.__name__ in SKIP_NAMES:
            return None
        leaves, spec = pytree.tree_flatten((args, kwargs))
        try:
            key = (func, str(spec), tuple(_signature(x) for x in leaves))
        except TypeError:  # an argument the signature cannot name: not probed
            return None
        if key in self.cache:
            return self.cache[key]
        self.cache[key] = None
        name = func._overloadpacket.__name__
        if str(func) in self.skip:
            self._count(f"not probed: its probe killed an earlier run ({func})")
            return None
        if self.mark is not None:  # a name a parent can read if this process dies in the probe
            os.pwrite(self.mark, f"{func}\n".encode(), 0)
        try:
            if not self.started:
                self._start()
            need = sum(_extent_bytes(x) for x in leaves if isinstance(x, ft.FakeTensor))
            if need > self.budget:
                self._count(f"not probed: inputs over the probe's budget ({name})")
                return None
            res = self._probe(func, leaves, spec, fake_out)
        except Exception as e:  # noqa: BLE001 - any failure leaves the meta function's answer
            self._count(f"probe failed ({name}: {type(e).__name__})")
            self._check_device()
            return None
        finally:
            if self.mark is not None:
                os.ftruncate(self.mark, 0)
        self.cache[key] = res
        return res

    def _check_device(self):
        """A kernel fault poisons the CUDA context: every later probe would fail the same way."""
        try:
            self.torch._C._cuda_synchronize()
        except Exception:  # noqa: BLE001
            self.enabled = False
            self._count("probes stopped (the device reported an error)")

    def _probe(self, func, leaves, spec, fake_out):
        torch = self.torch
        real = [_real(torch, x) for x in leaves]
        inputs = {x.untyped_storage().data_ptr() for x in real
                  if isinstance(x, torch.Tensor) and x.device.type == "cuda"}
        rargs, rkwargs = pytree.tree_unflatten(real, spec)
        torch._C._cuda_synchronize()
        self.record("all", context=None, stacks="python", max_entries=HISTORY_ENTRIES,
                    clear_history=True)
        out = func(*rargs, **rkwargs)
        torch._C._cuda_synchronize()
        trace = self.snapshot()["device_traces"][torch._C._cuda_getDevice()]
        reserved = torch._C._cuda_memoryStats(torch._C._cuda_getDevice())["reserved_bytes"]["all"]
        self.peak = max(self.peak, reserved["peak"])
        if reserved["current"] > self.budget:
            torch._C._cuda_emptyCache()  # the probes' cache back, before the next one
        self.probed += 1
        fakes = pytree.tree_leaves(fake_out)
        reals = pytree.tree_leaves(out)
        value = None
        if len(fakes) == 1 and len(reals) == 1 and not isinstance(fakes[0], torch.Tensor) and \
                type(reals[0]) is type(fakes[0]):
            # a decision, not a tensor (the attention backend chosen for these inputs): the
            # device's answer, where the meta function may answer otherwise
            value = reals[0]
            self.differed += value != fakes[0]
        elif len(fakes) != len(reals):
            raise RuntimeError("outputs unlike the meta function's")
        outputs = {}  # storage address -> (leaf, bytes): new storages only
        for i, x in enumerate(reals):
            if isinstance(x, torch.Tensor) and x.device.type == "cuda":
                st = x.untyped_storage()
                if st.data_ptr() not in inputs and st.nbytes() and st.data_ptr() not in outputs:
                    outputs[st.data_ptr()] = (i, st.nbytes())
        script, live, tag = [], {}, 0
        for e in trace:
            action, addr = e.get("action"), e.get("addr")
            if action == "alloc":
                if addr in outputs:
                    leaf, size = outputs.pop(addr)
                    script.append(("out", leaf, size))
                else:
                    tag += 1
                    live[addr] = (tag, len(script))
                    script.append(("alloc", tag, e["size"]))
            elif action == "free_requested" and addr in live:
                script.append(("free", live.pop(addr)[0]))
        # kept by the call and no output: a library's own cache (cuBLAS's workspace), which
        # kernels.py models per handle: not this operation's
        drop = {at for _tag, at in live.values()}
        return Result([s for k, s in enumerate(script) if k not in drop], value)


def _signature(x):
    """What of an argument can change what a kernel allocates: a tensor's kind and layout, any
    other value itself."""
    if isinstance(x, torch.Tensor):
        return ("T", str(x.dtype), x.device.type, tuple(x.shape), tuple(x.stride()),
                x.storage_offset())
    if x is None or isinstance(x, (bool, int, float, str, complex)):
        return x
    name = type(x).__name__
    if name in ("dtype", "device", "layout", "memory_format"):
        return str(x)
    if name == "Generator":
        return "generator"
    raise TypeError(name)


def _extent_bytes(t):
    """The bytes a strided tensor spans in its storage."""
    if t.numel() == 0:
        return 0
    span = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if n > 0)
    return (t.storage_offset() + span) * t.element_size()


def _real(torch, x):
    """A real tensor shaped as fake tensor x (on the probe's device where x is on a CUDA one),
    holding values no kernel rejects; anything else as it is.

    A 0-dim int64 tensor is made on the host: it is a random-number seed or offset (the
    attention kernels' philox_seed and philox_offset, which the meta functions put on the
    device and the real forward returns on the host, where the backward reads them); an
    operator that wanted it on the device fails its probe cleanly instead."""
    if not isinstance(x, ft.FakeTensor):
        if type(x).__name__ == "device" and x.type == "cuda":
            return torch.device("cuda", 0)
        return x
    device = "cuda" if x.device.type == "cuda" else "cpu"
    if x.dim() == 0 and x.dtype == torch.int64:
        device = "cpu"
    n = _extent_bytes(x) // x.element_size() if x.numel() else 0
    with ft.unset_fake_temporarily():
        base = torch.empty(max(n, 1), dtype=x.dtype, device=device)
        if x.dtype.is_floating_point or x.dtype.is_complex:
            base.fill_(0.5)
        else:
            base.zero_()
        return base.as_strided(tuple(x.shape), tuple(x.stride()), x.storage_offset())


if __name__ == "__main__":
    sys.exit("probe.py is part of gpusim_capture, not a program")
