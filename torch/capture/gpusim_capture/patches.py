"""patches.py - which of PyTorch's CUDA entry points a capture replaces, and with what.

Everything a program may call to reach the GPU outside tensor operations is replaced by the
stand-ins of fakecuda.py; tensor operations themselves are the dispatch mode's (mode.py). Each
replacement is an attribute set on torch.cuda (or torch.Tensor), so code that looks the name up
when it runs (PyTorch's own Python, the program) sees it; a program that took a reference before
the capture started (none can: the hook runs first) would not.
"""
import sys

from . import fakecuda


def install(torch, cap):
    """Replace torch.cuda's device, stream, event, graph and statistics entry points with cap's
    stand-ins (cap: the Capture of __init__.py)."""
    cuda, fc = torch.cuda, cap.fake_cuda
    Stream = fc.make_stream_class()
    Event = fakecuda.make_event_class(fc)
    Graph = fakecuda.make_graph_class(fc, cap.kernels.on_graph_capture, cap.kernels.on_graph_gone)
    fc.Stream, fc.Event = Stream, Event

    def set_device(d):
        fc.tls.device = fakecuda._index(d)

    class device_ctx:  # torch.cuda.device(d): a context that makes d current
        def __init__(self, d):
            self.idx = fakecuda._index(d) if d is not None else None

        def __enter__(self):
            self.prev = fc.device()
            if self.idx is not None and self.idx >= 0:
                set_device(self.idx)

        def __exit__(self, *exc):
            set_device(self.prev)

    replacements = {
        "is_available": lambda: True,
        "is_initialized": lambda: True,
        "_lazy_init": lambda: None,
        "init": lambda: None,
        "device_count": lambda: fc.n_devices,
        "current_device": fc.device,
        "set_device": set_device,
        "device": device_ctx,
        "get_device_name": lambda d=None: fc.props.name,
        "get_device_capability": lambda d=None: (fc.props.major, fc.props.minor),
        "get_device_properties": lambda d=None: fc.props,
        "get_arch_list": lambda: ["sm_90"],
        "is_bf16_supported": lambda including_emulation=True: True,
        "synchronize": fc.synchronize,
        "empty_cache": fc.empty_cache,
        "manual_seed": lambda seed: None,
        "manual_seed_all": lambda seed: None,
        "seed": lambda: None,
        "seed_all": lambda: None,
        "initial_seed": lambda: 0,
        "Stream": Stream,
        "Event": Event,
        "stream": fc.stream,
        "current_stream": fc.current_stream,
        "default_stream": fc.default_stream,
        "set_stream": fc.set_stream,
        "CUDAGraph": Graph,
        "graph_pool_handle": lambda: (0, next(fc.pool_ids)),
        "is_current_stream_capturing": lambda: False,
        "memory_allocated": fc.memory_allocated,
        "max_memory_allocated": fc.max_memory_allocated,
        "memory_reserved": fc.unknown_stat("memory_reserved", lambda: fc.events.live_bytes),
        "max_memory_reserved": fc.unknown_stat("max_memory_reserved",
                                               lambda: fc.events.peak_bytes),
        "memory_stats": fc.memory_stats,
        "mem_get_info": fc.mem_get_info,
        "reset_peak_memory_stats": lambda d=None: setattr(fc.events, "peak_bytes",
                                                          fc.events.live_bytes),
        "reset_max_memory_allocated": lambda d=None: setattr(fc.events, "peak_bytes",
                                                             fc.events.live_bytes),
        "reset_accumulated_memory_stats": lambda d=None: None,
        "set_per_process_memory_fraction": cap.memory_fraction,
        "ipc_collect": lambda: None,
    }
    for name, value in replacements.items():
        setattr(cuda, name, value)
    cuda.memory.empty_cache = fc.empty_cache
    cuda.memory.set_per_process_memory_fraction = cap.memory_fraction
    cuda.graphs.CUDAGraph = Graph
    # Pinned host memory is the host's, not the device's: pinning is a no-op under a capture
    # (with no GPU it could not be done at all).
    torch.Tensor.pin_memory = lambda self, *a, **k: self
    torch.Tensor.is_pinned = lambda self, *a, **k: False
    # (a function, so that tensor.record_stream(s) binds the tensor)
    torch.Tensor.record_stream = lambda self, stream: cap.record_stream(self, stream)
    foreach_as_real(torch)


def foreach_as_real(torch):
    """Let PyTorch choose its multi-tensor (foreach) kernels for fake tensors as it does for real
    ones: the optimizers and clip_grad_norm_ test type(p) against the plain tensor types, and a
    fake parameter's type is FakeTensor, so they would take the one-tensor-at-a-time path, whose
    temporaries are one parameter's instead of all of them at once (AdamW's peak differs by
    the size of the model)."""
    # (by their modules: torch.optim deletes its submodules' names from its namespace)
    import torch.optim.optimizer as opt
    import torch.utils._foreach_utils as fu

    from torch._subclasses.fake_tensor import FakeTensor as fake

    types = getattr(opt, "_foreach_supported_types", None)
    if isinstance(types, list) and fake not in types:
        types.append(fake)
    old = getattr(fu, "_has_foreach_support", None)
    plain = (torch.Tensor, torch.nn.Parameter, fake)

    def has_foreach_support(tensors, device):
        return fu._device_has_foreach_support(device) and \
            all(t is None or type(t) in plain for t in tensors)

    if old is not None:  # and wherever it was imported by name
        for mod in list(sys.modules.values()):
            if getattr(mod, "__name__", "").startswith("torch") and \
                    getattr(mod, "_has_foreach_support", None) is old:
                mod._has_foreach_support = has_foreach_support
