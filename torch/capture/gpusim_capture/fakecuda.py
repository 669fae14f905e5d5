"""fakecuda.py - torch.cuda as a program sees it under a capture, with no GPU behind it.

A program asks torch.cuda whether there is a device, how large it is, which stream is current;
it makes streams, events and CUDA graphs, and calls empty_cache and synchronize. Under a capture
none of these may reach a GPU (there may be none, and the point is to use none of its memory), so
each is replaced by a stand-in that answers as the device the capture was told of would
(GPUSIM_CAPTURE_DEVICE_TOTAL bytes, GPUSIM_CAPTURE_DEVICES devices, compute capability 9.0, the
Hopper parts gpusim's references come from), and turns what the allocator would see (a cache
release, a stream switch, a graph's private pool) into the capture's events.

What a stand-in cannot answer truly (memory_reserved: that is what the prediction is for) it
answers from the capture's own tally and counts in unknowns, which the trace header reports.
"""
import contextlib
import itertools
import threading


class DeviceProperties:
    """torch.cuda.get_device_properties' answer for the captured device."""

    def __init__(self, total):
        self.name = "gpusim capture (no device)"
        self.total_memory = total
        self.major, self.minor = 9, 0
        self.multi_processor_count = 132
        self.L2_cache_size = 50 * 2**20
        self.is_integrated = False
        self.is_multi_gpu_board = False
        self.warp_size = 32
        self.max_threads_per_multi_processor = 2048
        self.regs_per_multiprocessor = 65536
        self.gcnArchName = ""
        self.uuid = "00000000-0000-0000-0000-000000000000"

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major=9, minor=0, "
                f"total_memory={self.total_memory // 2**20}MB, multi_processor_count=132)")


class FakeCuda:
    """The stand-ins, bound to one capture's state (its events, streams, devices)."""

    def __init__(self, torch, events, unknowns, devices, total):
        self.torch = torch
        self.events = events
        self.unknowns = unknowns
        self.n_devices = devices
        self.props = DeviceProperties(total)
        self.tls = threading.local()     # the current device and stream, per thread as in CUDA
        self.ids = itertools.count(1)    # stream handles: 0 is the default stream
        self.pool_ids = itertools.count(1)
        self.default = {}                # device -> its default stream stand-in

    # ---- the current device and stream ----
    def device(self):
        return getattr(self.tls, "device", 0)

    def stream_of(self, device):
        streams = getattr(self.tls, "streams", None)
        s = streams.get(device) if streams else None
        return s.handle if s is not None else 0

    def set_stream(self, s):
        if not hasattr(self.tls, "streams"):
            self.tls.streams = {}
        self.tls.streams[s.device_index] = s

    def current_stream(self, device=None):
        d = self.device() if device is None else _index(device)
        streams = getattr(self.tls, "streams", None)
        s = streams.get(d) if streams else None
        return s if s is not None else self.default_stream(d)

    def default_stream(self, device=None):
        d = self.device() if device is None else _index(device)
        if d not in self.default:
            self.default[d] = self.make_stream_class()(device=d, _handle=0)
        return self.default[d]

    def make_stream_class(self):
        cuda = self

        class Stream:
            """A stream stand-in: a handle that names it in the trace, nothing to wait on."""

            def __init__(self, device=None, priority=0, _handle=None, **kwargs):
                self.device_index = cuda.device() if device is None else _index(device)
                self.handle = next(cuda.ids) if _handle is None else _handle
                self.priority = priority

            cuda_stream = property(lambda self: self.handle)
            stream_id = property(lambda self: self.handle)
            device = property(lambda self: cuda.torch.device("cuda", self.device_index))
            device_type = 1

            def wait_stream(self, other):
                pass

            def wait_event(self, event):
                pass

            def record_event(self, event=None):
                return event if event is not None else cuda.Event()

            def query(self):
                return True

            def synchronize(self):
                cuda.events.synchronize()

            def __enter__(self):
                self._prev = cuda.current_stream(self.device_index)
                cuda.set_stream(self)
                return self

            def __exit__(self, *exc):
                cuda.set_stream(self._prev)

            def __eq__(self, other):
                return isinstance(other, Stream) and other.handle == self.handle and \
                    other.device_index == self.device_index

            def __hash__(self):
                return hash((self.handle, self.device_index))

            def __repr__(self):
                return f"<gpusim capture stream {self.handle} on cuda:{self.device_index}>"

        return Stream

    @contextlib.contextmanager
    def stream(self, s):
        if s is None:
            yield
            return
        prev = self.current_stream(s.device_index)
        self.set_stream(s)
        try:
            yield
        finally:
            self.set_stream(prev)

    # ---- the allocator's entry points a program calls ----
    def empty_cache(self):
        for d in range(self.n_devices):
            self.events.empty_cache(d)

    def synchronize(self, device=None):
        self.events.synchronize()

    def memory_allocated(self, device=None):
        return self.events.live_bytes

    def max_memory_allocated(self, device=None):
        return self.events.peak_bytes

    def unknown_stat(self, name, value):
        """A statistic only the allocator knows (reserved bytes, segments): the capture's
        allocated bytes stand for it, and the header says the program read one."""
        def answer(*args, **kwargs):
            self.unknowns[f"read {name}"] = self.unknowns.get(f"read {name}", 0) + 1
            return value()
        return answer

    def mem_get_info(self, device=None):
        total = self.props.total_memory
        return (max(0, total - self.events.live_bytes), total)

    def memory_stats(self, device=None):
        self.unknowns["read memory_stats"] = self.unknowns.get("read memory_stats", 0) + 1
        a, p = self.events.live_bytes, self.events.peak_bytes
        return {"allocated_bytes.all.current": a, "allocated_bytes.all.peak": p,
                "reserved_bytes.all.current": a, "reserved_bytes.all.peak": p,
                "active_bytes.all.current": a, "active_bytes.all.peak": p,
                "num_alloc_retries": 0, "num_ooms": 0}


