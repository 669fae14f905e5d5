"""Streaming a snapshot: SnapshotWalker runs the pickle's opcodes itself, over the input read
in chunks, and hands each entry of device_traces to a callback as soon as it is complete (the
banner below says how, and why); top_user_frame, the one frame of a stack the trace keeps."""

import codecs
import collections
import re
import struct

from .limits import I64_MIN, KeyCheck, MemoryBudget
from .model import PROGRAM_ACTIONS, U64_LIMIT, ConvertError, _is_int, _tuple_new


# ---------------------------------------------------------------------------------------------
# Streaming a snapshot
#
# pickle.load() builds the whole snapshot before anything else can start: 1-3 KiB of Python
# objects per entry (each entry a dict, its stack a list of frame dicts), so a 5-million-entry
# recording needs gigabytes. SnapshotWalker instead runs the pickle's opcodes itself, over the
# input read in chunks (gunzipped as it goes), and hands each entry of device_traces[d] to a
# callback as soon as it is complete; the entry is then dropped, and its frames list becomes
# the one frame the trace keeps (top_user_frame). What it keeps is what the conversion needs:
# the memo's strings and frame dicts (PyTorch writes each distinct frame once and refers to it),
# the segments list, and no entry. It builds plain data only (dicts, lists, tuples, str, bytes,
# int, float, bool, None; set, frozenset and OrderedDict through their allowed globals), as
# SafeUnpickler does, and refuses anything else before it could run.
#
# Bounded by its input (limits.py says why the interpreter needs it): a dict key or set member
# is what a snapshot's can be (KeyCheck), memory is checked at every MiB read (MemoryBudget),
# and no opcode looks at more of the stack than it takes off: the marks are positions in a
# list of their own, as CPython's unpickler keeps them (a MARK object on the stack was found by
# a scan back, and 200,000 pushes then pops took 400 s of CPU), and so are the places where a
# _Pending or a run of device lists may be.
#
# How it finds the entries: the pickler writes the top-level dict's value for 'device_traces'
# as a list created right after that key, and each device's list right after it or after a
# MARK. A list created so is a _DevList: what is appended to it is an entry, consumed, never
# stored. A pickle laid out otherwise still converts (its lists are built as plain lists, and
# read_snapshot reads them as pickle.load's result), only without the memory bound.
#
# Speed (BENCHMARKS.md, "Converting a large snapshot"): the opcode loop costs about 1 us an
# opcode, 30 an entry. An entry written as PyTorch's pickler writes it (its keys memo
# references, its values plain) is matched whole by one regex (_ENTRY, then by its layout's:
# the same keys as literals, tried first for the next entry) and built by _values without the
# loop, with the same dict and
# the same memo slots; what each frame reference is (a user's frame, a library's) is found
# once (_frame_top). Anything else goes through the loop, so both read the same objects. An
# entry that DeviceEvents.feed_batch takes on its fast path is not even made a dict: a _Pending
# carries its fields to feed_batch, and becomes its dict only where the pickle would see it.
# ---------------------------------------------------------------------------------------------

class _DevList(list):
    """A device's event list, being streamed: it stays empty, its entries go to the callback.
    below: what was under it and the device lists before it on the stack when it was made
    (device_traces), which stays there while it does (SnapshotWalker._new_list)."""
    __slots__ = ("dev", "count", "below")


class _Gone:
    """The memo's slot of an entry or event list already consumed: referring to it again is a
    shared reference, which read_snapshot refuses (check_shared_references says why)."""
    __slots__ = ("what",)

    def __init__(self, what):
        self.what = what


class _Frames:
    """A frames list reduced to what the trace keeps: its top user frame, or None."""
    __slots__ = ("top",)

    def __init__(self, top):
        self.top = top

    # These stand-ins can end up inside data the reference writes (a malformed snapshot whose
    # allocator_settings refers to an entry's frames, a global, a MARK): json's default=str
    # then writes their repr, which must not be the object's address, different in every run
    # (found by tests/fuzz/diff_convert.py: main against itself differed).
    def __repr__(self):
        return "<frames read>"


class _Global:
    __slots__ = ("make",)

    def __init__(self, make):
        self.make = make

    def __repr__(self):
        return f"<global {self.make.__name__}>"


class _Pending(tuple):
    """An entry that the fast path read and that DeviceEvents.feed_batch will take as it is,
    in place of its dict (which would only be read back): (action, addr, size, stream,
    time_us, frames, memo slot, key names, values). It lives on the walker's stack and in its
    memo slot until its batch is consumed; anything else that would see the entry (a memo
    reference, an opcode that stores or pops it elsewhere) first gets the dict it stands for,
    the same one each time (SnapshotWalker._settle)."""
    __slots__ = ()

    def __repr__(self):
        return "<entry read>"


# DeviceEvents.feed_batch's fast path: the program's own actions (the allocator's are few, and
# whatever they come to carry goes through the checks one by one)
_FAST_ACTIONS = frozenset(PROGRAM_ACTIONS)


