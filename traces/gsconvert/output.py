"""Output: the trace rendered as text (header and rows), and the files written whole (through a
temporary file, then renamed), gzip-compressed when the name ends in .gz."""

import array
import gzip
import os
import stat
import struct
import subprocess
import sys
import tempfile
import zlib

from .model import (_OPS, TRACE_COLUMNS, TRACE_COLUMNS_FRAMES, TRACE_MAGIC, TRACE_MAGIC_2,
                    TRACE_MAGIC_3, ConvertError, header_setting, header_text)


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------

def render_trace(rec, tr, source, device_total, client, totals_by_device=None, frames=True):
    """The trace's text; with frames (and a row that has one) its '# frame N:' lines and frame
    column, numbered in order of first use. A trace without frames is written as before."""
    # Version 2 only when a row needs it: a trace without oom rows is written as before.
    lines = [TRACE_MAGIC_3 if tr.num_pool_rows else TRACE_MAGIC_2 if tr.num_ooms else TRACE_MAGIC,
             f"# source: {rec.kind} {header_text(source)}"]
    if device_total is not None:
        lines.append(f"# device_total_bytes: {device_total}")
    if totals_by_device:
        lines.append("# device_total_bytes_by_device: " +
                     ",".join(f"{d}={n}" for d, n in sorted(totals_by_device.items())))
    if rec.allocator_conf is not None:
        lines.append(f"# allocator_conf: {header_setting('allocator_conf', rec.allocator_conf)}")
    if rec.pytorch_version is not None:
        lines.append(f"# pytorch_version: {header_text(rec.pytorch_version)}")
    if tr.num_synthesized:
        lines.append(f"# synthesized_allocs: {tr.num_synthesized}")
    if tr.started_mid_run and not tr.num_synthesized:
        lines.append("# started_mid_run: yes")
    if tr.fatal_oom_seq is not None:
        lines.append(f"# fatal_oom_event: {tr.fatal_oom_seq}")
    elif tr.died_after_log:
        lines.append("# died_after_log: yes")
    if rec.num_inferred_empty_cache:
        lines.append(f"# inferred_empty_cache: {rec.num_inferred_empty_cache}")
    rows = tr.rows
    if not (frames and rows.num_framed()):
        lines.append(TRACE_COLUMNS)
        return _render_rows(lines, rows, client, None)
    # the frames in order of first use, each numbered once (header_text once per frame)
    number = {}
    fnum = [""] * len(rows.frames)      # a row's frame (its number in rows.frames) -> column
    for fi in dict.fromkeys(rows.frame):
        if fi == 0:
            continue
        # header_text: a frame is free text; control characters (a line break) become \xNN.
        f = header_text(rows.frames[fi])
        if f not in number:
            number[f] = len(number) + 1
            lines.append(f"# frame {number[f]}: {f}")
        fnum[fi] = number[f]
    lines.append(TRACE_COLUMNS_FRAMES)
    return _render_rows(lines, rows, client, fnum)


_RENDER_BATCH = 1 << 16     # rows rendered, encoded and written at a time


def _render_rows(lines, rows, client, fnum):
    """The header (encoded now: its errors come before anything is written) and then an
    iterator of the rows' text in batches: the trace is written as it is rendered, never held
    whole."""
    head = ("\n".join(lines) + "\n").encode("utf-8")

    def body():
        yield head
        tail = "," if fnum is not None else ""      # their frame column: empty
        for seq, (t, op, dev, stream, ident, size) in enumerate(rows.prefix):
            yield f"{seq},{t},{op},{client},{dev},{stream},{ident},{size}{tail}\n".encode()
        seq = len(rows.prefix)
        ops = _OPS
        n = len(rows.op)
        for a in range(0, n, _RENDER_BATCH):
            b = min(n, a + _RENDER_BATCH)
            cols = (rows.t[a:b], rows.op[a:b], rows.dev[a:b], rows.stream[a:b], rows.id[a:b],
                    rows.size[a:b])
            if fnum is None:
                out = [f"{s},{t},{ops[op]},{client},{dev},{stream},{ident},{size}"
                       for s, t, op, dev, stream, ident, size in zip(range(seq + a, seq + b),
                                                                     *cols)]
            else:
                out = [f"{s},{t},{ops[op]},{client},{dev},{stream},{ident},{size},{fnum[f]}"
                       for s, t, op, dev, stream, ident, size, f in zip(
                           range(seq + a, seq + b), *cols, rows.frame[a:b])]
            out.append("")
            yield "\n".join(out).encode()
    return body()


def write_whole(path, data):
    """Write to a temporary file in the same directory, then rename over path.

    A reader never sees a half-written file, and an interrupted run leaves the old one intact.
    """
    _write_atomic(path, lambda f: f.write(data))


