"""The input: the file read as a stream (gunzipped as it is read), the progress line, the
format detected from the content; the RMM log reader; READERS, a reader per format."""

import gzip
import os
import re
import time
import zlib

from .model import PROG, RMM_HEADER, ConvertError, Event, MiB, Recording, check_size, stream_u64
from .snapshot import read_snapshot


# ---------------------------------------------------------------------------------------------
# Reading the file and detecting the format
# ---------------------------------------------------------------------------------------------

class Input:
    """The input file, read as a stream: gunzipped as it is read when it starts with the gzip
    magic, its errors turned into ConvertError; tell() is the position in the file itself (for
    the progress line's percentage), size its size."""

    def __init__(self, path):
        try:
            self.raw = open(path, "rb")
            self.size = os.fstat(self.raw.fileno()).st_size
            magic = self.raw.read(2)
            self.raw.seek(0)
        except OSError as e:
            raise ConvertError(f"cannot read: {e.strerror or e}") from None
        self.f = gzip.GzipFile(fileobj=self.raw, mode="rb") if magic == b"\x1f\x8b" else self.raw
        self.head = self.read(4096)
        if not self.head:
            raise ConvertError("empty file")

    def read(self, n=-1):
        if getattr(self, "head", None):
            # what detect_format looked at comes first
            out, self.head = self.head, b""
            if n < 0:
                return out + self._read(-1)
            return out + (self._read(n - len(out)) if n > len(out) else b"")
        return self._read(n)

    def read_all(self, budget):
        """The rest of the input, read a MiB at a time under budget (a MemoryBudget): a few KiB
        of gzip can hold GiBs."""
        parts, total = [], 0
        while True:
            chunk = self.read(1 << 20)
            if not chunk:
                break
            total += len(chunk)
            budget.check(total)     # (and the copy that joins them)
            parts.append(chunk)
        return b"".join(parts)

    def _read(self, n):
        try:
            return self.f.read(n)
        except EOFError:
            raise ConvertError("truncated gzip file (compressed data ends early)") from None
        except (gzip.BadGzipFile, zlib.error, OSError) as e:
            raise ConvertError(f"corrupt gzip file ({e})") from None

    def tell(self):
        try:
            return self.raw.tell()
        except (OSError, ValueError):
            return 0

    def close(self):
        self.raw.close()


class Progress:
    """A progress line on stderr for a long conversion: entries read, the share of the input
    read, the rate; on a terminal rewritten in place (carriage return) at most 4 times a second,
    and erased at the end. Where stderr is no terminal (--progress into a batch job's log), a
    plain line every 5 seconds instead, each ended by a newline, none erased: a log holds no
    control codes. Nothing at all unless enabled (--progress, or stderr a terminal and no
    --quiet)."""

    INTERVAL = 0.25     # seconds between two updates of the line
    LOG_INTERVAL = 5.0  # between two lines into a file or a pipe

    def __init__(self, stream, label, inp, enabled):
        self.stream, self.label, self.inp, self.enabled = stream, label, inp, enabled
        self.t0 = self.last = time.monotonic()
        self.shown = False
        isatty = getattr(stream, "isatty", None)
        self.tty = bool(enabled and isatty and isatty())
        if not self.tty:
            self.last -= self.LOG_INTERVAL  # a log's first line at once: the run is under way

    def __call__(self, entries, pos=None):
        """entries read so far; pos: the bytes of the input read, where not inp.tell() (the
        C reader reads the file itself)."""
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.last < (self.INTERVAL if self.tty else self.LOG_INTERVAL):
            return
        self.last = now
        pos = self.inp.tell() if pos is None else pos
        pct = 100.0 * pos / self.inp.size if self.inp.size else 0.0
        rate = entries / max(now - self.t0, 1e-9)
        line = (f"{PROG}: {self.label}: {entries:,} entries, {pct:.0f}% of "
                f"{self.inp.size / MiB:.1f} MiB read, {rate / 1000:.0f}k entries/s")
        self.stream.write(f"\r{line} " if self.tty else line + "\n")
        self.stream.flush()
        self.shown = True

    def step(self, what):
        """A later stage (no count of its own): said on the line, when there is one."""
        if self.enabled and self.shown:
            line = f"{PROG}: {self.label}: {what}"
            self.stream.write(f"\r\x1b[K{line}" if self.tty else line + "\n")
            self.stream.flush()

    def done(self):
        if self.shown and self.tty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
        self.shown = False


