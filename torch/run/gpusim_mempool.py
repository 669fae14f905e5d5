"""gpusim_mempool.py - torch.cuda.MemPool under `gpusim run`, where PyTorch refuses to make one.

PyTorch 2.11's CUDAPluggableAllocator raises "pluggable does not yet support
createOrIncrefPool" when a program makes a torch.cuda.MemPool, so a program that uses one could
not run on gpusim's allocator at all. gpusim run's hook (sitecustomize.py beside this file)
calls install(), which puts a stand-in class in torch.cuda.MemPool's place. Making one first
tries PyTorch's own class (a PyTorch that takes pools from a pluggable allocator gets it); on
that refusal (and for every MemPool after it, and a program's subclass of the class) the
stand-in does what the real MemPool does, through the library:
- construction: a fresh pool id from PyTorch's own counter (torch.cuda.graph_pool_handle, which
  a user-made MemPool's id comes from; the refused construction took one too, so the ids are not
  those a native run gets), the pool made with one use (createOrIncrefPool:
  gpusim_mempool_create; where the library holds 15 private pools already, the use is owed and
  made when the pool is next used and a slot is free);
- torch.cuda.use_mem_pool(pool) needs nothing more: it reads pool.id and calls PyTorch's
  begin, end and release, which reach the library through the pool hooks it already has;
- deletion: the use given back and the pool's cache emptied at once (the real destructor's
  releasePool and emptyCache of the pool: gpusim_mempool_destroy);
- use_count(): the library's count of the pool's uses (0 under a policy with no private pools:
  bfc, tlsf, preallocate, the rmm and cuda-async families);
- copy, deepcopy and pickle refused, as for PyTorch's own (one owner: a copy would release the
  pool twice).
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

    refused = []  # PyTorch refused to make one: the stand-in from then on

    class MemPool:
        __doc__ = real.__doc__

        def __new__(cls, *args, **kwargs):
            # (a program's subclass has arguments of its own: it gets the stand-in)
            if cls is MemPool and not refused:
                try:
                    return real(*args, **kwargs)
                except RuntimeError as e:
                    if "createOrIncrefPool" not in str(e):
                        raise
                    refused.append(True)
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
            if so.gpusim_mempool_create(self._device, *self._id):
                print(f"gpusim: torch.cuda.MemPool {self._id}: no pool could be made now (15 "
                      "private pools); its requests go to the ordinary pools until one can be",
                      file=sys.stderr)
            self._live = True

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
            if getattr(self, "_live", False):  # (not when __init__ failed)
                self._live = False
                so.gpusim_mempool_destroy(self._device, *self._id)

        # One owner, as a _MemPool's C++ object: a copy would release the pool twice
        def __reduce__(self):
            raise TypeError("cannot pickle 'MemPool' object")

        def __copy__(self):
            raise TypeError("cannot copy 'MemPool' object")

        def __deepcopy__(self, memo):
            raise TypeError("cannot copy 'MemPool' object")

    MemPool.__name__ = MemPool.__qualname__ = "MemPool"
    MemPool.__module__ = real.__module__
    memory.MemPool = MemPool
    if getattr(torch.cuda, "MemPool", None) is real:
        torch.cuda.MemPool = MemPool
