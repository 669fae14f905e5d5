"""The trace built from a Recording's events (addresses resolved to ids: build_trace), and the
death of a run: the rows after a fatal OOM taken off (trim_after_death), the limit it met
(limit_at_death)."""

from .model import (_A_ALLOC, _A_EMPTY_CACHE, _A_FREE, _A_FREE_DONE, _A_OOM, _A_POOL_BEGIN,
                    _ACTION_CODE, _ACTIONS, _O_ALLOC, _O_EMPTY, _O_FREE, _O_FREE_DONE, _O_OOM,
                    _OP_CODE, U64_LIMIT, ConvertError, EventColumns, MiB, Scan, Trace,
                    _frame_number, _is_int, _said, warn)
from .inference import GROWTHS, RELEASES


# ---------------------------------------------------------------------------------------------
# Address -> id resolution (shared by all readers)
# ---------------------------------------------------------------------------------------------

def _scan(events):
    """build_trace's pass over the events (a Scan): the rows, and what is left open."""
    # a block: (id, size, stream, device, where) of an allocation (where as an Event's)
    live = {}        # (device, addr) -> block, allocated and not yet freed
    pending = {}     # (device, addr) -> block, freed but completion deferred (free_done later)
    synthesized = []  # blocks freed without a recorded alloc (the log started mid-run)
    alloc_events = []  # [action, addr, size, number of rows (after the prefix) before it, device]
    dropped_done = 0
    size_mismatch = 0
    segments = set()   # (device, addr) of the segments the log saw made and not yet freed
    unseen_segment = False
    sc = Scan()
    rows = sc.rows
    base = None        # the first row's time
    last_t = 0
    clamped = 0
    too_long = None    # the first time past the time column's reach (raised after the pass)
    nalloc = 0

    if isinstance(events, EventColumns) and not events.big:
        # the columns as they are (no Event made): action codes, frames as their numbers
        ftab, fno = events.frames, events.frame_no
        src = zip(events.action, events.device, events.stream, events.addr, events.size,
                  events.time, events.deferred, events.where, events.frame)
    else:
        ftab = [None]
        fno = {None: 0}
        src = ((_ACTION_CODE[e.action], e.device, e.stream, e.addr, e.size, e.time_us,
                e.deferred, e.where, _frame_number(ftab, fno, e.frame)) for e in events)
    # the rows' frames are the events' (numbers in ftab); the rows' columns appended at once
    rows.frames, rows.frame_no = ftab, fno
    add_t, add_op, add_dev, add_stream, add_id, add_size, add_frame = (
        rows.t.append, rows.op.append, rows.dev.append, rows.stream.append, rows.id.append,
        rows.size.append, rows.frame.append)
    for action, dev, stream, addr, size, t, deferred, where, frame in src:
        key = (dev, addr)
        if action == _A_ALLOC:
            if key in live or key in pending:
                other = live.get(key) or pending.get(key)
                state = "still allocated" if key in live else "freed but not yet completed"
                raise ConvertError(f"{_said(dev, where)}: alloc at address {addr:#x} which is "
                                   f"{state} (allocated at {_said(other[3], other[4])})")
            nalloc += 1
            live[key] = (nalloc, size, stream, dev, where)
            op, ident = _O_ALLOC, nalloc
        elif action == _A_FREE:
            blk = live.pop(key, None)
            if blk is None:
                if key in pending:
                    other = pending[key]
                    raise ConvertError(f"{_said(dev, where)}: address {addr:#x} freed twice "
                                       f"(allocated at {_said(other[3], other[4])})")
                # Freed but never allocated in the log: it was allocated before the log began.
                # Its id: -blk[0] (see the fix below).
                blk = (-len(synthesized) - 1, size, stream, dev,
                       _said(dev, where) + " (synthesized)")
                synthesized.append(blk)
            elif size != blk[1]:
                size_mismatch += 1
            if deferred:
                pending[key] = blk
            op, ident, size, frame = _O_FREE, blk[0], blk[1], 0
        elif action == _A_FREE_DONE:
            blk = pending.pop(key, None)
            if blk is None:
                if key in live:
                    other = live[key]
                    raise ConvertError(f"{_said(dev, where)}: free_completed at address "
                                       f"{addr:#x} which was never freed (allocated at "
                                       f"{_said(other[3], other[4])})")
                # Its free_requested was before the log began: nothing to complete.
                dropped_done += 1
                continue
            sc.num_deferred_frees += 1
            op, ident, size, frame = _O_FREE_DONE, blk[0], blk[1], 0
        elif action == _A_EMPTY_CACHE:
            op, ident, size, frame = _O_EMPTY, 0, 0, 0
        elif action >= _A_POOL_BEGIN:
            sc.num_pool_rows += 1
            op, ident, frame = _OP_CODE[_ACTIONS[action]], addr, 0
        elif action == _A_OOM:
            # The request the program made, at its place: a row of its own ('oom', version 2 of
            # the format), and the allocator's record of it in the reference.
            alloc_events.append(["oom", addr, size, len(rows.op), dev])
            sc.num_ooms += 1
            op, ident = _O_OOM, 0
        else:
            name = _ACTIONS[action]
            if name == "segment_alloc":
                segments.add(key)
            elif name == "segment_free":
                if key in segments:
                    segments.discard(key)
                else:
                    unseen_segment = True    # made before the log began
            alloc_events.append([name, addr, size, len(rows.op), dev])
            continue
        if base is None:
            base = t
        rel = int(round(t - base))
        if rel >= U64_LIMIT:
            if too_long is None:
                too_long = rel
            rel = last_t
        if rel < last_t:
            # The recorded clock went backwards (TSC-derived and approximate): keep time
            # non-decreasing, because the event order is what replay follows.
            clamped += 1
            rel = last_t
        last_t = rel
        add_t(rel)
        add_op(op)
        add_dev(dev)
        add_stream(stream)
        add_id(ident)
        add_size(size)
        add_frame(frame)
    if too_long is not None:
        raise ConvertError(f"time_us spans {too_long} microseconds, more than the trace's time "
                           f"column holds (2^64)")

    sc.live, sc.pending, sc.synthesized, sc.alloc_events, sc.segments = (
        live, pending, synthesized, alloc_events, segments)
    sc.nalloc, sc.dropped_done, sc.size_mismatch, sc.clamped = (nalloc, dropped_done,
                                                                 size_mismatch, clamped)
    sc.last_t, sc.unseen_segment = last_t, unseen_segment
    return sc