class _CheckedWriter:
    """A file object over a descriptor whose every write is whole: os.write until each byte is
    written, an error raised (a short write to a pipe, or to a file at its size limit, was
    taken as done)."""

    def __init__(self, fd):
        self.fd = fd

    def write(self, data):
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            if n <= 0:
                raise OSError(0, "nothing written")
            view = view[n:]
        return len(data)


def _exists_not_regular(path):
    """path exists and is not a regular file itself (a device, a FIFO, a link), as gpusim's
    output writer (util/file.c) tells it by lstat."""
    try:
        return not stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _write_in_place(path, write):
    what = "standard output" if path == "-" else path
    try:
        if path == "-":
            sys.stdout.flush()
            write(_CheckedWriter(sys.stdout.fileno()))
        else:
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CREAT | os.O_CLOEXEC, 0o666)
            try:
                write(_CheckedWriter(fd))
            finally:
                os.close(fd)
    except OSError as e:
        raise ConvertError(f"cannot write {what}: {e.strerror or e}") from None


def _discard(tmp):
    """A temporary file removed, if there is one (what a write that failed left)."""
    if tmp is not None:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _write_atomic(path, write):
    """write(f) into a temporary file beside path, then rename it over path (write_whole); path
    "-" is standard output, as for gpusim's -o."""
    if path == "-" or _exists_not_regular(path):
        # standard output, or an existing target that is not a regular file (a device, a FIFO, a
        # link such as /dev/stdout): written in place, as gpusim's -o writes it, never replaced
        # by a rename (as root that turned /dev/full into a regular file)
        _write_in_place(path, write)
        return
    directory = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        # a short name: the output's own name with a suffix could pass NAME_MAX (255 bytes)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".convert-", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            write(f)
        # mkstemp creates the file 0600; give it the mode a plain open() would have.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise ConvertError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        _discard(tmp)


def write_chunks(path, chunks):
    """write_whole for a trace rendered in chunks (render_trace), gzip-compressed as it is
    written when path ends in .gz: the same bytes as maybe_gzip of the whole (one deflate stream
    fed piece by piece gives what one call gives), without the whole text or its compressed
    copy in memory."""
    def write(f):
        if path.endswith(".gz"):
            comp = zlib.compressobj(9, zlib.DEFLATED, -15)
            crc = n = 0
            f.write(_GZIP_HEADER)
            for c in chunks:
                crc = zlib.crc32(c, crc)
                n += len(c)
                f.write(comp.compress(c))
            f.write(comp.flush())
            f.write(struct.pack("<LL", crc, n & 0xFFFFFFFF))
        else:
            for c in chunks:
                f.write(c)
    _write_atomic(path, write)


def maybe_gzip(path, data):
    # mtime=0 and no file name in the header: the same trace always gives the same bytes. The
    # header's OS byte (offset 9) is 255 up to Python 3.10 and from 3.13, 3 in 3.11 and 3.12: it is
    # always written as 3 (Unix), as zlib and gpusim's own writer write it.
    if not path.endswith(".gz"):
        return data
    out = gzip.compress(data, compresslevel=9, mtime=0)
    return out[:9] + b"\x03" + out[10:]


_GZIP_HEADER = maybe_gzip(".gz", b"")[:10]      # what maybe_gzip writes before the deflate data


def write_bounded(path, chunks, binary, gpusim):
    """The trace (chunks: text, or the binary format when binary) written to path by `gpusim
    convert`, which adds the offline bound to its header (offline_bytes_by_device): a replay of
    the output then reads the figure instead of planning it, which took longer than the replay
    (about 100 ms and 60 bytes an event more on 431,000 events; BENCHMARKS.md, "The bound
    stored by the converter"). The trace goes to a temporary file beside path (gzip level 1
    when path ends in .gz, so that the whole text is never on the disk), and gpusim writes path
    whole, compressing it as its name says. False, with path not written, when this cannot be
    done (standard output, a target that is not a regular file, no gpusim); a gpusim that fails
    or does not answer leaves the trace written as write_chunks writes it, without the bound,
    and why is returned."""
    if gpusim is None or path == "-" or _exists_not_regular(path):
        return False
    gz = path.endswith(".gz")
    directory = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".convert-",
                                   suffix=(".gsbin" if binary else ".gstrace") + (".gz" * gz))
        with os.fdopen(fd, "wb") as f:
            out = gzip.GzipFile(fileobj=f, mode="wb", compresslevel=1, mtime=0) if gz else f
            for c in chunks:
                out.write(c)
            if gz:
                out.close()
        failed = _gpusim_convert(gpusim, path, tmp, _time_limit(os.path.getsize(tmp)))
        if failed:
            with (gzip.open if gz else open)(tmp, "rb") as f:
                write_chunks(path, iter(lambda: f.read(1 << 20), b""))
            return failed
        return True
    except OSError as e:
        raise ConvertError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        _discard(tmp)


