"""What a snapshot does not log, inferred: private pools (CUDA graphs, torch.cuda.MemPool) and
torch.cuda.empty_cache() calls; then several devices' events merged by time."""

import bisect
import heapq

from .model import Event, EventColumns, MiB, _has_action, warn


# ---------------------------------------------------------------------------------------------
# torch.cuda.empty_cache(), inferred
#
# PyTorch records no event for empty_cache(); it shows only as the segments it released
# (segment_free, or segment_unmap with expandable segments), after the free_completed of the
# frees it synchronized. The allocator releases segments on its own only inside an allocation
# that could not be served otherwise: its garbage collection (garbage_collection_threshold, with
# a memory fraction, when reserved memory is above threshold x limit), its release of oversize
# blocks (max_split_size_mb) and its full flush, the last two only after a first attempt to
# allocate failed (reserved + the segment it needs > the limit, or the device is full). Such
# releases are followed, before any other event of the program, by that allocation's
# segment_alloc/segment_map, or by its oom.
#
# The rule: a run of segment_free/segment_unmap entries of one device (free_completed entries
# may come between them) is an empty_cache() of that device, placed just before the run, unless
# the allocator event right after the run explains it:
#   - an oom (a failing allocation releases all it can first), or
#   - a segment_alloc/segment_map of an allocation under pressure: reserved (before the run) +
#     the segment it needed > L, where L is the run's limit when known (the .json beside a
#     snapshot: cap_gib), else the highest reserved the run ever reached (a limit is at least
#     that, and so is the device: below it, nothing forced a release), less one 20 MiB page with
#     expandable segments (whose mappings may pass the limit by less than a page); or
#   - with garbage_collection_threshold T > 0: reserved > T x L (T x the peak when the limit is
#     unknown: a lower bound of T x limit, so the test is necessary for a collection).
# Pressure is ruled out when the run's statistics say it never flushed: num_alloc_retries 0 (the
# full flush is the counted retry) and no max_split_size (the one other release after a failed
# attempt, of oversize blocks, is not counted). With expandable segments and no known limit the
# pressure test above is weak (a limit is only known to be at least the peak less a page), and
# an empty_cache() before the run's peak passed it: the statistics settle it.
# "The segment it needed" is what a cudaMalloc for that allocation would take (the limit test in
# PyTorch's alloc_block uses it, with expandable segments too): the larger of the segment
# event's size and the allocation size of the request that follows (2 MiB up to 1 MiB, 20 MiB
# below 10 MiB, else rounded up to 2 MiB).
# Nor is there pressure where a block at least as large as that request, of its stream and
# pool, was freed just before the run or within it (no request between): best fit serves the
# request from it, and the allocator grows (and collects garbage, which it does only before a
# growth) only when nothing does. That holds where no
# oversize rule keeps a block from a smaller request (no max_split_size_mb): a library that
# tries a large workspace, frees it and calls empty_cache() (cuDNN's benchmark under a cap),
# whose next request then needs a growth, is an empty_cache() and not a flush.
# ---------------------------------------------------------------------------------------------

RELEASES = ("segment_free", "segment_unmap")
GROWTHS = ("segment_alloc", "segment_map")


