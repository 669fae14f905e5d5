"""gpusim_mempool.py - torch.cuda.MemPool under `gpusim run`, where PyTorch refuses to make one.

PyTorch 2.11's CUDAPluggableAllocator raises "pluggable does not yet support
createOrIncrefPool" when a program makes a torch.cuda.MemPool, so a program that uses one could
not run on gpusim's allocator at all. gpusim run's hook (sitecustomize.py beside this file)
calls install(), which puts a stand-in class in torch.cuda.MemPool's place. Making one first
tries PyTorch's own class (a PyTorch that takes pools from a pluggable allocator gets it); on
that refusal the stand-in does what the real MemPool does, through the library:
- construction: a fresh pool id from PyTorch's own counter (torch.cuda.graph_pool_handle, as a
  user-made MemPool's), the pool made with one use (createOrIncrefPool: gpusim_mempool_create);
- torch.cuda.use_mem_pool(pool) needs nothing more: it reads pool.id and calls PyTorch's
  begin, end and release, which reach the library through the pool hooks it already has;
- deletion: the use given back and the pool's cache emptied at once (the real destructor's
  releasePool and emptyCache of the pool: gpusim_mempool_destroy);
- use_count(): the library's count of the pool's uses.
What it does not model, it says on stderr and runs as an ordinary MemPool: an allocator of the
pool's own (allocator=), use_on_oom and no_split. Not a _MemPool either: a program that passes
one to PyTorch's C++ (a CUDA graph's capture retaining a pool under use_mem_pool) is refused
there.
"""
import ctypes
import sys


def install(torch, lib):
    """torch.cuda.MemPool (and torch.cuda.memory.MemPool) become the stand-in below."""
    memory = torch.cuda.memory
    real = getattr(memory, "MemPool", None)
    if real is None:  # a PyTorch before MemPools
        return
    so = ctypes.CDLL(lib)
    args = (ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64)
    for name, res in (("gpusim_mempool_create", ctypes.c_int),
                      ("gpusim_mempool_destroy", None),
                      ("gpusim_mempool_use_count", ctypes.c_int)):
        f = getattr(so, name)
        f.argtypes, f.restype = args, res

    class MemPool:
        __doc__ = real.__doc__

        def __new__(cls, *args, **kwargs):
            try:
                return real(*args, **kwargs)
            except RuntimeError as e:
                if "createOrIncrefPool" not in str(e):
                    raise
            return super().__new__(cls)

        def __init__(self, allocator=None, use_on_oom=False, no_split=False, **other):
            unmodelled = [k for k, v in (("allocator", allocator is not None),
                                         ("use_on_oom", use_on_oom), ("no_split", no_split),
                                         *other.items()) if v]
            if unmodelled:
                print(f"gpusim: torch.cuda.MemPool({', '.join(unmodelled)}): not modelled; "
                      "the pool is an ordinary MemPool", file=sys.stderr)
            self._device = torch.cuda.current_device()
            self._id = tuple(torch.cuda.graph_pool_handle())
            self._made = so.gpusim_mempool_create(self._device, *self._id) == 0
            if not self._made:
                print(f"gpusim: torch.cuda.MemPool {self._id}: no pool could be made; its "
                      "requests go to the ordinary pools", file=sys.stderr)

        @property
        def id(self):
            return self._id

        @property
        def allocator(self):
            return None

        def use_count(self):
            return so.gpusim_mempool_use_count(self._device, *self._id)

        def snapshot(self, *args, **kwargs):
            return torch.cuda.memory_snapshot(self._id, *args, **kwargs)

        def __del__(self):
            if getattr(self, "_made", False):
                so.gpusim_mempool_destroy(self._device, *self._id)

    MemPool.__name__ = MemPool.__qualname__ = "MemPool"
    MemPool.__module__ = real.__module__
    memory.MemPool = MemPool
    if getattr(torch.cuda, "MemPool", None) is real:
        torch.cuda.MemPool = MemPool