def _index(device):
    """A device argument (int, 'cuda:1', torch.device) as its index."""
    if device is None:
        return 0
    if isinstance(device, int):
        return device
    index = getattr(device, "index", None)
    if index is not None:
        return index
    text = str(device)
    return int(text.split(":", 1)[1]) if ":" in text else 0


def make_event_class(cuda):
    class Event:
        """An event stand-in: always complete, no time between two (the capture has no clock
        of the GPU's)."""

        def __init__(self, enable_timing=False, blocking=False, interprocess=False, **kwargs):
            pass

        def record(self, stream=None):
            pass

        def wait(self, stream=None):
            pass

        def query(self):
            return True

        def synchronize(self):
            cuda.events.synchronize()

        def elapsed_time(self, end):
            return 0.0

    return Event


def make_graph_class(cuda, on_capture_begin, on_graph_gone):
    class CUDAGraph:
        """A CUDA graph stand-in: its capture routes the capture stream's requests to a private
        pool (pool_begin .. pool_end, docs/trace-format.md "version 3"), its replay asks the
        allocator for nothing, and its end (reset, or the object's death) releases its use of
        the pool (pool_release), as PyTorch's CUDAGraph does. Its death, not a reset,
        unregisters it from the generator first (on_graph_gone), as PyTorch's destructor does."""

        def __init__(self, keep_graph=False):
            self.pool_id = None
            self.device = 0
            self.stream = 0
            self.registered = False

        def capture_begin(self, pool=None, capture_error_mode="global"):
            self.device = cuda.device()
            self.stream = cuda.stream_of(self.device)
            if pool is not None and tuple(pool) != (0, 0):
                self.pool_id = pool[1] if isinstance(pool, tuple) else pool
            else:
                self.pool_id = next(cuda.pool_ids)
            on_capture_begin(self.device, self.stream)
            self.registered = True
            cuda.events.pool("pool_begin", self.device, self.stream, self.pool_id)

        def capture_end(self):
            cuda.events.pool("pool_end", self.device, self.stream, self.pool_id)

        def replay(self):
            pass

        def instantiate(self):
            pass

        def pool(self):
            return (0, self.pool_id)

        def reset(self):
            if self.pool_id is not None:
                cuda.events.pool("pool_release", self.device, self.stream, self.pool_id)
                self.pool_id = None

        def enable_debug_mode(self):
            pass

        def debug_dump(self, path):
            pass

        def __del__(self):
            try:
                if self.registered:
                    self.registered = False
                    on_graph_gone(self.device)
                self.reset()
            except Exception:  # noqa: BLE001 - at interpreter exit the capture may be gone
                pass

    return CUDAGraph
