"""A snapshot read by gpusim's C reader (`gpusim read-snapshot`, traces/snapshot.c), about seven
times as fast as SnapshotWalker on a real recording: read_snapshot_fast gives the Recording
read_snapshot would give, or None when the C reader is not there or declines the snapshot, and
read_snapshot then reads it (docs/speed.md, "The snapshot reader in C").

The C reader turns each entry into the row DeviceEvents would make of it and writes the rest of
the snapshot back as a small pickle, device_traces replaced by each device's entry count; from
there the Recording is made by the same code as read_snapshot's (_recording_of). It declines
what it cannot read exactly as the walker does, so an answer is always the walker's: the
comparison of the two on every snapshot the tests hold (tests/test_convert.py, TestFastReader)
and on mutated ones (tests/fuzz/diff_convert.py --fast) checks it."""

import array
import io
import os
import stat
import struct
import subprocess
import sys
import threading

from .model import _ACTIONS, ConvertError, EventColumns, Recording, Scan
from .snapshot import SafeUnpickler, _recording_of

ENV = "GPUSIM_SNAPSHOT_READER"
MAGIC = b"GSSNAP02"
# the columns in the order the C reader writes them (snapshot.c), with their array types
_COLUMNS = (("action", "B"), ("deferred", "B"), ("stream", "Q"), ("addr", "q"), ("size", "Q"),
            ("time", "q"), ("where", "Q"), ("frame", "I"))


def snapshot_reader():
    """The gpusim program that reads snapshots: $GPUSIM_SNAPSHOT_READER ('none' or empty: no
    reader), else gpusim_program()."""
    env = os.environ.get(ENV)
    if env is not None:
        return None if env in ("", "none") else env
    return gpusim_program()


def gpusim_program():
    """gpusim beside the converter (installed: gpusim-convert in gpusim's folder), else the
    source tree's build/gpusim; None when there is none. Beside the converter only when the
    program running is the converter: under `python3 -c` or an interpreter, sys.argv[0] names
    no file, and the folder it would give is the working directory, whose gpusim is no one's
    to run."""
    script = sys.argv[0] if sys.argv else ""
    beside = ([os.path.join(os.path.dirname(os.path.realpath(script)), "gpusim")]
              if os.path.basename(script) in ("convert.py", "gpusim-convert") else [])
    package = os.path.dirname(os.path.abspath(__file__))
    for path in beside + [os.path.join(os.path.dirname(os.path.dirname(package)), "build",
                                       "gpusim")]:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def read_snapshot_fast(path, inp, budget, progress=None):
    """The Recording of the snapshot at path (inp: its Input, already open; budget: the
    limits.MemoryBudget, which the C reader keeps to half of and this checks after; progress:
    the inputs.Progress the C reader's counts go to), or None."""
    reader = snapshot_reader()
    try:
        regular = stat.S_ISREG(os.fstat(inp.raw.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):
        regular = False
    # (a pipe's bytes, once the C reader took them, would be lost to the walker)
    if reader is None or not regular:
        return None
    try:
        out, rc = _run(reader, path, budget, progress)
    except OSError:
        return None
    if rc != 0 or not out.startswith(MAGIC):
        return None
    try:
        rec = _parse(memoryview(out))
    except (struct.error, ValueError, IndexError):
        return None     # an output this converter does not know (another gpusim's)
    try:
        budget.check()
    except ConvertError:
        return None     # (past the limit here, holding both: the walker's to judge)
    return rec


def _run(reader, path, budget, progress):
    """(stdout, exit status) of the C reader on path; its progress lines, when asked for, go to
    progress as they come."""
    shown = progress is not None and progress.enabled
    argv = [reader, "read-snapshot", *(["--progress"] if shown else []),
            *([f"--max-memory={budget.limit}"] if budget.limit is not None else []), "--", path]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE if shown else subprocess.DEVNULL)
    if shown:
        def follow():
            for line in p.stderr:
                parts = line.split()
                if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                    progress(int(parts[0]), int(parts[1]))
        t = threading.Thread(target=follow, daemon=True)
        t.start()
    with p.stdout:
        out = p.stdout.read()
    rc = p.wait()
    if shown:
        t.join()
        p.stderr.close()
    return out, rc