_SPECIAL = (_Gone, _DevList, _Pending)
# The opcodes of SnapshotWalker._rare that only push (or read the input): a _Pending on the
# stack stays one (before any other, the stack's are settled into their dicts).
_PUSH_ONLY = frozenset(b"\x80\x95NGXCBUTILFVS)cg\x88\x89\x8b\x8d\x8e\x96\x8f")
# LONG4's integers: no snapshot has one past 64 bits (LONG1 holds up to 2040), and one of a
# million digits would cost its every use (printing it is refused past 4300 digits).
_MAX_LONG_BYTES = 1024
# A run of BINGET/LONG_BINGET opcodes closed by APPENDS: a frames list of shared frame dicts.
_FRAME_REFS = re.compile(rb"(?:h.|j.{4})*e", re.S)
# One whole entry as PyTorch's pickler writes it, for the fast path (SnapshotWalker._entry):
# EMPTY_DICT MEMOIZE MARK, then up to 16 (key, value) pairs, then SETITEMS. A key is a memo
# reference (BINGET/LONG_BINGET: every entry after the first refers to the key strings), a
# value an integer (BININT1/BININT2/BININT/LONG1 of up to 8 bytes), a memo reference, a short
# string and its MEMOIZE, None, True, False, a float, or a frames list (an empty one, or one of
# memo references closed by APPEND or APPENDS). Anything else (a key seen for the first time, a
# frame dict written inline, a FRAME opcode in the middle) does not match, and the entry goes
# through the general loop: both build the same objects, the fast path only skips the loop.
_E_REF = rb"h.|j...."
_E_VALUE = (_E_REF + rb"|\x8a(?:" + b"|".join(re.escape(bytes([n])) + b".{%d}" % n
                                             for n in range(9)) +
            rb")|K.|J....|M..|\x8c(?:" +
            b"|".join(re.escape(bytes([n])) + b".{%d}" % n for n in range(64)) +
            rb")\x94|\]\x94(?:\((?:h.|j....)*e|(?:h.|j....)a)?|N|\x88|\x89|G.{8}")
_E_PAIRS = b""
for _ in range(16):
    # nested, (k v (k v (...)?)?)?, so that a failed match backtracks linearly, not over every
    # choice of 16 optional pairs
    _E_PAIRS = b"(?:(" + _E_REF + b")(" + _E_VALUE + b")" + _E_PAIRS + b")?"
# (compiled when a snapshot is read, not at import: 30 ms that an RMM log need not pay)
_ENTRY = rb"\}\x94\(" + _E_PAIRS + rb"u"


_LIB, _NOT_FRAME = object(), object()     # what a frame reference is (SnapshotWalker.tops)


def _roles(names):
    """Where action, addr, size, stream, time_us and frames (-1: none) are among an entry's
    key names, for SnapshotWalker._values to make a _Pending; None when it cannot (a key twice:
    the dict keeps the last)."""
    if len(set(names)) != len(names):
        return None
    try:
        return (names.index("action"), names.index("addr"), names.index("size"),
                names.index("stream"), names.index("time_us"),
                names.index("frames") if "frames" in names else -1)
    except ValueError:
        return None
# The memo's value for an entry consumed (one object for all of them: see _Gone).
_GONE_EVENT = _Gone("an event")
_CHUNK = 1 << 20
_MAX_STRING = 1 << 28       # a string or bytes of 256 MiB: no snapshot has one; refuse it
_ALLOWED_GLOBALS = {
    ("builtins", "set"): set, ("__builtin__", "set"): set,
    ("builtins", "frozenset"): frozenset, ("__builtin__", "frozenset"): frozenset,
    ("collections", "OrderedDict"): collections.OrderedDict,
}


class _BadPickle(Exception):
    pass