def detect_format(data):
    """Name the input format from the (decompressed) content.

    An RMM log is recognised by its CSV header. Anything else is tried as a pickle: pickle
    protocol 2+ starts with the PROTO opcode 0x80, but protocols 0 and 1 can start with almost
    any opcode, so the unpickler itself decides (read_snapshot reports what it found).
    """
    head = data[:4096].lstrip(b"\xef\xbb\xbf").lstrip()
    if head.startswith(RMM_HEADER.encode()):
        return "rmm-log"
    return "pytorch-snapshot"


# ---------------------------------------------------------------------------------------------
# RMM logging_resource_adaptor CSV
# ---------------------------------------------------------------------------------------------

_RMM_TIME = re.compile(r"^(\d+):(\d+):(\d+)[.:](\d+)$")


def _rmm_int(text, where, column):
    """Pointers and streams are printed as hex ("0x7f..."), sizes in decimal."""
    t = text.strip()
    try:
        if t.lower() in ("nullptr", "(nil)"):
            return 0
        return int(t, 16) if t.lower().startswith("0x") else int(t)
    except ValueError:
        raise ConvertError(f"{where}: bad {column} {text!r}") from None


def read_rmm_log(data):
    """Read an RMM logging_resource_adaptor log: Thread,Time,Action,Pointer,Size,Stream.

    RMM logs with the pattern "%t,%H:%M:%S.%f" so Time is a wall-clock time of day; we turn it
    into microseconds and add a day whenever it wraps past midnight. The adaptor wraps one
    memory resource of one device, so everything is device 0. Frees are immediate.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ConvertError(f"RMM log is not UTF-8 text ({e})") from None
    lines = text.splitlines()
    rec = Recording("rmm-log")
    header_seen = False
    day = 0
    last_tod = None
    for lineno, line in enumerate(lines, 1):
        where = f"line {lineno}"
        if not line.strip():
            continue
        if not header_seen:
            if line.strip() != RMM_HEADER:
                raise ConvertError(f"{where}: expected the header {RMM_HEADER!r}")
            header_seen = True
            continue
        cols = line.split(",")
        if len(cols) != 6:
            raise ConvertError(f"{where}: expected 6 comma-separated fields, found {len(cols)}")
        _thread, tstr, action, ptr, size, stream = cols
        action = action.strip()
        m = _RMM_TIME.match(tstr.strip())
        if not m:
            raise ConvertError(f"{where}: bad time {tstr!r} (expected HH:MM:SS.ffffff)")
        h, mi, s, frac = m.groups()
        tod = ((int(h) * 60 + int(mi)) * 60 + int(s)) * 1_000_000 + int(frac.ljust(6, "0")[:6])
        if last_tod is not None and tod < last_tod - 12 * 3600 * 1_000_000:
            day += 1                       # wrapped past midnight
        last_tod = tod
        t = day * 86_400_000_000 + tod
        rec.num_raw_events += 1
        if action not in ("allocate", "free", "allocate failure"):
            raise ConvertError(f"{where}: unknown action {action!r} "
                               f"(expected allocate, free, allocate failure)")
        addr = _rmm_int(ptr, where, "pointer")
        nbytes = _rmm_int(size, where, "size")
        strm = stream_u64(_rmm_int(stream, where, "stream"), where)
        check_size(nbytes, where)
        # A failed allocation is the request the program made (an oom row): where the log goes
        # on with new requests the program caught it; where it ends there, or only frees
        # follow, the program died of it (build_trace, trim_after_death). RMM logs no free
        # device memory with it (0).
        op = {"allocate": "alloc", "free": "free"}.get(action, "oom")
        rec.events.append(Event(op, 0, strm, 0 if op == "oom" else addr, nbytes, t, False, where))
        rec.devices.add(0)
        rec.streams.add(strm)
    if not header_seen:
        raise ConvertError("empty RMM log")
    return rec


READERS = {
    "pytorch-snapshot": read_snapshot,
    "rmm-log": read_rmm_log,
}