def _time_limit(nbytes):
    """Seconds a gpusim that writes a trace of nbytes may take: a minute, and more for a large
    trace (the bound's planner is O(n log n); gpusim convert of 431,000 events takes 0.2 s)."""
    return 60 + nbytes // (1 << 20)


def _stop(proc):
    """Ends a gpusim that did not answer in time: its output is then whole or gone, as on an
    interrupt (gs_output_open)."""
    proc.terminate()
    try:
        proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


def _gpusim_convert(gpusim, path, tmp, limit_s):
    """`gpusim convert` of tmp into path: None, or why not (its message, no answer in limit_s
    seconds, the program not run). On an interrupt it waits for gpusim, which takes the
    interrupt only once its output is whole or gone (gs_output_open), and the interrupt goes
    on: no temporary file of gpusim's is left behind."""
    try:
        # argv, no shell; "--": the temporary name is never an option
        proc = subprocess.Popen([gpusim, "convert", "-o", path, "--", tmp],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
    except OSError as e:
        return f"{gpusim}: {e.strerror or e}"
    try:
        _, err = proc.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        _stop(proc)
        return f"no answer in {limit_s} s"
    except KeyboardInterrupt:
        proc.wait()
        raise
    if proc.returncode != 0:
        return err.decode("utf-8", "replace").strip() or f"exit status {proc.returncode}"
    return None


# the stream gpusim write-rows reads (traces/rows.c)
_ROWS_MAGIC = b"GSROWS01"
_ROWS_COLUMNS = (("t", "Q"), ("op", "B"), ("stream", "Q"), ("id", "q"), ("size", "Q"),
                 ("dev", "Q"))
ROWS_ENV = "GPUSIM_ROWS_WRITER"


def rows_stream(head, rows, client):
    """The pieces (bytes-like) of the stream gpusim write-rows reads (traces/rows.c says its
    layout) for head (the header text, the column line last), rows (a TraceRows) and client
    (bytes), or None where the rows are not of the kinds it carries (a synthesized row that is
    no allocation, a negative id among them, a column of another type or length)."""
    cols = [getattr(rows, name) for name, _ in _ROWS_COLUMNS]
    if (any(r[1] != "alloc" for r in rows.prefix) or
            any(c.typecode != code or len(c) != len(rows.op)
                for c, (_, code) in zip(cols, _ROWS_COLUMNS))):
        return None
    try:
        pre = array.array("Q", [v for r in rows.prefix for v in (r[0], r[5], r[2], r[3], r[4])])
    except OverflowError:
        return None
    return [_ROWS_MAGIC, struct.pack("=I", len(head)), head, struct.pack("=I", len(client)),
            client, struct.pack("=Q", len(rows.prefix)), pre, struct.pack("=Q", len(rows.op)),
            *cols]


def write_rows(gpusim, path, head, rows, client, bound):
    """The binary trace of head and rows (rows_stream) for client written to path by `gpusim
    write-rows`, which makes of the columns the bytes gsbin.encode_rows would (a fifth of a
    conversion's time in Python; docs/speed.md), storing the offline bound as gpusim convert
    does when bound. True when written; False, with path untouched, when it was not: no gpusim
    ($GPUSIM_ROWS_WRITER=none turns it off), standard output or a target that is not a regular
    file, or a trace the program declines (the caller then encodes it itself, as before)."""
    if (gpusim is None or os.environ.get(ROWS_ENV) == "none" or path == "-" or
            _exists_not_regular(path)):
        return False
    pieces = rows_stream(head, rows, client)
    if pieces is None:
        return False
    try:
        # argv, no shell; "--": the output's name is never an option
        proc = subprocess.Popen([gpusim, "write-rows", *([] if bound else ["--no-bound"]), "--",
                                 path], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    except OSError:
        return False
    limit_s = _time_limit(sum(len(memoryview(p).cast("B")) for p in pieces))
    try:
        with proc.stdin as f:
            for piece in pieces:
                f.write(piece)
    except OSError:
        pass            # it stopped reading: declined, as its status says
    except KeyboardInterrupt:
        proc.wait()     # (its output is then whole or gone: gs_output_open)
        raise
    try:
        return proc.wait(timeout=limit_s) == 0
    except subprocess.TimeoutExpired:
        _stop(proc)     # (the caller writes the trace itself)
        return False
    except KeyboardInterrupt:
        proc.wait()
        raise
