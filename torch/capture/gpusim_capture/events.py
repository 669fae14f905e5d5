"""events.py - the request stream a capture builds, and its writing as a gpusim trace.

Standard library only: this module knows nothing of PyTorch, so the trace it writes follows
docs/trace-format.md whatever the capture saw. Events are kept in memory in program order and
written once, at exit (a capture of a million requests is ~50 MB of Python tuples).

Thread safety: a free arrives from a weakref callback, which runs wherever the storage's last
reference died (the autograd engine's thread, a garbage collection inside another event), so every
change goes under one re-entrant lock.
"""
import gzip
import os
import threading
import time


class Events:
    """Allocations by id, frees, deferred completions, cache releases and private pools."""

    def __init__(self):
        self.lock = threading.RLock()
        self.rows = []            # (time_us, op, device, stream, id, size)
        self.next_id = 1
        self.live = {}            # id -> (device, stream, size)
        self.pending = []         # ids freed whose completion waits (record_stream)
        self.live_bytes = 0       # rounded as PyTorch counts allocated bytes
        self.peak_bytes = 0
        self.pools = False
        self.t0 = time.monotonic()

    def _now(self):
        return int((time.monotonic() - self.t0) * 1e6)

    def _row(self, op, device, stream, ident, size):
        self.rows.append((self._now(), op, device, stream, ident, size))

    def _complete_pending(self):
        """The allocator processes the events of deferred frees at each request: the capture
        assumes the GPU kept pace with the program, so every one is complete by then."""
        for ident in self.pending:
            dev, stream, _ = self.live.pop(ident)
            self._row("free_done", dev, stream, ident, 0)
        self.pending = []

    def alloc(self, device, stream, size):
        with self.lock:
            self._complete_pending()
            ident = self.next_id
            self.next_id += 1
            self.live[ident] = (device, stream, size)
            self._row("alloc", device, stream, ident, size)
            self.live_bytes += round_up(size)
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
            return ident

    def free(self, ident, deferred=False):
        with self.lock:
            dev, stream, size = self.live[ident]
            self._row("free", dev, stream, ident, size)
            self.live_bytes -= round_up(size)
            if deferred:
                self.pending.append(ident)
            else:
                del self.live[ident]

    def empty_cache(self, device):
        with self.lock:
            self._complete_pending()
            self._row("empty_cache", device, 0, 0, 0)

    def synchronize(self):
        with self.lock:
            self._complete_pending()

    def pool(self, op, device, stream, pool_id, flag=0):
        with self.lock:
            self.pools = True
            self._row(op, device, stream, pool_id, flag)

    def mark(self, device, n):
        with self.lock:
            self._row("mark", device, 0, 0, n)


def round_up(size):
    """PyTorch's smallest unit of allocated bytes (kMinBlockSize): what memory_allocated() sums."""
    return max(512, (size + 511) // 512 * 512) if size else 0


def _clean(value):
    """A header value: no NUL, CR or LF (docs/trace-format.md, the header)."""
    return "".join(" " if c in "\0\r\n" else c for c in str(value))


def write_trace(path, events, header):
    """Write events as a gpusim trace (gzip when path ends in .gz), through a temporary name
    beside it, so a reader never sees half a trace. header: (key, value) pairs, in order."""
    with events.lock:
        rows = list(events.rows)
        version = 3 if events.pools else 1
    lines = [f"# gpusim-trace {version}\n"]
    for key, value in header:
        lines.append(f"# {key}: {_clean(value)}\n")
    lines.append("seq,time_us,op,client,device,stream,id,size\n")
    for seq, (t, op, dev, stream, ident, size) in enumerate(rows):
        lines.append(f"{seq},{t},{op},torch,{dev},{stream},{ident},{size}\n")
    data = "".join(lines).encode("utf-8")
    tmp = f"{path}.tmp{os.getpid()}"
    if path.endswith(".gz"):
        with open(tmp, "wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as f:
                f.write(data)
    else:
        with open(tmp, "wb") as f:
            f.write(data)
    os.replace(tmp, path)
    return len(rows)
