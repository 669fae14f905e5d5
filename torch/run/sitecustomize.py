"""sitecustomize.py - gpusim run's start-up hook: the user's unmodified program on gpusim's
allocator (libgpusim_torch.so), for PyTorch and CuPy alike.

`gpusim run` puts this file's folder first on the child's PYTHONPATH and names the library in
GPUSIM_RUN_LIB; the library reads its own settings (GPUSIM_POLICY, GPUSIM_CAPACITY, GPUSIM_TRACE,
GPUSIM_STATS, GPUSIM_BACKEND) at its first request. Only the first Python process that sees
GPUSIM_RUN_LIB takes part (the variable is taken out of the environment, so the program's own
children, data-loader workers among them, run untouched).

Nothing is imported here that the program does not import: an import hook waits for the
program's own `import torch` (or `import cupy`) and, the moment the module is loaded and before
the program's next line, makes gpusim the allocator:
- PyTorch: CUDAPluggableAllocator over gpusim_malloc and gpusim_free, with gpusim_empty_cache
  behind torch.cuda.empty_cache(); an OOM is raised as torch.OutOfMemoryError by the library's
  shim (libgpusim_torch_oom.so beside it), as PyTorch's own allocator raises it, and the shim's
  private pool hooks give CUDA graphs and MemPools their pools (a MemPool made by a stand-in,
  gpusim_mempool.py, where PyTorch refuses to make one over a pluggable allocator), and
  torch.cuda.memory_stats() and its resets answer from gpusim's statistics (gpusim_stats.py),
  where PyTorch's raise for a pluggable allocator.
- CuPy: cupy.cuda.set_allocator with a function that asks gpusim for memory as the client
  "cupy" (gpusim_client_malloc) on CuPy's current device and stream and gives it back
  (gpusim_client_free) when CuPy lets go of it (CuPy's own pool is then not in front: every
  request reaches gpusim, as set_allocator documents). With PyTorch in the same process the two
  are two clients, arranged as GPUSIM_CLIENTS says (separate, shared, cooperative).
Importing this module (as the hook's tests do) does nothing without GPUSIM_RUN_LIB.

A sitecustomize.py of the user's own, if any, is still run: after its work this one imports the
next one on sys.path.
"""
import ctypes
import importlib.abc
import importlib.util
import os
import runpy
import sys

_LIB = os.environ.pop("GPUSIM_RUN_LIB", None)


# CUDAPluggableAllocator's setters of the private pool hooks, in gpusim_pool_hook's order
_POOL_SETTERS = ("set_begin_allocate_to_pool", "set_end_allocate_to_pool_fn", "set_release_pool")


def use_for_torch(torch, lib):
    alloc = torch.cuda.memory.CUDAPluggableAllocator(lib, "gpusim_malloc", "gpusim_free")
    so = ctypes.CDLL(lib)
    hooks = alloc.allocator()
    hooks.set_reset_fn(ctypes.cast(so.gpusim_empty_cache, ctypes.c_void_p).value)
    # CUDA graphs' and MemPools' private pools: the hooks of the library's C++ shim
    # (libgpusim_torch_oom.so), where it and this PyTorch have them
    so.gpusim_pool_hook.restype = ctypes.c_void_p
    so.gpusim_pool_hook.argtypes = (ctypes.c_int,)
    for which, setter in enumerate(_POOL_SETTERS):
        address = so.gpusim_pool_hook(which)
        if address and hasattr(hooks, setter):
            getattr(hooks, setter)(address)
    torch.cuda.memory.change_current_allocator(alloc)
    # what PyTorch refuses a pluggable allocator: torch.cuda.MemPool, torch.cuda.memory_stats()
    for name in ("gpusim_mempool", "gpusim_stats"):
        sibling(name).install(torch, lib)
    say_fatal_ooms(lib)


def sibling(name):
    """The module NAME.py beside this file, loaded by its path (not found on sys.path, where a
    module of the program's might have its name)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def say_fatal_ooms(lib):
    """An OutOfMemoryError (PyTorch's or CuPy's) that ends the program tells the library the run
    died of its last OOM: the frees of the unwinding came after it, so the library would call
    it caught. Done once; a program that sets its own sys.excepthook afterwards takes the hook
    (the library then judges by what came after the OOM, as before)."""
    if getattr(say_fatal_ooms, "done", False):
        return
    say_fatal_ooms.done = True
    so = ctypes.CDLL(lib)
    previous = sys.excepthook

    def excepthook(kind, value, tb):
        if kind.__name__ == "OutOfMemoryError":  # torch.OutOfMemoryError, CuPy's
            so.gpusim_oom_fatal()
        previous(kind, value, tb)

    sys.excepthook = excepthook


def use_for_cupy(cupy, lib):
    so = ctypes.CDLL(lib)
    so.gpusim_client.restype = ctypes.c_int
    so.gpusim_client.argtypes = (ctypes.c_char_p,)
    so.gpusim_client_malloc.restype = ctypes.c_void_p
    so.gpusim_client_malloc.argtypes = (ctypes.c_int, ctypes.c_ssize_t, ctypes.c_int,
                                        ctypes.c_void_p)
    so.gpusim_client_free.restype = None
    so.gpusim_client_free.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_ssize_t,
                                      ctypes.c_int, ctypes.c_void_p)
    for f in (so.gpusim_client_reserved, so.gpusim_client_limit):
        f.restype = ctypes.c_size_t
        f.argtypes = (ctypes.c_int, ctypes.c_int)
    client = so.gpusim_client(b"cupy")  # CuPy's own client: GPUSIM_CLIENTS says how it shares
    memory = cupy.cuda.memory

    class Block:
        """Owns one gpusim allocation: freed when CuPy drops the last pointer into it."""
        __slots__ = ("ptr", "size", "device", "stream")

        def __init__(self, size):
            self.size = size
            self.device = cupy.cuda.runtime.getDevice()
            self.stream = cupy.cuda.get_current_stream().ptr
            self.ptr = so.gpusim_client_malloc(client, size, self.device, self.stream)
            if not self.ptr:  # as CuPy's pool says it: the bytes held so far, the limit
                raise memory.OutOfMemoryError(size,
                                              so.gpusim_client_reserved(client, self.device),
                                              so.gpusim_client_limit(client, self.device))

        def __del__(self):
            if self.ptr:
                so.gpusim_client_free(client, self.ptr, self.size, self.device, self.stream)

    def malloc(size):
        if size <= 0:
            return memory.MemoryPointer(memory.UnownedMemory(0, 0, None), 0)
        b = Block(size)
        return memory.MemoryPointer(memory.UnownedMemory(b.ptr, size, b, b.device), 0)

    cupy.cuda.set_allocator(malloc)
    say_fatal_ooms(lib)


class _AfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds torch and cupy as Python would, and runs a setup once the module is loaded."""

    def __init__(self, lib):
        self.lib = lib
        self.setups = {"torch": use_for_torch, "cupy": use_for_cupy}
        self.inner = {}

    def find_spec(self, name, path, target=None):
        if name not in self.setups:
            return None
        sys.meta_path.remove(self)  # find it without this finder, as Python would
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        self.inner[name] = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self.inner[spec.name].create_module(spec)

    def exec_module(self, module):
        self.inner[module.__name__].exec_module(module)
        setup = self.setups.pop(module.__name__)
        if not self.setups:
            sys.meta_path.remove(self)
        setup(module, self.lib)


if _LIB:
    sys.meta_path.insert(0, _AfterImport(_LIB))

runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hookchain.py"),
               {"HOOK": __file__}, "__gpusim_chain__")  # the user's own sitecustomize, after this one
