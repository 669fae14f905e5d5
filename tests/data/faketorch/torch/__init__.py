"""A stand-in for PyTorch, for tests/test_verify.sh: the calls gpusim verify's start-up hook
makes (torch/verify/sitecustomize.py), and one allocation, fake_alloc(bytes), that fails as
PyTorch does above the memory fraction. No GPU, no real torch: CI has neither."""
__version__ = "0.0+fake"


class OutOfMemoryError(RuntimeError):
    pass


class _Props:
    total_memory = 80 << 30


class _Cuda:
    def __init__(self):
        self._limit = None
        self._used = False
        self._stats = {"reserved_bytes.all.peak": 0, "allocated_bytes.all.peak": 0,
                       "num_alloc_retries": 0, "num_ooms": 0, "num_device_alloc": 0,
                       "num_device_free": 0, "segment.all.peak": 0}

    def device_count(self):
        return 1

    def get_device_properties(self, d):
        return _Props()

    def set_per_process_memory_fraction(self, frac, d=0):
        self._used = True
        self._limit = int(frac * _Props.total_memory)

    def is_initialized(self):
        return self._used

    def memory_stats(self, d=0):
        return dict(self._stats)

    def fake_alloc(self, n):
        self._used = True
        if self._limit is not None and n > self._limit:
            self._stats["num_ooms"] += 1
            self._stats["num_alloc_retries"] += 1
            raise OutOfMemoryError(f"CUDA out of memory. Tried to allocate {n} bytes")
        self._stats["reserved_bytes.all.peak"] = n
        self._stats["allocated_bytes.all.peak"] = n
        self._stats["num_device_alloc"] += 1


cuda = _Cuda()
