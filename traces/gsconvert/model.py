"""The converter's model: its constants and errors, the Event a reader makes (and EventColumns,
a snapshot's events in arrays), the Recording a reader returns, the checks of what a trace can
hold (sizes, times, header text), and the Trace that build_trace makes (its rows, TraceRows)."""

import array
import collections
import re
import sys


PROG = "convert.py"
EXIT_ERROR = 2
TRACE_MAGIC = "# gpusim-trace 1"     # a trace without oom rows
TRACE_MAGIC_2 = "# gpusim-trace 2"   # with oom rows (requests that failed in the recorded run)
TRACE_MAGIC_3 = "# gpusim-trace 3"   # with private pool rows (pool_begin, pool_end, pool_release)
POOL_ACTIONS = ("pool_begin", "pool_end", "pool_release")
MiB = 1 << 20
TRACE_COLUMNS = "seq,time_us,op,client,device,stream,id,size"
# With frames (docs/trace-format.md, "Frames"): '# frame N: file:line:function' header lines
# and a 9th column naming an alloc's or oom's frame.
TRACE_COLUMNS_FRAMES = TRACE_COLUMNS + ",frame"
REFERENCE_FORMAT = "gpusim-reference 1"
RMM_HEADER = "Thread,Time,Action,Pointer,Size,Stream"

# Snapshot actions that describe what the allocator did (not what the program asked for).
# They are the reference answer; the trace leaves them out so it replays under any policy.
ALLOCATOR_ACTIONS = ("segment_alloc", "segment_free", "segment_map", "segment_unmap", "oom")
PROGRAM_ACTIONS = ("alloc", "free_requested", "free_completed")
IGNORED_ACTIONS = ("snapshot",)


class ConvertError(Exception):
    """Bad input or an impossible conversion; main() prints it as one line and exits 2."""