def build_trace(rec, label):
    """The trace of rec.events, in one pass (_scan, or the C reader's of the same events): each
    row is made as its event comes (its time relative to the first row's, held
    non-decreasing), an alloc's id being its number among the log's allocs; the synthesized
    allocs, known only at the end, come first with ids 1..S, and the others' ids are then moved
    up by S. An error of the events' order is raised as it is met, one of the time span after
    the pass (as when the rows were made in a second pass)."""
    scan = getattr(rec.events, "scan", None) or _scan(rec.events)
    tr = Trace()
    tr.rows = rows = scan.rows
    live, pending, synthesized, segments = (scan.live, scan.pending, scan.synthesized,
                                            scan.segments)
    add_t, add_op, add_dev, add_stream, add_id, add_size, add_frame = (
        rows.t.append, rows.op.append, rows.dev.append, rows.stream.append, rows.id.append,
        rows.size.append, rows.frame.append)
    last_t, nalloc, alloc_events = scan.last_t, scan.nalloc, scan.alloc_events
    unseen_segment = scan.unseen_segment
    dropped_done, size_mismatch, clamped = scan.dropped_done, scan.size_mismatch, scan.clamped
    tr.num_deferred_frees, tr.num_ooms, tr.num_pool_rows = (scan.num_deferred_frees,
                                                             scan.num_ooms, scan.num_pool_rows)

    # A free still waiting for its completion when the log ended (free_requested, no
    # free_completed: its block was used on another stream, record_stream, and that stream's
    # event had not been seen complete; the snapshot's segments call it active_pending_free) was
    # never the allocator's to reuse: it completes after the last row. A trace gives a free no
    # completion only when the free was immediate, so without these rows the replay would hand
    # the block out again where the real allocator made a new segment. A log that ends with an
    # OOM (the run died there) gets none: nothing follows its last row.
    if pending and not (len(rows.op) and rows.op[-1] == _O_OOM):
        for blk in pending.values():
            tr.num_deferred_frees += 1
            add_t(last_t)
            add_op(_O_FREE_DONE)
            add_dev(blk[3])
            add_stream(blk[2])
            add_id(blk[0])
            add_size(blk[1])
            add_frame(0)

    # Blocks still allocated when the log ended but never seen allocated in it were allocated
    # before the log began and held throughout: synthesize them too, so the replay carries that
    # memory. (Blocks freed before the log began with a completion still pending are left out.)
    held_before = []
    if rec.final_blocks is not None:
        for dev, addr, size, stream in rec.final_blocks:
            if (dev, addr) not in live and (dev, addr) not in pending:
                held_before.append((None, size, stream, dev, f"segments block {addr:#x}"))
    if rec.final_segments is not None and rec.final_segments - segments:
        unseen_segment = True                # a segment held at the end, never seen made

    # Synthesized allocs come first, at time 0: blocks freed in the log (in the order of their
    # frees), then blocks held from before the log to its end (by device and address).
    synthesized = synthesized + held_before
    for k, blk in enumerate(synthesized, 1):
        rows.prefix.append((0, "alloc", blk[3], blk[2], k, blk[1]))
    tr.num_synthesized = offset = len(synthesized)
    if offset:
        # the log's allocs after them: ids 1.. become offset + 1..; a synthesized one's -k is k
        ids, ops = rows.id, rows.op
        for k in range(len(ids)):
            if ops[k] <= _O_FREE_DONE:
                v = ids[k]
                ids[k] = v + offset if v > 0 else -v
    tr.num_allocs = nalloc

    tr.allocator_events = [[a, addr, size, seq + offset, dev]
                           for a, addr, size, seq, dev in alloc_events]
    tr.started_mid_run = bool(synthesized) or unseen_segment
    # An oom that is the log's last event: the program died of it (an OOM observer took the
    # snapshot, or the process ended there). convert() may decide otherwise from the sibling.
    if len(rows) and rows[-1][1] == "oom":
        tr.fatal_oom_seq = len(rows) - 1
    # An oom after which the program made no new request: only frees, their completions, cache
    # releases and pool ends follow (the exception unwinding: a snapshot dumped after `except
    # torch.OutOfMemoryError`). That is the death of the run too; convert() trims what follows
    # it unless the sibling says the run ended 'ok'.
    ops = rows.op
    for k in range(len(ops) - 1, -1, -1):
        if ops[k] == _O_ALLOC:
            break
        if ops[k] == _O_OOM:
            tr.death_seq = len(rows.prefix) + k
            break

    if synthesized:
        n_freed = len(synthesized) - len(held_before)
        warn(label, f"the log starts mid-run: synthesized {len(synthesized)} alloc(s) at the "
                    f"start of the trace ({n_freed} for blocks freed but never seen allocated, "
                    f"{len(held_before)} for blocks held from before the log to its end); "
                    f"replay results are approximate (the header says so)")
    elif unseen_segment:
        warn(label, "the log starts mid-run: it shows segments it never saw made; replay "
                    "results are approximate (the header says so)")
    if dropped_done:
        warn(label, f"skipped {dropped_done} free completion(s) whose free was before the "
                    f"log began")
    if size_mismatch:
        warn(label, f"{size_mismatch} free(s) reported a size different from their alloc; "
                    f"the trace uses the alloc's size")
    if clamped:
        warn(label, f"time_us went backwards {clamped} time(s); held it non-decreasing")
    if not len(rows):
        warn(label, "no allocation events: the trace is empty")
    return tr