def _allocation_size(size):
    if size <= MiB:
        return 2 * MiB
    if size < 10 * MiB:
        return 20 * MiB
    return -(-size // (2 * MiB)) * (2 * MiB)


def _running_peak(events):
    reserved = peak = 0
    for e in events:
        if e.action in GROWTHS:
            reserved += e.size
        elif e.action in RELEASES:
            reserved -= e.size
        peak = max(peak, reserved)
    return peak


# ---------------------------------------------------------------------------------------------
# Private pools (CUDA graphs, torch.cuda.MemPool), inferred
#
# PyTorch's trace entries carry no pool. What a snapshot does say:
#   - the final 'segments' list gives each live segment's segment_pool_id: a private pool's
#     segments still held when the snapshot was taken are known (a graph that is alive, or
#     deleted with no empty_cache() since);
#   - a private pool's release by torch.cuda.MemPool's destruction (releasePool, then
#     emptyCache(pool)) frees that pool's cached segments only: a run of segment_free/
#     segment_unmap that leaves cached memory an empty_cache() would have released (a wholly
#     free cudaMalloc'd segment, or a wholly free page of an expandable segment) is such a
#     release, and the segments it frees are a private pool's.
# Each allocation then lies in a segment (cudaMalloc'd: the one made at its address range;
# expandable: the reservation, told apart by address: reservations lie 9/8 of the device apart)
# whose pool is known or the ordinary pools'. A pool's allocations give its route: a
# pool_begin before its first allocation and a pool_end after its last one, on their stream
# (every stream when they are on several and no other allocation comes between), split where
# an ordinary allocation on that stream comes between (each route a use of the pool). A pool
# released as above gets pool_release rows before the run (the last one empties it now).
# Not inferred: a pool whose segments all went in a full empty_cache() (they look like the
# ordinary pools' segments), or one whose allocations all lie in segments freed before the
# snapshot by anything but the pool's own release.
# ---------------------------------------------------------------------------------------------

_CLUSTER_GAP = 1 << 35   # expandable reservations lie ~9/8 of the device apart; pages within one
_PAGE_SMALL, _PAGE_LARGE = 2 * MiB, 20 * MiB


def _round512(n):
    return max(512, -(-n // 512) * 512)


class _PoolState:
    """One device's segments as the snapshot's events make and release them, with the live
    allocations in each, enough to tell a pool's own release from an empty_cache()."""

    def __init__(self, events):
        maps = sorted({e.addr for e in events if e.action in ("segment_map", "segment_unmap")})
        self.bases = []                      # expandable reservations' lowest addresses
        for a in maps:
            if not self.bases or a - self.last > _CLUSTER_GAP:
                self.bases.append(a)
            self.last = a
        self.mapped = {b: [] for b in self.bases}   # base -> [(addr, size)] mapped ranges
        # a reservation of the large pool maps 20 MiB pages, the small pool's 2 MiB ones
        sizes = {}
        for e in events:
            if e.action == "segment_map":
                sizes.setdefault(self.base_of(e.addr), []).append(e.size)
        self.page = {b: _PAGE_LARGE if all(n % _PAGE_LARGE == 0 for n in sizes.get(b, [1]))
                     else _PAGE_SMALL for b in self.bases}
        self.segs = {}        # addr -> [size, live count, key] of cudaMalloc'd segments
        # segs' addresses in order, for seg_of's bisection; once two segments overlap (a
        # malformed snapshot), seg_of scans segs in order as it always did, so the answer is
        # the same either way
        self.starts = []
        self.overlap = False
        self.live = {}        # alloc addr -> (key, rounded size)
        self.live_by_key = {}  # key -> {alloc addr: rounded size}, the same allocations
        self.nseg = 0

    def base_of(self, addr):
        i = bisect.bisect_right(self.bases, addr) - 1
        return self.bases[i] if i >= 0 else None

    def seg_of(self, addr):
        if self.overlap:
            for a, (size, _, key) in self.segs.items():
                if a <= addr < a + size:
                    return key
        else:
            # segments apart: only the last one starting at or below addr can hold it
            i = bisect.bisect_right(self.starts, addr) - 1
            if i >= 0:
                size, _, key = self.segs[self.starts[i]]
                if addr < self.starts[i] + size:
                    return key
        b = self.base_of(addr)
        return ("x", b) if b is not None else None

    def _add_segment(self, addr, size):
        if addr in self.segs:
            self.starts.remove(addr)
        i = bisect.bisect_left(self.starts, addr)
        if (i > 0 and self.starts[i - 1] + self.segs[self.starts[i - 1]][0] > addr) or \
                (i < len(self.starts) and addr + size > self.starts[i]):
            self.overlap = True
        self.starts.insert(i, addr)

    def _drop_segment(self, addr):
        if self.segs.pop(addr, None) is not None:
            del self.starts[bisect.bisect_left(self.starts, addr)]

    def _live_add(self, addr, key, size):
        old = self.live.get(addr)
        if old is not None:
            del self.live_by_key[old[0]][addr]
        self.live[addr] = (key, size)
        self.live_by_key.setdefault(key, {})[addr] = size

    def _live_pop(self, addr):
        got = self.live.pop(addr, None)
        if got is not None:
            del self.live_by_key[got[0]][addr]
        return got

    def apply(self, e):
        if e.action == "segment_alloc":
            self.nseg += 1
            self._add_segment(e.addr, e.size)
            self.segs[e.addr] = [e.size, 0, ("s", e.addr, self.nseg)]
        elif e.action == "segment_free":
            self._drop_segment(e.addr)
        elif e.action == "segment_map":
            b = self.base_of(e.addr)
            self.mapped[b].append((e.addr, e.size))
        elif e.action == "segment_unmap":
            b = self.base_of(e.addr)
            lo, hi = e.addr, e.addr + e.size
            rest = []
            for a, n in self.mapped[b]:
                if a + n <= lo or a >= hi:
                    rest.append((a, n))
                    continue
                if a < lo:
                    rest.append((a, lo - a))
                if a + n > hi:
                    rest.append((hi, a + n - hi))
            self.mapped[b] = rest
        elif e.action == "alloc":
            key = self.seg_of(e.addr)
            self._live_add(e.addr, key, _round512(e.size))
            if key and key[0] == "s":
                self.segs[key[1]][1] += 1
            return key
        elif e.action in ("free", "free_done"):
            if e.action == "free" and e.deferred:
                return None
            got = self._live_pop(e.addr)
            if got and got[0] and got[0][0] == "s" and got[0][1] in self.segs:
                self.segs[got[0][1]][1] -= 1
        return None

    def freeable(self, skip):
        """Keys of segments an empty_cache() would release something of, less those in skip."""
        out = set()
        for a, (size, n, key) in self.segs.items():
            if n == 0 and key not in skip:
                out.add(key)
        for b in self.bases:
            key = ("x", b)
            if key in skip or not self.mapped[b]:
                continue
            p = self.page[b]
            # the reservation's live allocations by address, and the furthest end among the
            # first i of them: a page [pg, pg + p) holds one iff some allocation starting below
            # pg + p ends above pg
            allocs = sorted(self.live_by_key.get(key, {}).items())
            starts = [x for x, _ in allocs]
            reach = [0]
            for x, m in allocs:
                reach.append(max(reach[-1], x + m))
            for a, n in self.mapped[b]:
                pg = b + -(-(a - b) // p) * p
                while pg + p <= a + n:
                    if reach[bisect.bisect_left(starts, pg + p)] <= pg:
                        out.add(key)
                        break
                    pg += p
                if key in out:
                    break
        return out


def infer_pools(events, final_pool_segments, next_id):
    """One device's events with pool_begin/pool_end/pool_release Events (addr: the pool's
    number, size: the flag) where the snapshot shows a private pool (the rule above). Returns
    (events, {pool id tuple or None: number}, next_id)."""
    if not _has_action(events, GROWTHS):
        return events, {}, next_id
    if not final_pool_segments and not _has_action(events, RELEASES):
        # no pool can be named (the final segments name none, and no run of releases can be
        # a pool's): what the walk below would find, without it
        return events, {}, next_id
    given, events = events, list(events)
    st = _PoolState(events)
    label = {}            # segment key -> pool number
    numbers = {}          # pool id tuple (or ('released', k)) -> number
    releases = {}         # event index of a release run's start -> pool number
    # 1. the final segments' pool ids: the last segment made at each address is the live one
    last_seg = {}
    nseg = 0
    for e in events:
        if e.action == "segment_alloc":
            nseg += 1
            last_seg[e.addr] = ("s", e.addr, nseg)
    for addr, size, expandable, pid in final_pool_segments or ():
        if pid not in numbers:
            numbers[pid] = next_id
            next_id += 1
        key = ("x", st.base_of(addr)) if expandable else last_seg.get(addr)
        if key is not None and key[1] is not None:
            label[key] = numbers[pid]
    # 2. walk: allocations' segments, and release runs that are a pool's own
    alloc_key = {}        # event index -> segment key
    i = 0
    while i < len(events):
        e = events[i]
        if e.action not in RELEASES:
            k = st.apply(e)
            if e.action == "alloc":
                alloc_key[i] = k
            i += 1
            continue
        j = i
        while j < len(events) and events[j].action in RELEASES + ("free_done",):
            j += 1
        nxt = events[j] if j < len(events) else None
        touched = set()
        for k in range(i, j):
            x = events[k]
            if x.action == "free_done":
                st.apply(x)
            elif x.action == "segment_free" and x.addr in st.segs:
                touched.add(st.segs[x.addr][2])
            elif x.action == "segment_unmap":
                touched.add(("x", st.base_of(x.addr)))
        pressure = nxt is not None and nxt.action in GROWTHS + ("oom",)
        if touched and not pressure and st.freeable(touched):
            known = {label[k] for k in touched if k in label}
            if len(known) == 1:
                n = known.pop()
            else:
                n = next_id
                numbers[("released", n)] = n
                next_id += 1
            for k in touched:
                label.setdefault(k, n)
            releases[i] = n
        for k in range(i, j):
            if events[k].action != "free_done":
                st.apply(events[k])
        i = j
    if not label:
        return given, {}, next_id
    # 3. each pool's routes, from its allocations
    pool_of = {i: label.get(k) for i, k in alloc_key.items()}
    order = list(alloc_key)     # the allocations' event indices, ascending (the walk's order)
    by_pool = {}
    for i in order:
        by_pool.setdefault(pool_of[i], []).append(i)
    begins, ends = {}, {}   # event index -> [(number, stream, every_stream)]
    uses = {}
    for n in sorted(set(label.values())):
        idx = by_pool.get(n)
        if not idx:
            continue
        streams = {events[i].stream for i in idx}
        window = order[bisect.bisect_left(order, idx[0]):bisect.bisect_right(order, idx[-1])]
        every = len(streams) > 1 and all(pool_of[i] == n for i in window)
        stream = events[idx[0]].stream
        start = prev = None
        for i in window:
            mine = pool_of[i] == n
            if not every and events[i].stream not in streams:
                continue
            if mine:
                if start is None:
                    start = i
                prev = i
            elif start is not None:
                begins.setdefault(start, []).append((n, stream, every))
                ends.setdefault(prev, []).append((n, stream, every))
                uses[n] = uses.get(n, 0) + 1
                start = None
        if start is not None:
            begins.setdefault(start, []).append((n, stream, every))
            ends.setdefault(prev, []).append((n, stream, every))
            uses[n] = uses.get(n, 0) + 1
    out = []
    for i, e in enumerate(events):
        if i in releases and uses.get(releases[i]):
            n = releases[i]
            for u in range(uses[n]):
                out.append(Event("pool_release", e.device, 0, n, int(u == uses[n] - 1),
                                 e.time_us, False, e.where))
            uses[n] = 0
        for n, stream, every in begins.get(i, ()):
            out.append(Event("pool_begin", e.device, stream, n, int(every), e.time_us, False,
                             e.where))
        out.append(e)
        for n, stream, every in ends.get(i, ()):
            out.append(Event("pool_end", e.device, stream, n, 0, e.time_us, False, e.where))
    return out, {p: n for p, n in numbers.items() if n in uses}, next_id


def infer_all_pools(rec, label):
    if rec.per_device is None:
        return
    next_id = 1
    for dev, events in enumerate(rec.per_device):
        finals = (rec.final_pool_segments or {}).get(dev, ())
        rec.per_device[dev], found, next_id = infer_pools(events, finals, next_id)
        rec.num_private_pools += len(found)
    if rec.num_private_pools:
        warn(label, f"inferred {rec.num_private_pools} private memory pool(s) (CUDA graphs or "
                    f"torch.cuda.MemPool): the trace is version 3 (see --help)")
    if len(rec.pool_ids) > rec.num_private_pools:
        # 2.12+ entries name their pool: the inference missed some (their segments all went in
        # an empty_cache(), or were freed before the snapshot), whose requests replay in the
        # ordinary pools
        n = sum(rec.pool_ids.values())
        warn(label, f"the snapshot's entries name {len(rec.pool_ids)} private pool(s) ({n} "
                    f"allocation(s), pool_id), {rec.num_private_pools} of them inferred: the "
                    f"requests of the others replay in the ordinary pools")


def _served_by_a_free(events, i, j, req):
    """Whether a block freed just before events[i:j] (the frees right before it, no request
    between) or within it, of req's stream and pool, is at least req's size rounded."""
    size = _round512(req.size)

    def serves(e):
        done = e.action == "free_done" or (e.action == "free" and not e.deferred)
        return (done and e.stream == req.stream and e.size >= size and
                (e.size > MiB) == (req.size > MiB))
    b = i - 1
    while b >= 0 and events[b].action in ("free", "free_done"):
        if serves(events[b]):
            return True
        b -= 1
    return any(serves(events[x]) for x in range(i, j))


def infer_empty_cache(events, limit=None, peak=None, gc_threshold=0.0, expandable=False,
                      flushed=True, no_oversize=False):
    """One device's events with an 'empty_cache' Event before every run of releases that no
    allocation explains (the rule above). flushed: False when the run's statistics rule out an
    allocator's flush under pressure; no_oversize: the setting has no max_split_size_mb, so a
    free block as large as a request serves it. Returns (events, number inferred)."""
    if not _has_action(events, RELEASES):
        return events, 0        # (what the walk below gives: the events as they are)
    given, events = events, list(events)
    if peak is None:
        peak = _running_peak(events)
    bound = limit if limit is not None else peak - (20 * MiB if expandable else 0)
    out, n, reserved, i = [], 0, 0, 0
    while i < len(events):
        e = events[i]
        if e.action not in RELEASES:
            if e.action in GROWTHS:
                reserved += e.size
            out.append(e)
            i += 1
            continue
        j = i
        while j < len(events) and events[j].action in RELEASES + ("free_done",):
            j += 1
        nxt = events[j] if j < len(events) else None
        explained = False
        if out and out[-1].action == "pool_release":
            explained = True    # a private pool's own release (infer_pools)
        elif nxt is not None and nxt.action == "oom":
            explained = True
        elif nxt is not None and nxt.action in GROWTHS:
            need = nxt.size
            k = j
            while k < len(events) and events[k].action in GROWTHS:
                k += 1
            req = events[k] if k < len(events) and events[k].action == "alloc" else None
            if req is not None:
                need = max(need, _allocation_size(req.size))
            gc_bound = gc_threshold * (limit if limit is not None else peak)
            explained = ((flushed and reserved + need > bound) or
                         (gc_threshold > 0 and reserved > gc_bound))
            if explained and no_oversize and req is not None and \
                    _served_by_a_free(events, i, j, req):
                explained = False
        if not explained:
            out.append(Event("empty_cache", e.device, 0, 0, 0, e.time_us, False, e.where))
            n += 1
        for k in range(i, j):
            if events[k].action in RELEASES:
                reserved -= events[k].size
            out.append(events[k])
        i = j
    return (out, n) if n else (given, 0)


# ---------------------------------------------------------------------------------------------
# Several devices, merged by time
# ---------------------------------------------------------------------------------------------

def merge_devices(rec):
    """Merge the devices' events by time. heapq.merge keeps each input's own order (even where
    its clock went backwards) and, on equal times, takes the lower device first: a stable
    merge."""
    if rec.per_device is None:
        return
    nonempty = [evs for evs in rec.per_device if len(evs)]
    if len(nonempty) <= 1:
        # (what the merge of one gives, in its order: a snapshot of a machine with several
        # devices names them all, and a program often used one)
        rec.events = nonempty[0] if nonempty else rec.per_device[0]
        return
    out = EventColumns()
    for e in heapq.merge(*rec.per_device, key=lambda e: e.time_us):
        out.append(e)
    rec.events = out