# the rows' columns in the order the C reader writes them (snaprows.c), with their array types
_ROW_COLUMNS = (("t", "Q"), ("op", "B"), ("stream", "Q"), ("id", "q"), ("size", "Q"),
                ("frame", "I"))


def _column(data, pos, code, n):
    a = array.array(code)
    end = pos + n * a.itemsize
    if end > len(data):
        raise ValueError("cut short")
    a.frombytes(data[pos:end])
    return a, end


def _records(data, pos, fmt):
    """(the records of struct format fmt after a u64 count at pos, as tuples; the position
    after them)."""
    (n,) = struct.unpack_from("=Q", data, pos)
    pos += 8
    end = pos + n * struct.calcsize(fmt)
    if end > len(data):
        raise ValueError("cut short")
    return list(struct.iter_unpack(fmt, data[pos:end])), end


def _parse_scan(data, pos, dev, cols):
    """(the Scan of build_trace's pass over dev's events that the C reader made, or None where
    that pass would raise; the position after it)."""
    (made,) = struct.unpack_from("=B", data, pos)
    pos += 1
    if not made:
        return None, pos
    sc = Scan()
    rows = sc.rows
    (n,) = struct.unpack_from("=Q", data, pos)
    pos += 8
    for name, code in _ROW_COLUMNS:
        a, pos = _column(data, pos, code, n)
        setattr(rows, name, a)
    rows.dev = array.array("Q", [dev]) * n
    rows.frames, rows.frame_no = cols.frames, cols.frame_no
    (sc.nalloc, sc.dropped_done, sc.size_mismatch, sc.clamped, sc.num_deferred_frees,
     sc.num_ooms, sc.last_t, unseen) = struct.unpack_from("=8Q", data, pos)
    pos += 64
    sc.unseen_segment = bool(unseen)
    synthesized, pos = _records(data, pos, "=QQ")
    sc.synthesized = [(-k, size, stream, dev, None)
                      for k, (size, stream) in enumerate(synthesized, 1)]
    pending, pos = _records(data, pos, "=qqQQ")
    sc.pending = {(dev, addr): (ident, size, stream, dev, None)
                  for addr, ident, size, stream in pending}
    live, pos = _records(data, pos, "=q")
    sc.live = {(dev, addr) for (addr,) in live}
    segments, pos = _records(data, pos, "=q")
    sc.segments = {(dev, addr) for (addr,) in segments}
    events, pos = _records(data, pos, "=BqQQ")
    sc.alloc_events = [[_ACTIONS[a], addr, size, seq, dev] for a, addr, size, seq in events]
    return sc, pos


def _parse(data):
    rec = Recording("pytorch-snapshot")
    pos = len(MAGIC)
    (ndev,) = struct.unpack_from("=I", data, pos)
    pos += 4
    devices = []
    for dev in range(ndev):
        entries, rows, program, nframes = struct.unpack_from("=QQBI", data, pos)
        pos += 21
        cols = EventColumns()
        for _ in range(nframes):
            (n,) = struct.unpack_from("=I", data, pos)
            pos += 4
            frame = str(data[pos:pos + n], "utf-8", "surrogatepass")
            pos += n
            cols.frame_no[frame] = len(cols.frames)
            cols.frames.append(frame)
        for name, code in _COLUMNS:
            a, pos = _column(data, pos, code, rows)
            setattr(cols, name, a)
        cols.device = array.array("Q", [dev]) * rows
        cols.scan, pos = _parse_scan(data, pos, dev, cols)
        if program:
            rec.devices.add(dev)
        devices.append((entries, cols if entries else []))
    (nstreams,) = struct.unpack_from("=I", data, pos)
    pos += 4
    rec.streams.update(struct.unpack_from(f"={nstreams}Q", data, pos))
    pos += 8 * nstreams
    (npools,) = struct.unpack_from("=I", data, pos)
    pos += 4
    for _ in range(npools):
        a, b, count = struct.unpack_from("=qqQ", data, pos)
        pos += 24
        rec.pool_ids[(a, b)] = count
    (n,) = struct.unpack_from("=Q", data, pos)
    pos += 8
    if pos + n != len(data):
        raise ValueError("length")
    snap = SafeUnpickler(io.BytesIO(data[pos:pos + n])).load()
    return _recording_of(rec, snap, lambda dev, evs: devices[dev] if dev < len(devices) else None)