# ---------------------------------------------------------------------------------------------
# The death of a run: where it died, and the limit it met there
# ---------------------------------------------------------------------------------------------

def trim_after_death(tr):
    """Take off the rows after tr.death_seq (frees and cache releases only: the exception
    unwinding) and the allocator's events they caused, so the trace ends at the OOM the run
    died of; returns how many rows went."""
    k = tr.death_seq + 1 - len(tr.rows.prefix)
    rows = tr.rows
    n = len(rows.op) - k
    for col in (rows.t, rows.op, rows.dev, rows.stream, rows.id, rows.size, rows.frame):
        del col[k:]
    # an allocator event's seq is the row it came before: those after the oom row go with the
    # rows (the unwinding's releases); the oom's own and the releases that led to it stay
    tr.allocator_events = [e for e in tr.allocator_events if e[3] <= tr.death_seq]
    tr.fatal_oom_seq = tr.death_seq
    tr.unwound_rows = n
    return n


def growth_needed(size, settings):
    """The least the allocator must get from the device to serve a request of size bytes (its
    rounded size, as the oom entry records it), by PyTorch's get_allocation_size: a 2 MiB
    segment up to 1 MiB, 20 MiB below 10 MiB, else the size in 2 MiB; with expandable segments
    the request's pages (2 MiB each), at least one."""
    if isinstance(settings, dict) and settings.get("expandable_segments") is True:
        return max(1, -(-size // (2 * MiB))) * 2 * MiB
    if size <= MiB:
        return 2 * MiB
    if size < 10 * MiB:
        return 20 * MiB
    return -(-size // (2 * MiB)) * 2 * MiB


def full_device(held, free, need, later):
    """The limit an OOM shows where the device was full then: held (what the allocator held at
    the failing request) + free (the bytes the device reported free), when free could not hold
    need (the least growth the request needed: another process, another library held the
    rest), and the run never held more after it (later: the most it held since; more means the
    device had room again, and the full device was no limit of the run). Else None. The one
    rule of limit_at_death and of the empty_cache inference's limit (cli.full_device_limit)."""
    if not _is_int(free) or free >= need or later > held + free:
        return None
    return held + free


def full_device_limit(rec, dev, events):
    """The limit a device's last OOM shows when the device was full then (its free bytes fewer
    than the request's growth: another process held the rest): what the allocator held plus
    those free bytes, as limit_at_death finds it for the reference; else None. The empty_cache
    rule takes it too, where it is below the cap known (a NAME.json's 2 GiB beside a device full
    at 1.5 GiB made the allocator's five flushes read as empty_cache() calls)."""
    if rec.kind != "pytorch-snapshot":
        return None
    running, at, later = 0, None, 0
    for e in events:
        if e.action in GROWTHS:
            running += e.size
        elif e.action in RELEASES:
            running -= e.size
        elif e.action == "oom":
            at = (running, e.addr, e.size)     # an oom's addr is the device's free bytes
            later = running
        later = max(later, running)            # the most held since the last oom
    if at is None:
        return None
    before = 0   # segments made before the log began, as limit_at_death counts them
    if rec.final_reserved is not None and dev in rec.final_reserved:
        before = max(0, rec.final_reserved[dev] - running)
    return full_device(before + at[0], at[1], growth_needed(at[2], rec.allocator_settings),
                       before + later)


def limit_at_death(rec, tr, events_before_trim):
    """The memory the allocator of the device that died could have had, from the snapshot
    itself (docs/cli.md, "The limit a run met"): what it held at the failing request
    (R: its segments after the releases that came first) plus the free bytes the device
    reported then (F, the oom entry's device_free). When F is smaller than the least growth the
    request needed, the device was full (another process, another library): the limit was
    R + F. Otherwise the device had room and something below it refused the growth (a memory
    fraction): the limit is unknown, between the peak the allocator had reached (it was
    allowed) and R plus that growth (it was not). A run that did not die but caught OOMs met
    its limit at each: the last one tells it the same way, but a full device there is no limit
    where the run held more after it (the other process gave memory back). None when the run
    met none."""
    seq, where = tr.fatal_oom_seq, "the OOM"
    if seq is None:
        ops = tr.rows.op
        k = next((k for k in range(len(ops) - 1, -1, -1) if ops[k] == _O_OOM), None)
        if k is None:
            return None
        seq, where = len(tr.rows.prefix) + k, "a caught OOM"
    _t, _op, dev, _stream, _id, size = tr.rows[seq]
    oom = next((e for e in events_before_trim if e[0] == "oom" and e[3] == seq), None)
    running = peak = 0
    for e in events_before_trim:
        if e[4] != dev or e[0] == "oom":
            continue
        if e[3] > seq:
            break
        running += e[2] if e[0] in GROWTHS else -e[2] if e[0] in RELEASES else 0
        peak = max(peak, running)
    # segments made before the log began: what the snapshot's final segments hold beyond what
    # the log's events add up to (0 for a log recorded from the first allocation)
    before = 0
    if rec.final_reserved is not None and dev in rec.final_reserved:
        total = sum((e[2] if e[0] in GROWTHS else -e[2] if e[0] in RELEASES else 0)
                    for e in events_before_trim if e[4] == dev)
        before = max(0, rec.final_reserved[dev] - total)
    held = before + running
    need = growth_needed(size, rec.allocator_settings)
    out = {"device": dev, "held_bytes": held, "request_bytes": size, "growth_bytes": need,
           "device_free_bytes": oom[1] if oom is not None and rec.kind == "pytorch-snapshot"
           else None}
    free = out["device_free_bytes"]
    # the most the allocator held after it (a caught OOM's run went on): a full device then is
    # no limit of the run where the run held more later (the other process gave memory back)
    after = later = running
    for e in events_before_trim:
        if e[4] != dev or e[0] == "oom" or e[3] <= seq:
            continue
        after += e[2] if e[0] in GROWTHS else -e[2] if e[0] in RELEASES else 0
        later = max(later, after)
    full = full_device(held, free, need, before + later)
    if full is not None:
        out.update(bytes=full, source=f"device full at {where}")
    elif free is not None and free < need:
        return None   # full then, but the run held more after it: no limit it met
    else:
        # An expandable segment's mappings may pass the limit by less than a 20 MiB page (the
        # inference's rule too): its peak allowed is no floor of the limit, the peak less that
        # is (a capped run at 1,585,866,342 bytes had mapped 1,600,126,976: the range said
        # was empty, and whatif dropped it)
        expandable = (isinstance(rec.allocator_settings, dict) and
                      rec.allocator_settings.get("expandable_segments") is True) or any(
            e[0] == "segment_map" for e in events_before_trim if e[4] == dev)
        slack = 20 * MiB - 1 if expandable else 0
        out.update(bytes=None, source=None, min_bytes=max(0, before + peak - slack),
                   max_bytes=held + need - 1)
    return out
