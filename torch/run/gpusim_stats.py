"""gpusim_stats.py - torch.cuda.memory_stats() under `gpusim run`, where PyTorch has none to give.

PyTorch's pluggable allocator keeps no statistics: torch.cuda.memory_stats(), and with it
memory_allocated(), max_memory_allocated(), memory_reserved(), max_memory_reserved(),
memory_summary() and the resets of the peaks, raise "CUDAPluggableAllocator does not yet
support getDeviceStats", so a program that logs its memory died under gpusim run. gpusim keeps
every statistic PyTorch's own allocator keeps, the same way (docs/metrics.md): gpusim run's hook
(sitecustomize.py beside this file) calls install(), which puts the library's behind the
torch._C functions torch.cuda's (and torch.accelerator's) Python calls for them:
- _cuda_memoryStats(device): the client torch's statistics on that device as the nested dict
  PyTorch's returns (torch.cuda.memory_stats flattens it into its dotted keys);
- _cuda_resetPeakMemoryStats(device), _cuda_resetAccumulatedMemoryStats(device): the program's
  view starts again from there; the run's own statistics (--stats, the verdict) are not reset
  (torch/memstats.h).
Under shared pools (--clients shared) they are the one allocator's, every client's requests
in them (PyTorch's part is not kept for every figure). A device PyTorch has not used reads as
zeros, and is not opened. torch.accelerator's memory functions (PyTorch 2.9 and later) go
through _accelerator_getDeviceStats and its resets, whose dict has the same keys (PyTorch's
torch/csrc/DeviceAccelerator.cpp): replaced the same way where they exist.
"""
import ctypes
import json


def nested(flat):
    """PyTorch's flat dotted keys back into the nested dict its C++ gives."""
    out = {}
    for key, value in flat.items():
        *path, last = key.split(".")
        d = out
        for p in path:
            d = d.setdefault(p, {})
        d[last] = value
    return out


def install(torch, lib):
    so = ctypes.CDLL(lib)
    so.gpusim_memory_stats.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
    so.gpusim_memory_stats.restype = ctypes.c_size_t
    for f in (so.gpusim_reset_peak_stats, so.gpusim_reset_accumulated_stats):
        f.argtypes, f.restype = (ctypes.c_int,), None

    def memory_stats(device):
        size = 4096
        while True:  # (another thread's request may lengthen a figure between two calls)
            buf = ctypes.create_string_buffer(size)
            n = so.gpusim_memory_stats(device, buf, size)
            if not n:  # as PyTorch says it of a device number out of range
                raise RuntimeError(f"Invalid device argument {device}: gpusim keeps no statistics for it")
            if n < size:
                return nested(json.loads(buf.value))
            size = n + 64

    def reset_peak(device):
        so.gpusim_reset_peak_stats(device)

    def reset_accumulated(device):
        so.gpusim_reset_accumulated_stats(device)

    C = torch._C
    C._cuda_memoryStats = memory_stats
    C._cuda_resetPeakMemoryStats = reset_peak
    C._cuda_resetAccumulatedMemoryStats = reset_accumulated
    # torch.accelerator's (PyTorch 2.9 and later): the same nested dict, the same keys
    for name, f in (("_accelerator_getDeviceStats", memory_stats),
                    ("_accelerator_resetPeakStats", reset_peak),
                    ("_accelerator_resetAccumulatedStats", reset_accumulated)):
        if hasattr(C, name):
            setattr(C, name, f)
