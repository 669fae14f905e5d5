"""mode.py - the dispatch mode that sees every CUDA storage made and freed, in program order.

Every tensor operation passes through CaptureMode. One on the device (a CUDA tensor among its
inputs, or a CUDA device asked for) runs under PyTorch's FakeTensorMode, on sizes alone; one on
the host runs for real, so the program's CPU side (data, model initialisation before .cuda(),
values on the host) is what it would be, and a module moved to the GPU gets fake parameters the
ordinary way (a host tensor made fake would be swapped in place, which PyTorch refuses for the
fake tensors' own bookkeeping). After an operation, each output tensor on a CUDA device whose storage the capture
has not seen is a new request to the caching allocator: its storage's bytes (what the real kernel
would pass to the allocator, before rounding), on the current stream. The storage's own lifetime
is the allocation's: a weak reference to it calls back when the last tensor, view or saved
tensor holding it is gone, which is when the real program would have freed the block (PyTorch
keeps one Python object per storage for as long as the storage lives, so the callback fires at
the storage's death, not at the death of one wrapper).

Where FakeTensorMode cannot go on (a value read back: .item(), a bool(); an output whose shape
depends on values: nonzero), the capture goes on with a stand-in (0, False; the largest shape)
and counts it in unknowns, which the trace header reports.
"""
import weakref

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode
from torch._subclasses import fake_tensor as ft

_TO_COPY = torch.ops.aten._to_copy.default
_STANDIN = {"bool": False, "int": 0, "float": 0.0, "SymInt": 0, "SymFloat": 0.0,
            "SymBool": False}


class Storage:
    __slots__ = ("ident", "size", "device", "stream", "deferred", "ref")


class Tracker:
    """The live CUDA storages, by the address of their C++ object."""

    def __init__(self, events, fake_cuda):
        self.events = events
        self.fc = fake_cuda
        self.live = {}

    def _died(self, key):
        rec = self.live.pop(key, None)
        if rec is not None:
            self.events.free(rec.ident, deferred=rec.deferred)

    def see(self, t, real_size=None):
        """t: a tensor on a CUDA device, an output of an operation; real_size: the bytes the real
        kernel asked for where a probe learnt it (probe.py), else the storage's. Returns its
        device."""
        st = t.untyped_storage()
        key = st._cdata
        size = st.nbytes()
        rec = self.live.get(key)
        if rec is not None:
            if size > rec.size:  # resized in place: a new block, the old one freed
                old = rec.ident
                rec.ident = self.events.alloc(rec.device, self.fc.stream_of(rec.device), size)
                rec.size = size
                self.events.free(old)
            return rec.device
        device = t.device.index or 0
        if size == 0:  # PyTorch asks the allocator for nothing
            return device
        rec = Storage()
        rec.size, rec.device = size, device
        rec.stream = self.fc.stream_of(device)
        rec.deferred = False
        rec.ident = self.events.alloc(device, rec.stream, real_size or size)
        rec.ref = weakref.ref(st, lambda _r, key=key: self._died(key))
        self.live[key] = rec
        return device

    def record_stream(self, t, stream):
        rec = self.live.get(t.untyped_storage()._cdata)
        handle = getattr(stream, "handle", None)
        if rec is not None and handle is not None and handle != rec.stream:
            rec.deferred = True


class CaptureMode(TorchDispatchMode):
    def __init__(self, fake, tracker, kernels, unknowns, probe):
        super().__init__()
        self.probe = probe
        self.fake = fake
        self.tracker = tracker
        self.kernels = kernels
        self.unknowns = unknowns

    def _count(self, what):
        self.unknowns[what] = self.unknowns.get(what, 0) + 1

    def _on_device(self, args, kwargs):
        """Whether an operation is the device's: a fake (CUDA) tensor among its inputs, or a
        CUDA device asked for. Everything else is the host's, and runs for real."""
        dev = kwargs.get("device")
        if dev is not None and torch.device(dev).type == "cuda":
            return True
        return any(isinstance(a, ft.FakeTensor) for a in pytree.arg_tree_leaves(*args, **kwargs))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self._on_device(args, kwargs):
            return func(*args, **kwargs)
        if func is _TO_COPY and str(kwargs.get("device", "")) == "cpu" and \
                isinstance(args[0], ft.FakeTensor):
            # a copy back to the host: zeros in its place (values read back, as .item())
            self._count("values read back (stand-in 0)")
            x = args[0]
            return torch.zeros(x.shape, dtype=kwargs.get("dtype") or x.dtype)
        try:
            with self.fake:
                out = func(*args, **kwargs)
        except ft.DataDependentOutputException:
            self._count("values read back (stand-in 0)")
            if args and isinstance(args[0], torch.Tensor):  # .item(): in the tensor's own kind
                dt = args[0].dtype
                return False if dt == torch.bool else 0.0 if dt.is_floating_point else 0
            ret = func._schema.returns[0].type if func._schema.returns else None
            return _STANDIN.get(str(ret), 0)
        except ft.DynamicOutputShapeException:
            out = self._largest(func, args, kwargs)
        probed = self.probe.run(func, args, kwargs, out)
        leaves = pytree.tree_leaves(out)
        device = self._play(probed, leaves, args, kwargs) if probed is not None else None
        if probed is not None and probed.value is not None:
            return probed.value
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor) and leaf.device.type == "cuda":
                device = self.tracker.see(leaf)
        if device is not None:
            self.kernels.after(func._overloadpacket.__name__, device, probed is not None)
        return out

    def _play(self, probed, leaves, args, kwargs):
        """A probed operation's requests in the real kernel's order: its outputs at the real
        sizes, and what it took and gave back inside the call. Returns the device."""
        device = None
        for x in pytree.arg_tree_leaves(*args, **kwargs):
            if isinstance(x, ft.FakeTensor) and x.device.type == "cuda":
                device = x.device.index or 0
                break
        if device is None:
            device = self.tracker.fc.device()
        stream = self.tracker.fc.stream_of(device)
        ids = {}
        for step in probed.script:
            if step[0] == "out":
                leaf = leaves[step[1]]
                if isinstance(leaf, torch.Tensor) and leaf.device.type == "cuda":
                    device = self.tracker.see(leaf, step[2])
            elif step[0] == "alloc":
                ids[step[1]] = self.tracker.events.alloc(device, stream, step[2])
            else:
                self.tracker.events.free(ids.pop(step[1]))
        return device

    def _largest(self, func, args, kwargs):
        """An operator whose output's shape depends on values: the largest it can be."""
        name = func._overloadpacket.__name__
        x = args[0]
        self._count(f"data-dependent shape ({name}, largest assumed)")
        with self.fake:
            if name == "nonzero":
                return torch.empty((x.numel(), x.dim()), dtype=torch.long, device=x.device)
            if name == "masked_select":
                n = torch.broadcast_shapes(x.shape, args[1].shape).numel()
                return torch.empty((n,), dtype=x.dtype, device=x.device)
        raise RuntimeError(f"gpusim capture: {func} has an output whose shape depends on the "
                           "values computed, which a capture does not have")