def warn(label, message):
    print(f"{PROG}: {label}: warning: {message}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------
# Common event model shared by every input reader.
#
# A reader turns its format into a list of Event, in replay order, using these actions:
#   'alloc'      a request (addr identifies the block while it lives)
#   'free'       the program released the block at addr; deferred=True when its completion is
#                recorded separately later (PyTorch record_stream), False when immediate
#   'free_done'  the deferred completion of an earlier 'free' at addr
#   one of ALLOCATOR_ACTIONS   (reference only)
# build_trace() then resolves addresses to ids. Adding an input format means adding a reader.
# ---------------------------------------------------------------------------------------------

_tuple_new = tuple.__new__     # an Event made at once (Event(...) is a Python-level __new__)
Event = collections.namedtuple(
    "Event", "action device stream addr size time_us deferred where frame", defaults=(None,))

# An Event's where: a string ("line 12" of an RMM log), or, for a snapshot's, the entry's index
# in its device's list (said "device D event I" by _where: the string only when a message needs
# it, not 70 bytes and an f-string an entry).


def _where(ev):
    return _said(ev.device, ev.where)


def _said(device, where):
    return where if where.__class__ is str else f"device {device} event {where}"


_ACTIONS = ("alloc", "free", "free_done", "segment_alloc", "segment_free", "segment_map",
            "segment_unmap", "oom", "empty_cache") + ("pool_begin", "pool_end", "pool_release")
_ACTION_CODE = {a: k for k, a in enumerate(_ACTIONS)}
_A_ALLOC, _A_FREE, _A_FREE_DONE, _A_OOM, _A_EMPTY_CACHE, _A_POOL_BEGIN = 0, 1, 2, 7, 8, 9
_BIG = -(1 << 63)       # EventColumns: the value is in big (see there)


def _frame_number(frames, frame_no, frame):
    """frame's number in the table frames (its inverse frame_no), appended when new; 0 is no
    frame. EventColumns, TraceRows and build_trace number frames alike."""
    f = frame_no.get(frame)
    if f is None:
        f = frame_no[frame] = len(frames)
        frames.append(frame)
    return f


class EventColumns:
    """A snapshot's events as parallel arrays (about 60 bytes an event, where an Event tuple and
    its objects took about 300: the speed work, a 5-million-entry snapshot in bounded memory).
    Indexing and iteration give the same Events as a list of them would. addr and time_us
    are 64-bit signed; a value that is not (a float time, an address past 2^63) is kept in
    big, keyed by (column, index), with _BIG in the array; frames are numbers in frames."""

    __slots__ = ("action", "device", "stream", "addr", "size", "time", "deferred", "where",
                 "frame", "big", "frames", "frame_no", "scan")

    def __init__(self):
        self.action = array.array("B")
        self.deferred = array.array("B")
        self.device = array.array("Q")
        self.stream = array.array("Q")
        self.addr = array.array("q")
        self.size = array.array("Q")
        self.time = array.array("q")
        self.where = array.array("Q")
        self.frame = array.array("I")
        self.big = {}
        self.frames = [None]            # frame number -> top user frame (0: none)
        self.frame_no = {None: 0}
        # build_trace's pass over exactly these events, made by the C reader (a Scan), or None
        self.scan = None

    def add(self, action, device, stream, addr, size, t, deferred, where, frame):
        """action: its code (_ACTION_CODE); the rest as an Event's fields."""
        k = len(self.action)
        try:
            self.addr.append(addr)
        except (OverflowError, TypeError):
            self.addr.append(_BIG)
            self.big["a", k] = addr
        try:
            self.time.append(t)
        except (OverflowError, TypeError):
            self.time.append(_BIG)
            self.big["t", k] = t
        self.action.append(action)
        self.deferred.append(deferred)
        self.device.append(device)
        self.stream.append(stream)
        self.size.append(size)
        self.where.append(where)
        # _frame_number inline: once per snapshot event, where the call cost about 5% of a
        # conversion
        f = self.frame_no.get(frame)
        if f is None:
            f = self.frame_no[frame] = len(self.frames)
            self.frames.append(frame)
        self.frame.append(f)

    def append(self, ev):
        self.add(_ACTION_CODE[ev.action], ev.device, ev.stream, ev.addr, ev.size, ev.time_us,
                 ev.deferred, ev.where, ev.frame)

    def __len__(self):
        return len(self.action)

    def __getitem__(self, k):
        if k < 0:
            k += len(self.action)
        addr, t = self.addr[k], self.time[k]
        if addr == _BIG:
            addr = self.big.get(("a", k), addr)
        if t == _BIG:
            t = self.big.get(("t", k), t)
        return _tuple_new(Event, (_ACTIONS[self.action[k]], self.device[k], self.stream[k], addr,
                                  self.size[k], t, self.deferred[k] == 1, self.where[k],
                                  self.frames[self.frame[k]]))

    def __iter__(self):
        if self.big:
            return (self[k] for k in range(len(self.action)))
        return self._iter()

    def _iter(self):
        names, frames, new = _ACTIONS, self.frames, _tuple_new
        for a, dev, stream, addr, size, t, d, w, f in zip(
                self.action, self.device, self.stream, self.addr, self.size, self.time,
                self.deferred, self.where, self.frame):
            yield new(Event, (names[a], dev, stream, addr, size, t, d == 1, w, frames[f]))

    def has(self, actions):
        """Whether an event's action is one of actions (names)."""
        return any(self.action.count(_ACTION_CODE[a]) for a in actions)


def _has_action(events, actions):
    if isinstance(events, EventColumns):
        return events.has(actions)
    return any(e.action in actions for e in events)


class Recording:
    """What a reader found: the events plus metadata for the header and the reference."""

    def __init__(self, kind):
        self.kind = kind                  # source kind for '# source:' ("pytorch-snapshot", ...)
        self.events = []                  # list of Event, in replay order
        self.allocator_conf = None        # PYTORCH_CUDA_ALLOC_CONF string, or None if unknown
        self.allocator_settings = None    # the snapshot's allocator_settings dict, or None
        self.num_raw_events = 0           # entries in the log, all actions (incl. 'snapshot')
        self.devices = set()
        self.streams = set()
        # Blocks the allocator held when the log ended, as (device, addr, size, stream), or None
        # when the format does not say. Lets build_trace() find allocations made before the log
        # began and never freed during it (a snapshot's 'segments' lists them).
        self.final_blocks = None
        # cudaMalloc'd segments (not expandable) the allocator held when the log ended, as
        # (device, addr); None when the format does not say. One the log never saw made was made
        # before the log began.
        self.final_segments = None
        # A snapshot's events per device (allocator actions included), before the merge: the
        # inference of empty_cache() reads one device's allocator at a time.
        self.per_device = None
        self.num_inferred_empty_cache = 0
        # A snapshot's final segments that belong to a private pool, per device, as
        # {device: [(address, total_size, expandable, pool id tuple)]}; None when not known.
        self.final_pool_segments = None
        self.num_private_pools = 0
        # Bytes of the segments the allocator held when the log ended, per device ({device:
        # bytes}; a snapshot's 'segments'), or None: what was reserved before the log began
        # follows from it (limit_at_death).
        self.final_reserved = None
        # The PyTorch that recorded the run, as torch.__version__ says it ("2.13.0+cu130"; a
        # NAME.json's "torch"), or None: the trace's pytorch_version header, which plain
        # pytorch follows (docs/pytorch-allocator.md §9).
        self.pytorch_version = None
        # 2.12+ snapshots name each entry's private pool (pool_id): {pool id: allocations} of
        # the pools other than the ordinary ones, a check on the pools inferred.
        self.pool_ids = {}
        # gpusim replay --export-snapshot's own dict ("gpusim": simulated, trace, policy,
        # capacity_bytes, device_total_bytes), or None for a snapshot of a real run.
        self.gpusim_export = None


# ---------------------------------------------------------------------------------------------
# Values: what a trace can hold, and header text
# ---------------------------------------------------------------------------------------------

def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def stream_u64(v, where):
    """The stream column holds the raw 64-bit stream handle, read back as unsigned.

    PyTorch and RMM record a cudaStream_t (a pointer) as a signed 64-bit integer; a negative
    value is the same handle with the top bit set, so it is written as its unsigned twin.
    """
    if v < 0:
        v += 1 << 64
    if not 0 <= v < 1 << 64:
        raise ConvertError(f"{where}: stream {v} does not fit in 64 bits")
    return v


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# Limits of what the trace can say (docs/trace-format.md, "Limits"): every number in an event
# line is an unsigned 64-bit integer, and a device's size is at most GS_MAX_DEVICE_BYTES (2^44,
# util/util.h). A value past them is refused here, with a message, rather than written for the
# reader to refuse later (or, for a time, to wrap).
U64_LIMIT = 1 << 64
MAX_DEVICE_BYTES = 1 << 44


def check_size(v, where):
    """A recorded size: an integer 0 <= v < 2^64 (what the trace's size column can hold)."""
    if v < 0:
        raise ConvertError(f"{where}: negative size {v}")
    if v >= U64_LIMIT:
        raise ConvertError(f"{where}: size {v} does not fit in 64 bits (2^64 and more)")
    return v


def check_time(t, where):
    """A recorded time: a finite number (NaN or an infinity would have no place in the order)."""
    if isinstance(t, float) and (t != t or t in (float("inf"), float("-inf"))):
        raise ConvertError(f"{where}: 'time_us' is {t}, not a finite number")
    return t


def device_total_ok(v):
    """A device size the trace reader accepts: an integer 1 .. 2^44."""
    return _is_int(v) and 0 < v <= MAX_DEVICE_BYTES


# Header values are the rest of a '# key: value' line: a line break in one would start a new
# header line (a forged '# device_total_bytes: 1', say), and the reader refuses NUL and CR.
# Free text (the source's file name) is written with its control characters escaped as \xNN;
# a value gpusim reads as a setting (allocator_conf) is refused instead, since an altered
# setting would be replayed as if it were the recorded one.
# The C1 controls (0x9b is a terminal's CSI), the bidirectional marks, embeddings and isolates,
# and the line and paragraph separators count as control characters too, as gpusim's
# gs_unichar_hidden counts them: a terminal acts on them, or they reorder what it shows.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _escaped(m):
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def header_text(value):
    """Free text for a header line: control characters as \\xNN or \\uNNNN (backslashes stay
    as they are)."""
    value = _CONTROL.sub(_escaped, value)
    # A file name that is not UTF-8 comes as surrogate escapes, which UTF-8 cannot encode.
    return re.sub("[\ud800-\udfff]", lambda m: f"\\x{ord(m.group()) & 0xff:02x}", value)


def header_setting(key, value):
    """A header value gpusim reads: refused when it holds a control character."""
    m = _CONTROL.search(value) or re.search("[\ud800-\udfff]", value)
    if m:
        raise ConvertError(f"the recorded {key} {value[:60]!r} holds a control character "
                           f"({ord(m.group()):#04x}) at offset {m.start()}; a header value is "
                           f"one line of text, and this one cannot be written as recorded")
    return value


# ---------------------------------------------------------------------------------------------
# The trace: its rows (build_trace makes them, render_trace writes them)
# ---------------------------------------------------------------------------------------------

_OPS = ("alloc", "free", "free_done", "oom", "empty_cache", "mark") + POOL_ACTIONS
_OP_CODE = {o: k for k, o in enumerate(_OPS)}
_O_ALLOC, _O_FREE, _O_FREE_DONE, _O_OOM, _O_EMPTY = 0, 1, 2, 3, 4


class TraceRows:
    """The trace's rows, (time_us, op, device, stream, id, size) as a sequence: the
    synthesized allocs first (prefix, tuples), then the rest as parallel arrays (about 50 bytes
    a row, where a tuple and its ints took about 140), each row's frame a number in frames
    (0: none)."""

    def __init__(self):
        self.prefix = []
        self.t = array.array("Q")
        self.op = array.array("B")
        self.dev = array.array("Q")
        self.stream = array.array("Q")
        self.id = array.array("q")
        self.size = array.array("Q")
        self.frame = array.array("I")
        self.frames = [None]
        self.frame_no = {None: 0}

    def add(self, t, op, dev, stream, ident, size, frame=None):
        """A row after the prefix; op its code (_OP_CODE)."""
        self.t.append(t)
        self.op.append(op)
        self.dev.append(dev)
        self.stream.append(stream)
        self.id.append(ident)
        self.size.append(size)
        self.frame.append(_frame_number(self.frames, self.frame_no, frame))

    def append(self, row):
        self.add(row[0], _OP_CODE[row[1]], *row[2:])

    def __len__(self):
        return len(self.prefix) + len(self.op)

    def __getitem__(self, k):
        if k < 0:
            k += len(self)
        if k < len(self.prefix):
            return self.prefix[k]
        k -= len(self.prefix)
        return (self.t[k], _OPS[self.op[k]], self.dev[k], self.stream[k], self.id[k],
                self.size[k])

    def __iter__(self):
        yield from self.prefix
        ops = _OPS
        for t, op, dev, stream, ident, size in zip(self.t, self.op, self.dev, self.stream,
                                                   self.id, self.size):
            yield t, ops[op], dev, stream, ident, size

    def devices(self):
        return {r[2] for r in self.prefix} | set(self.dev)

    def num_framed(self):
        """Rows that have a frame."""
        return len(self.frame) - self.frame.count(0)


class Scan:
    """What build_trace's pass over a recording's events leaves (build.py, _scan): the rows,
    and the state the rest of build_trace reads. The C reader makes one beside the columns it
    reads (traces/snaprows.c), so that the pass is not run again in Python."""

    __slots__ = ("rows", "live", "pending", "synthesized", "alloc_events", "segments", "nalloc",
                 "dropped_done", "size_mismatch", "clamped", "num_deferred_frees", "num_ooms",
                 "num_pool_rows", "last_t", "unseen_segment")

    def __init__(self):
        self.rows = TraceRows()
        self.live = {}          # (device, addr) -> block (or a set of the keys: only tested)
        self.pending = {}       # (device, addr) -> block, freed and not yet completed
        self.synthesized = []   # blocks freed without a recorded alloc
        self.alloc_events = []  # [action, addr, size, rows before it, device]
        self.segments = set()   # (device, addr) of the segments made and not yet freed
        self.nalloc = self.dropped_done = self.size_mismatch = self.clamped = 0
        self.num_deferred_frees = self.num_ooms = self.num_pool_rows = self.last_t = 0
        self.unseen_segment = False


class Trace:
    """The converted trace: rows to write, plus what the reference file needs."""

    def __init__(self):
        self.rows = TraceRows()      # (time_us, op, device, stream, id, size)
        self.allocator_events = []   # [action, addr, size, seq]
        self.num_allocs = 0
        self.num_synthesized = 0
        self.num_deferred_frees = 0
        self.num_ooms = 0
        self.num_pool_rows = 0
        self.fatal_oom_seq = None    # the seq of the last row, an oom the program died of
        self.died_after_log = False  # the run died of an OOM the log does not hold (its .json)
        self.death_seq = None        # the seq of the last request, when it is an oom
        self.unwound_rows = 0        # rows after it that trim_after_death took off
        self.limit = None            # limit_at_death's answer (a dict), or None
        self.started_mid_run = False # evidence besides synthesized allocs (segments)