class SnapshotWalker:
    def __init__(self, f, feeder, progress=None, budget=None):
        self.f = f                  # a binary file (already gunzipped)
        self.budget = budget or MemoryBudget(None)
        self.key = KeyCheck()       # key(k, what): refuses a key no snapshot has
        # feeder(dev): a function (index of the first, entries) that takes a batch of device
        # dev's entries, each a dict or a _Pending (DeviceEvents.feed_batch)
        self.feeder = feeder
        self.progress = progress    # progress(entries consumed), called every 4096 entries
        self.buf = b""
        self.pos = 0
        self.eof = False
        self.dt = None              # the device_traces list, once seen
        self.ndev = 0
        self.entries = 0
        # The fast path's caches (_entry), valid while the memo slots they read keep their
        # values: a PUT over a slot, or a slot read by _frame_top becoming _Gone or _Frames,
        # empties them (_forget).
        self.names = {}             # key opcodes of an entry -> the key strings
        self.layouts = {}           # key opcodes of an entry -> (its layout's match, names)
        self.layout = None          # the last entry's layout, tried first
        self.tops = {}              # a frame's memo reference -> what it is (_frame_top)
        self.top_slots = set()      # memo slots that the tops were read from
        self.frames_by_top = {}     # top user frame -> its _Frames (one object for each)
        self.stacks = {}            # memo references of a whole frames list -> its _Frames
        self.strs = {}              # SHORT_BINUNICODE opcode -> its str (action names etc.)
        self.sparse = False         # a PUT made the memo's keys other than 0 .. len - 1
        self.marks = []             # the stack's length at each MARK still open
        self.low = 0                # no _Pending below this place on the stack (_settle)

    def _fill(self, n, short_ok=False):
        """At least n bytes from pos in buf, else _BadPickle (the pickle is cut short), or with
        short_ok, as many as there are."""
        if n > _MAX_STRING:
            raise _BadPickle(f"an object of {n} bytes (no snapshot holds one that large)")
        if n > _CHUNK:
            self.budget.check(2 * n)    # the bytes, and the str they may become
        parts = [self.buf[self.pos:]]
        have = len(parts[0])
        while have < n and not self.eof:
            chunk = self.f.read(max(_CHUNK, n - have))
            if not chunk:
                self.eof = True
                break
            parts.append(chunk)
            have += len(chunk)
        self.buf = b"".join(parts)
        self.pos = 0
        if have < n and not short_ok:
            raise _BadPickle("pickle data was truncated")

    def _refill(self):
        """One more chunk after what is left of buf (the hot loop keeps 64 KiB ahead)."""
        self.budget.check()
        chunk = self.f.read(_CHUNK)
        if not chunk:
            self.eof = True
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0

    def _readline(self):
        # (each byte searched once: a line of many MiB is read a chunk at a time)
        start = self.pos
        while True:
            i = self.buf.find(b"\n", start)
            if i >= 0:
                line = self.buf[self.pos:i]
                self.pos = i + 1
                return line
            if self.eof:
                raise _BadPickle("pickle data was truncated (no newline)")
            have = len(self.buf) - self.pos
            if have >= _MAX_STRING:
                raise _BadPickle(f"a line of more than {_MAX_STRING} bytes (no snapshot holds "
                                 f"one that long)")
            # (doubling: each byte is copied about twice)
            self._fill(min(2 * have + 1, _MAX_STRING), short_ok=True)
            start = self.pos + have

    def _consume(self, lst, items):
        dev = lst.dev
        if len({id(e) for e in items}) != len(items):
            # a reference to an entry of the same batch (the memo catches later ones)
            raise ConvertError("the snapshot refers to an event it already holds a second "
                               "time (a shared reference in the pickle); a PyTorch snapshot "
                               "never repeats an event or an event list")
        # (the whole batch is fed before the memo slots below change: feed reads no slot)
        self.feeder(dev)(lst.count, items)
        lst.count += len(items)
        memo, pop, top_slots = self.memo, self.memo_of.pop, self.top_slots
        for e in items:
            if e.__class__ is _Pending:
                # its slot (it has no memo_of: nothing but the stack held it), its frames
                idx = e[6]
                memo[idx] = _GONE_EVENT
                if idx in top_slots:
                    self._forget()
                fr = e[5]
            else:
                # the entry's memo slot, if it has one, now refuses a second reference
                idx = pop(id(e), None)
                if idx is not None:
                    if idx < len(memo):
                        memo[idx] = _GONE_EVENT
                    else:
                        self._set(idx, _GONE_EVENT)
                    if idx in top_slots:
                        self._forget()
                fr = e.get("frames") if e.__class__ is dict or isinstance(e, dict) else None
            if fr.__class__ is not _Frames and isinstance(fr, list):
                idx = pop(id(fr), None)
                if idx is not None:
                    self._set(idx, _Frames(top_user_frame(fr)))
                    if idx in top_slots:
                        self._forget()
        self.entries += len(items)
        if self.progress is not None and self.entries >> 12 != (self.entries - len(items)) >> 12:
            self.progress(self.entries)

    def _new_list(self, stack):
        """An empty list: a _DevList when it is device_traces' next device list (below it on
        the stack, past the device lists before it: device_traces)."""
        top = stack[-1] if stack else None
        if top.__class__ is _DevList:
            # what is below the device lists: the same as when the top one was made, as nothing
            # under it can change while it is there (a _DevList is never pushed again: DUP and
            # the memo refuse it), found without a walk past the lists before it
            top = top.below
        if self.dt is not None and top is self.dt:
            lst = _DevList()
            lst.dev = self.ndev
            lst.count = 0
            lst.below = top
            self.ndev += 1
            return lst
        lst = []
        if self.dt is None and isinstance(top, str) and top == "device_traces":
            self.dt = lst
        return lst

    def _frame_refs(self, buf, start, end):
        """The top user frame of the frame dicts that the BINGET/LONG_BINGET opcodes in
        buf[start:end] refer to (top_user_frame, reading no further than it must)."""
        pos = start
        while pos < end:
            if buf[pos] == 0x68:
                v = self._get(buf[pos + 1])
                pos += 2
            else:
                v = self._get(struct.unpack_from("<I", buf, pos + 1)[0])
                pos += 5
            if not isinstance(v, dict):
                return None
            fn = v.get("filename")
            if isinstance(fn, str) and not _LIBRARY_FRAME.search(fn):
                return top_user_frame([v])
        return None

    def _get(self, idx):
        memo = self.memo
        if 0 <= idx < len(memo):
            v = memo[idx]
        else:
            try:
                v = self.extra[idx]
            except KeyError:
                raise _BadPickle(f"memo key {idx} not found") from None
        if v.__class__ is _Pending:
            # it is on the stack (a _Pending that leaves it is settled or consumed first)
            self._settle(self.stack)
            return self._dict_of(v) if memo[idx] is v else memo[idx]
        if isinstance(v, _Gone):
            raise ConvertError(f"the snapshot refers to {v.what} it already holds a second "
                               f"time (a shared reference in the pickle); a PyTorch snapshot "
                               f"never repeats an event or an event list")
        if isinstance(v, _DevList):
            raise ConvertError("the snapshot refers to a device's event list a second time (a "
                               "shared reference in the pickle); a PyTorch snapshot never "
                               "repeats an event list")
        return v

    def _put(self, idx, v):
        if isinstance(v, (dict, list)):
            self.memo_of[id(v)] = idx
        if 0 <= idx < len(self.memo) or idx in self.extra:
            self._forget()
        elif idx != len(self.memo) + len(self.extra):
            self.sparse = True      # MEMOIZE may now overwrite: the fast path stops (_entry)
        self._set(idx, v)

    # The memo is a list (slot i at index i: what MEMOIZE makes, 8 bytes a slot, where a dict
    # took about 80 with its int key: a third of the converter's memory at 1M entries) and a
    # dict, extra, of the slots a PUT made past its end. Its keys are the list's indices and
    # extra's, as the pickle module's dict would hold them: once extra has one, the list grows
    # no more, and MEMOIZE's slot (the count of keys) goes to extra too.
    def _set(self, idx, v):
        memo = self.memo
        if 0 <= idx < len(memo):
            memo[idx] = v
        elif idx == len(memo) and not self.extra:
            memo.append(v)
        else:
            self.extra[idx] = v

    def _memoize(self, v):
        """MEMOIZE: v in the next slot (the count of keys)."""
        self._set(len(self.memo) + len(self.extra), v)

    def _forget(self):
        self.layouts.clear()
        self.layout = None
        self.names.clear()
        self.tops.clear()
        self.stacks.clear()
        self.top_slots.clear()

    def _frame_top(self, refs):
        """The _Frames of a frames list whose memo references are refs (BINGET/LONG_BINGET
        opcodes), as _frame_refs finds it, from what each frame reference was found to be
        before (self.tops: the reference's opcode -> its 'file:line:function' when it is a
        user's frame, _LIB when it is a library's, _NOT_FRAME when it is no frame dict), or
        at once when the same list was seen before (self.stacks: a program makes its
        allocations from a few code paths, and a free's entry often repeats its alloc's)."""
        fr = self.stacks.get(refs)
        if fr is not None:
            return fr
        tops = self.tops
        top = None
        pos, end = 0, len(refs)
        while pos < end:
            # (refs is BINGET/LONG_BINGET opcodes only: _FRAME_REFS matched it)
            if refs[pos] == 0x68:
                ref = refs[pos:pos + 2]
                pos += 2
            else:
                ref = refs[pos:pos + 5]
                pos += 5
            t = tops.get(ref)
            if t is None:
                idx = ref[1] if ref[0] == 0x68 else int.from_bytes(ref[1:], "little")
                v = self._get(idx)          # raises as _frame_refs does
                if not isinstance(v, dict):
                    t = _NOT_FRAME
                else:
                    fn = v.get("filename")
                    t = (top_user_frame([v]) if isinstance(fn, str) and
                         not _LIBRARY_FRAME.search(fn) else _LIB)
                self.top_slots.add(idx)     # (self.stacks' answers rest on it too)
                if len(tops) < 1 << 20:
                    tops[ref] = t
            if t is _LIB:
                continue
            if t is not _NOT_FRAME:
                top = t
            break
        fr = self.frames_by_top.get(top)
        if fr is None:
            fr = _Frames(top)
            if len(self.frames_by_top) < 1 << 16:
                self.frames_by_top[top] = fr
        if len(self.stacks) >= 1 << 16:
            self.stacks.clear()         # a bound on its memory; the frequent ones come back
        self.stacks[refs] = fr
        return fr

    def _entry(self, m):
        """The entry (a dict) that _ENTRY matched, built as the general loop builds it from
        the same opcodes, memo slots included (it is then pushed, and consumed with the rest
        of its batch at APPENDS, as before). None, with nothing changed, when the general loop
        must take it instead (a key not yet a string in the memo, a reference that is not
        plain data, a list under another key than 'frames'): the errors stay the general
        loop's."""
        memo = self.memo
        if self.sparse:
            return None
        g = m.groups()
        keys = g[0::2]
        lay = self.layouts.get(keys)
        if lay is not None:
            e = self._values(lay[1], g[1::2], lay[2])
            if e is not None:
                self.layout = lay
            return e
        names = self.names.get(keys)
        if names is None:
            names = []
            for k in keys:
                if k is None:
                    break
                v = k[1] if k[0] == 0x68 else int.from_bytes(k[1:], "little")
                v = memo[v] if v < len(memo) else None
                if v.__class__ is not str:
                    return None
                names.append(v)
            names = tuple(names)
            if len(self.names) < 4096:
                self.names[keys] = names
        roles = _roles(names)
        e = self._values(names, g[1::2], roles)
        if e is not None and len(self.layouts) < 64:
            # the entries after it are likely laid out the same: matched by a pattern with its
            # keys as literals (half the groups, no tuple of keys to hash), tried first
            ks = [k for k in keys if k is not None]
            self.layouts[keys] = self.layout = (re.compile(
                rb"\}\x94\(" + b"".join(re.escape(k) + b"(" + _E_VALUE + b")" for k in ks) +
                rb"u", re.S).match, names, roles)
        return e

    def _values(self, names, vals, roles=None):
        """The entry (a dict) of these key strings and value opcodes (the groups of _ENTRY or
        of a layout's pattern), or None, with nothing changed (_entry says when). With roles
        (_roles: where its fields are), an entry that DeviceEvents.feed_batch would take on its
        fast path comes as a _Pending instead, the dict left unmade (it would only be read
        back: about a fifth of the reading)."""
        memo = self.memo
        if self.sparse:
            return None
        slot = len(memo)
        e = {}          # in its slot while the values are read, as the loop has it
        memo.append(e)
        nmemo = len(memo)
        xs = []
        add = xs.append
        own = False     # a value is the entry itself (a reference to its own slot)
        for k, v in zip(names, vals):
            c = v[0]
            # by frequency in a snapshot: memo references (past the first 256 slots, long
            # ones), addresses and times (LONG1), small ints, strings
            if c == 0x6A:                                   # LONG_BINGET
                x = int.from_bytes(v[1:], "little")
                if x >= slot:
                    if x >= nmemo:
                        break
                    own = own or x == slot
                x = memo[x]
                if x.__class__ in _SPECIAL:
                    break
            elif c == 0x8A:                                 # LONG1
                x = int.from_bytes(v[2:], "little", signed=True)
            elif c == 0x4B:                                 # BININT1
                x = v[1]
            elif c == 0x68:                                 # BINGET
                x = v[1]
                if x >= slot:
                    if x >= nmemo:
                        break
                    own = own or x == slot
                x = memo[x]
                if x.__class__ in _SPECIAL:
                    break
            elif c == 0x8C:                                 # SHORT_BINUNICODE, MEMOIZE
                x = self.strs.get(v)
                if x is None:
                    x = str(v[2:-1], "utf-8", "surrogatepass")
                    if len(self.strs) < 4096:
                        self.strs[v] = x
                memo.append(x)
                nmemo += 1
            elif c == 0x4A:                                 # BININT
                x = int.from_bytes(v[1:], "little", signed=True)
            elif c == 0x4D:                                 # BININT2
                x = v[1] | v[2] << 8
            elif c == 0x5D:                                 # EMPTY_LIST, MEMOIZE (frames)
                if k != "frames":
                    break
                if len(v) == 2:                             # empty
                    x = []
                    self.memo_of[id(x)] = len(memo)
                elif v[2] == 0x28:                          # MARK refs APPENDS
                    if "filename" in names:
                        # _frame_top may read the entry (a reference to its own slot) as a
                        # frame dict: with the values before this one, as the loop had it
                        e.update(zip(names, xs))
                    x = self._frame_top(v[3:-1])
                else:                                       # one ref, APPEND
                    x = v[3] if v[2] == 0x68 else int.from_bytes(v[3:-1], "little")
                    if x >= slot:
                        if x >= nmemo:
                            break
                        own = own or x == slot
                    x = memo[x]
                    if x.__class__ in _SPECIAL:
                        break
                    x = [x]
                    self.memo_of[id(x)] = len(memo)
                memo.append(x)
                nmemo += 1
            elif c == 0x4E:
                x = None
            elif c == 0x88:
                x = True
            elif c == 0x89:
                x = False
            else:                                           # BINFLOAT
                x = struct.unpack(">d", v[1:])[0]
            add(x)
        else:
            if roles is not None and not own:
                ia, iaddr, isize, istream, it, ifr = roles
                action, addr, size, stream, t = xs[ia], xs[iaddr], xs[isize], xs[istream], xs[it]
                # DeviceEvents.feed_batch's condition for its fast path
                if (action.__class__ is str and action in _FAST_ACTIONS and
                        addr.__class__ is int and size.__class__ is int and
                        stream.__class__ is int and t.__class__ is int and
                        0 <= size < U64_LIMIT and 0 <= stream < U64_LIMIT and
                        I64_MIN <= addr < U64_LIMIT):
                    x = memo[slot] = _tuple_new(_Pending, (
                        action, addr, size, stream, t, xs[ifr] if ifr >= 0 else None, slot,
                        names, xs))
                    return x
            e.update(zip(names, xs))
            self.memo_of[id(e)] = slot
            return e
        # the general loop takes it: undo what was done
        for x in memo[slot:]:
            self.memo_of.pop(id(x), None)
        del memo[slot:]
        return None

    def _dict_of(self, p):
        """The dict that the _Pending p stands for, made now and put in its memo slot (the
        caller puts it where p was): what _values would have made."""
        e = dict(zip(p[7], p[8]))
        slot = p[6]
        if self.memo[slot] is p:
            self.memo[slot] = e
        self.memo_of[id(e)] = slot
        return e

    def _settle(self, seq):
        """The dicts in place of the _Pendings in seq: items popped off the stack, or the stack
        itself, looked at from self.low up (the fast path lowers it to where it pushes one), so
        that each place is looked at once after each push, not at every opcode."""
        if seq is self.stack:
            low, self.low = self.low, len(seq)
            for k in range(low, len(seq)):
                if seq[k].__class__ is _Pending:
                    seq[k] = self._dict_of(seq[k])
        elif _Pending in map(type, seq):
            for k, x in enumerate(seq):
                if x.__class__ is _Pending:
                    seq[k] = self._dict_of(x)

    def _pop_mark(self, stack):
        """The items above the last MARK, taken off the stack."""
        if not self.marks:
            raise _BadPickle("could not find MARK")
        k = self.marks.pop()
        if k > len(stack):
            raise _BadPickle("unpickling stack underflow")
        items = stack[k:]
        del stack[k:]
        return items

    def load(self):
        first = None
        try:
            self._refill()
            first = self.buf[:1]
            return self._load()
        except (_BadPickle, struct.error, IndexError, KeyError, TypeError, ValueError,
                AttributeError, UnicodeDecodeError, OverflowError) as e:
            if isinstance(e, ConvertError):
                raise
            if first != b"\x80":
                # No pickle protocol marker: most likely some other kind of file altogether.
                raise ConvertError("not a PyTorch memory snapshot (pickle) or an RMM log CSV "
                                   "(unrecognized content)") from None
            detail = str(e).splitlines()[0] if str(e) else "no detail"
            name = "UnpicklingError" if isinstance(e, _BadPickle) else type(e).__name__
            raise ConvertError(f"not a valid pickle ({name}: {detail})") from None

    def _load(self):
        self.memo = memo = []      # see _set
        self.extra = {}
        self.memo_of = memo_of = {}   # id of a memoized dict or list -> its memo index
        self.stack = stack = []
        marks = self.marks
        key = self.key
        settle = self._settle
        push = stack.append
        unpack_from = struct.unpack_from
        consume = self._consume
        get = self._get
        entry, entry_match = self._entry, re.compile(_ENTRY, re.S).match
        values = self._values
        dict_, list_, str_ = dict, list, str
        buf, pos = self.buf, self.pos
        # buf and pos live in locals here; self.buf and self.pos are brought up to date before
        # anything that reads the input (_refill, _rare) and taken back after it.
        while True:
            if len(buf) - pos < 65536 and not self.eof:
                self.pos = pos
                self._refill()
                buf, pos = self.buf, self.pos
            if pos >= len(buf):
                raise _BadPickle("pickle data was truncated")
            op = buf[pos]
            pos += 1
            # The opcodes of a snapshot first: an entry's first (the fast path takes the whole
            # entry), then the rest by frequency.
            if op == 0x7D:                                  # EMPTY_DICT
                # An entry (or any dict) as PyTorch writes it: built at once (_values), matched
                # by the last entry's layout, else by _ENTRY (_entry, which finds its layout)
                lay = self.layout
                m = lay[0](buf, pos - 1) if lay is not None else None
                if m is not None:
                    e = values(lay[1], m.groups(), lay[2])
                else:
                    m = entry_match(buf, pos - 1)
                    e = entry(m) if m is not None else None
                if e is not None:
                    if self.low > len(stack):
                        self.low = len(stack)       # (a _Pending from here up: _settle)
                    push(e)
                    pos = m.end()
                    # the entries that follow, while buf holds them (see the loop's top)
                    lay = self.layout
                    while (lay is not None and buf[pos:pos + 1] == b"}" and
                           len(buf) - pos >= 65536):
                        m = lay[0](buf, pos)
                        if m is None:
                            break
                        e = values(lay[1], m.groups(), lay[2])
                        if e is None:
                            break
                        push(e)
                        pos = m.end()
                    continue
                push({})
            elif op == 0x68:                                # BINGET
                v = buf[pos]
                v = memo[v] if v < len(memo) else memo
                if v is memo or v.__class__ in _SPECIAL:
                    v = get(buf[pos])
                push(v)
                pos += 1
            elif op == 0x94:                                # MEMOIZE
                v = stack[-1]
                if v.__class__ is _Pending:
                    settle(stack)
                    v = stack[-1]
                idx = len(memo)
                if self.sparse:
                    idx += len(self.extra)
                    self._set(idx, v)
                else:
                    memo.append(v)
                if v.__class__ is dict_ or v.__class__ is list_:
                    memo_of[id(v)] = idx
            elif op == 0x8C:                                # SHORT_BINUNICODE
                n = buf[pos]
                push(str_(buf[pos + 1:pos + 1 + n], "utf-8", "surrogatepass"))
                pos += 1 + n
            elif op == 0x6A:                                # LONG_BINGET
                k = unpack_from("<I", buf, pos)[0]
                v = memo[k] if k < len(memo) else memo
                if v is memo or v.__class__ in _SPECIAL:
                    v = get(k)
                push(v)
                pos += 4
            elif op == 0x4B:                                # BININT1
                push(buf[pos])
                pos += 1
            elif op == 0x4A:                                # BININT
                push(unpack_from("<i", buf, pos)[0])
                pos += 4
            elif op == 0x8A:                                # LONG1
                n = buf[pos]
                push(int.from_bytes(buf[pos + 1:pos + 1 + n], "little", signed=True))
                pos += 1 + n
            elif op == 0x4D:                                # BININT2
                push(unpack_from("<H", buf, pos)[0])
                pos += 2
            elif op == 0x28:                                # MARK
                marks.append(len(stack))
            elif op == 0x75:                                # SETITEMS
                items = self._pop_mark(stack)
                settle(items)
                d = stack[-1]
                if d.__class__ is _Pending:
                    settle(stack)
                    d = stack[-1]
                if len(items) % 2 or d.__class__ is not dict_ and not isinstance(d, dict_):
                    raise _BadPickle("bad SETITEMS")
                for k in range(0, len(items), 2):
                    x = items[k]
                    if x.__class__ is not str_:
                        key(x, "a dict key")
                    d[x] = items[k + 1]
            elif op == 0x5D:                                # EMPTY_LIST
                if (stack and stack[-1] == "frames" and buf[pos:pos + 2] == b"\x94(" and
                        (not marks or marks[-1] < len(stack))):
                    # A stack as PyTorch writes it: its frames are references to frame dicts
                    # written before. Only the first frames up to the user's are looked at.
                    m = _FRAME_REFS.match(buf, pos + 2)
                    if m is not None:
                        fr = self._frame_top(buf[pos + 2:m.end() - 1])
                        self._memoize(fr)
                        push(fr)
                        pos = m.end()
                        continue
                push(self._new_list(stack))
            elif op == 0x65:                                # APPENDS
                items = self._pop_mark(stack)
                lst = stack[-1]
                if isinstance(lst, _DevList):
                    consume(lst, items)
                elif isinstance(lst, list_):
                    settle(items)
                    lst.extend(items)
                else:
                    raise _BadPickle("APPENDS to a non-list")
            elif op == 0x61:                                # APPEND
                v = stack.pop()
                lst = stack[-1]
                if isinstance(lst, _DevList):
                    consume(lst, [v])
                elif isinstance(lst, list_):
                    if v.__class__ is _Pending:
                        v = self._dict_of(v)
                    lst.append(v)
                else:
                    raise _BadPickle("APPEND to a non-list")
            else:
                self.pos = pos
                if op not in _PUSH_ONLY:
                    settle(stack)       # what it pops or stores is the entry's dict
                if self._rare(op, stack):
                    return stack.pop()
                buf, pos = self.buf, self.pos

    def _rare(self, op, stack):
        """Every other opcode; True at STOP."""
        unpack_from = struct.unpack_from

        def arg(n):
            if len(self.buf) - self.pos < n:
                self._fill(n)
            b = self.buf[self.pos:self.pos + n]
            self.pos += n
            return b

        c = chr(op)
        if op == 0x80:                                      # PROTO
            arg(1)
        elif op == 0x95:                                    # FRAME: framing is transparent
            arg(8)
        elif c == ".":                                      # STOP
            if len(stack) != 1 or self.marks:
                raise _BadPickle("STOP with a stack of %d" % (len(stack) + len(self.marks)))
            return True
        elif c == "N":
            stack.append(None)
        elif op == 0x88:
            stack.append(True)
        elif op == 0x89:
            stack.append(False)
        elif c == "G":                                      # BINFLOAT
            stack.append(unpack_from(">d", arg(8))[0])
        elif op == 0x8B:                                    # LONG4
            n = unpack_from("<i", arg(4))[0]
            if n < 0:
                raise _BadPickle("LONG pickle has negative byte count")
            if n > _MAX_LONG_BYTES:
                raise ConvertError(f"the pickle holds an integer of {n:,} bytes; a PyTorch "
                                   f"snapshot's are at most 8")
            stack.append(int.from_bytes(arg(n), "little", signed=True))
        elif c == "X":                                      # BINUNICODE
            stack.append(str(arg(unpack_from("<I", arg(4))[0]), "utf-8", "surrogatepass"))
        elif op == 0x8D:                                    # BINUNICODE8
            stack.append(str(arg(unpack_from("<Q", arg(8))[0]), "utf-8", "surrogatepass"))
        elif c == "C":                                      # SHORT_BINBYTES
            stack.append(arg(arg(1)[0]))
        elif c == "B":                                      # BINBYTES
            stack.append(arg(unpack_from("<I", arg(4))[0]))
        elif op == 0x8E:                                    # BINBYTES8
            stack.append(arg(unpack_from("<Q", arg(8))[0]))
        elif op == 0x96:                                    # BYTEARRAY8
            stack.append(bytearray(arg(unpack_from("<Q", arg(8))[0])))
        elif c == "U":                                      # SHORT_BINSTRING
            stack.append(arg(arg(1)[0]).decode("ascii"))
        elif c == "T":                                      # BINSTRING
            n = unpack_from("<i", arg(4))[0]
            if n < 0:
                raise _BadPickle("BINSTRING pickle has negative byte count")
            stack.append(arg(n).decode("ascii"))
        elif c == "I":                                      # INT (text)
            line = self._readline()
            stack.append({b"00": False, b"01": True}.get(line) if line in (b"00", b"01")
                         else int(line, 10))
        elif c == "L":                                      # LONG (text)
            stack.append(int(self._readline().rstrip(b"L"), 10))
        elif c == "F":                                      # FLOAT (text)
            stack.append(float(self._readline()))
        elif c == "V":                                      # UNICODE (text)
            stack.append(str(self._readline(), "raw-unicode-escape"))
        elif c == "S":                                      # STRING (text, quoted)
            line = self._readline()
            if len(line) < 2 or line[:1] != line[-1:] or line[:1] not in (b"'", b'"'):
                raise _BadPickle("the STRING opcode argument must be quoted")
            stack.append(codecs.escape_decode(line[1:-1])[0].decode("ascii"))
        elif c == ")":
            stack.append(())
        elif c == "t":
            stack.append(tuple(self._pop_mark(stack)))
        elif op == 0x85:
            stack[-1:] = [(stack[-1],)]
        elif op == 0x86:
            stack[-2:] = [tuple(stack[-2:])]
        elif op == 0x87:
            stack[-3:] = [tuple(stack[-3:])]
        elif c == "l":                                      # LIST (from the mark)
            items = self._pop_mark(stack)
            lst = self._new_list(stack)
            if isinstance(lst, _DevList):
                stack.append(lst)
                self._consume(lst, items)
            else:
                lst.extend(items)
                stack.append(lst)
        elif c == "d":                                      # DICT (from the mark)
            items = self._pop_mark(stack)
            if len(items) % 2:
                raise _BadPickle("odd number of items for DICT")
            for k in items[0::2]:
                self.key(k, "a dict key")
            stack.append({items[k]: items[k + 1] for k in range(0, len(items), 2)})
        elif c == "s":                                      # SETITEM
            v = stack.pop()
            k = stack.pop()
            self.key(k, "a dict key")
            stack[-1][k] = v
        elif op == 0x8F:                                    # EMPTY_SET
            stack.append(set())
        elif op == 0x90:                                    # ADDITEMS
            items = self._pop_mark(stack)
            if not isinstance(stack[-1], set):
                raise _BadPickle("ADDITEMS to a non-set")
            for k in items:
                self.key(k, "a set member")
            stack[-1].update(items)
        elif op == 0x91:                                    # FROZENSET
            items = self._pop_mark(stack)
            for k in items:
                self.key(k, "a set member")
            stack.append(frozenset(items))
        elif c == "0":                                      # POP
            if self.marks and self.marks[-1] == len(stack):
                raise _BadPickle("POP of a MARK")
            stack.pop()
        elif c == "1":                                      # POP_MARK
            self._pop_mark(stack)
        elif c == "2":                                      # DUP
            v = stack[-1]
            if isinstance(v, _DevList):
                raise ConvertError("the snapshot refers to a device's event list a second "
                                   "time (a shared reference in the pickle)")
            stack.append(v)
        elif c == "p":                                      # PUT (text)
            self._put(int(self._readline()), stack[-1])
        elif c == "q":                                      # BINPUT
            self._put(arg(1)[0], stack[-1])
        elif c == "r":                                      # LONG_BINPUT
            self._put(unpack_from("<I", arg(4))[0], stack[-1])
        elif c == "g":                                      # GET (text)
            stack.append(self._get(int(self._readline())))
        elif c in "c\x93":                                  # GLOBAL, STACK_GLOBAL
            if c == "c":
                module = self._readline().decode("utf-8")
                name = self._readline().decode("utf-8")
            else:
                name = stack.pop()
                module = stack.pop()
            make = _ALLOWED_GLOBALS.get((module, name))
            if make is None:
                raise ConvertError(
                    f"the pickle needs class {module}.{name}, which a PyTorch memory snapshot "
                    f"never holds; refusing to load it (unpickling arbitrary classes can run "
                    f"code)")
            stack.append(_Global(make))
        elif c == "R":                                      # REDUCE: an allowed global only
            args = stack.pop()
            fn = stack.pop()
            if not isinstance(fn, _Global) or not isinstance(args, tuple):
                raise _BadPickle("REDUCE of something that is not an allowed global")
            stack.append(fn.make(*self._reduce_args(fn, args)))
        elif c in "PQ":
            raise ConvertError("the pickle uses persistent ids, which a memory snapshot never "
                               "holds")
        else:
            raise ConvertError(
                f"the pickle uses opcode {chr(op)!r} ({op:#04x}), which builds objects a PyTorch "
                f"memory snapshot never holds; refusing to load it (unpickling arbitrary classes "
                f"can run code)" if c in "ibo\x81\x92\x82\x83\x84" else
                f"not a valid pickle (UnpicklingError: invalid load key, {chr(op)!r}.)")
        return False


    def _reduce_args(self, fn, args):
        """args for a set, a frozenset or an OrderedDict as the pickler writes them: (), or a
        set's one list or tuple of members, each a key KeyCheck allows (the constructor hashes
        them)."""
        if fn.make is collections.OrderedDict:
            if args:
                raise _BadPickle("OrderedDict with arguments (the pickler writes it empty, "
                                 "then its items)")
            return args
        if len(args) > 1 or args and args[0].__class__ not in (list, tuple):
            raise _BadPickle(f"{fn.make.__name__} of something that is not a list")
        for k in args[0] if args else ():
            self.key(k, "a set member")
        return args


# Frames inside these are not the user's (the rule of top_user_frame): PyTorch itself (a path
# component 'torch'), and anything of the Python installation (lib/pythonX.Y: the standard
# library, site-packages, dist-packages), and frozen or generated code ('<frozen ...>').
_LIBRARY_FRAME = re.compile(r"(^|[/\\])(torch[/\\]|lib[/\\]python\d)|^<")


def top_user_frame(frames):
    """'file:line:function' of the first frame (innermost first, as PyTorch lists them) outside
    torch/ and Python's own libraries, or None when there is none (or frames are not frames)."""
    for fr in frames:
        if not isinstance(fr, dict):
            return None
        fn = fr.get("filename")
        if not isinstance(fn, str) or _LIBRARY_FRAME.search(fn):
            continue
        line, name = fr.get("line"), fr.get("name")
        return f"{fn}:{line if _is_int(line) else 0}:{name if isinstance(name, str) else ''}"
    return None
