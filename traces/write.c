/* write.c - the trace writer: a gs_trace back into the text format (gzip when the name ends in
 * ".gz"), through a temporary file and a rename, so no reader ever sees half a trace.
 */
#include "trace-int.h"

#include <glib/gstdio.h>
#include <zlib.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- The sink ------------------------------------------------------------------------------- */

/* Output goes through a fixed buffer, compressed chunk by chunk when gzip is on (zlib, with
 * the parameters and calls of GIO's GZlibCompressor, which wrote these files before: the same
 * bytes). The first error is remembered (as an errno or zlib's message) and everything after
 * it is skipped. */
typedef struct {
    FILE *f;
    z_stream zs;
    gboolean gz;
    int err_no;
    const char *zerr; /* zlib's complaint (a static string), or NULL */
    size_t n;
    char buf[1 << 16];
    char zbuf[1 << 16];
} sink;

static void sink_zpass(sink *k, const char *in, size_t len, gboolean finish)
{
    if (!finish && len == 0)
        return;
    for (;;) {
        k->zs.next_in = (Bytef *)(uintptr_t)in;
        k->zs.avail_in = (uInt)len; /* at most the buffer's size */
        k->zs.next_out = (Bytef *)k->zbuf;
        k->zs.avail_out = (uInt)sizeof k->zbuf;
        int res = deflate(&k->zs, finish ? Z_FINISH : Z_NO_FLUSH);
        if (res != Z_OK && res != Z_STREAM_END) {
            k->zerr = k->zs.msg ? k->zs.msg : "zlib could not compress";
            return;
        }
        size_t r = len - k->zs.avail_in, w = sizeof k->zbuf - k->zs.avail_out;
        if (w && fwrite(k->zbuf, 1, w, k->f) != w) {
            k->err_no = errno ? errno : EIO;
            return;
        }
        in += r;
        len -= r;
        if (res == Z_STREAM_END || (!finish && len == 0))
            return;
    }
}

static void sink_flush(sink *k, gboolean finish)
{
    /* interrupted (a stop signal held back since gs_output_open): nothing more is written, and
     * nothing is committed */
    if (!k->err_no && !k->zerr && gs_stop_pending()) k->err_no = EINTR;
    if (k->err_no || k->zerr) {
        k->n = 0; /* discarded: a full buffer kept full made sink_put loop for ever */
        return;
    }
    if (k->gz)
        sink_zpass(k, k->buf, k->n, finish);
    else if (k->n && fwrite(k->buf, 1, k->n, k->f) != k->n)
        k->err_no = errno ? errno : EIO;
    k->n = 0;
}

static void sink_put(sink *k, const char *s, size_t len)
{
    while (len) {
        if (k->n == sizeof k->buf)
            sink_flush(k, FALSE);
        size_t m = MIN(len, sizeof k->buf - k->n);
        memcpy(k->buf + k->n, s, m);
        k->n += m;
        s += m;
        len -= m;
    }
}

static inline void sink_str(sink *k, const char *s)
{
    sink_put(k, s, strlen(s));
}

static inline void sink_u64(sink *k, uint64_t v, char after)
{
    char tmp[24], *e = tmp + sizeof tmp, *q = e;
    *--q = after;
    do {
        *--q = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    sink_put(k, q, (size_t)(e - q));
}

/* ---- The trace, as text --------------------------------------------------------------------- */

/* ALLOC, FREE and FREE_DONE name an allocation (a slot, written as its id); the others do not. */
static inline gboolean names_slot(const gs_event *e)
{
    return e->op == GS_OP_ALLOC || e->op == GS_OP_FREE || e->op == GS_OP_FREE_DONE;
}

/* Refuse a trace that would not read back as itself (hand-built structs can hold anything). */
static gboolean check_writable(const gs_trace *t, const char *path, GError **err)
{
    const char *bad = NULL;
    size_t bad_ix = 0;
    for (guint i = 0; i < t->meta->len && !bad; i++) {
        const gs_trace_meta *m = &g_array_index(t->meta, gs_trace_meta, i);
        if (!gs_trace_valid_name(m->key, strlen(m->key)) || strpbrk(m->value, "\r\n"))
            bad = "metadata entry cannot be written", bad_ix = i;
    }
    for (guint i = 0; i < t->clients->len && !bad; i++) {
        const char *c = g_ptr_array_index(t->clients, i);
        if (!gs_trace_valid_name(c, strlen(c)))
            bad = "client name cannot be written", bad_ix = i;
    }
    for (guint i = 0; t->frames && i < t->frames->len && !bad; i++)
        if (strpbrk(g_ptr_array_index(t->frames, i), "\r\n"))
            bad = "frame cannot be written", bad_ix = i;
    for (guint i = 0; t->ev_frames && i < t->ev_frames->len && !bad; i++) {
        const gs_trace_ev_frame *f = &g_array_index(t->ev_frames, gs_trace_ev_frame, i);
        if (f->ev >= t->n || (t->ev[f->ev].op != GS_OP_ALLOC && t->ev[f->ev].op != GS_OP_OOM) ||
            !f->frame || f->frame > t->frames->len ||
            (i && f->ev <= g_array_index(t->ev_frames, gs_trace_ev_frame, i - 1).ev))
            bad = "event frame refers to nothing", bad_ix = i;
    }
    for (size_t i = 0; i < t->n && !bad; i++) {
        const gs_event *e = &t->ev[i];
        if (e->op >= GS_OP_COUNT || e->client >= t->clients->len ||
            e->stream >= t->streams->len || (names_slot(e) && e->slot >= t->n_slots) ||
            (gs_event_is_pool(e) && (e->slot == 0 || e->slot == UINT32_MAX || e->size > 1)))
            bad = "event refers to nothing", bad_ix = i;
    }
    if (bad)
        g_set_error(err, GS_TRACE_ERROR, GS_TRACE_ERROR_FORMAT, "%s: %s (index %zu)", path, bad,
                    bad_ix);
    return bad == NULL;
}

static void write_trace(sink *k, const gs_trace *t)
{
    /* The lowest version that holds every event: a version-1 trace writes back byte for byte,
     * and so does a version-2 one. */
    unsigned v = 1;
    for (size_t i = 0; i < t->n && v < 3; i++)
        v = gs_event_is_pool(&t->ev[i]) ? 3 : t->ev[i].op == GS_OP_OOM ? MAX(v, 2) : v;
    sink_str(k, v == 3 ? GS_TRACE_MAGIC_3 "\n" : v == 2 ? GS_TRACE_MAGIC_2 "\n"
                                                          : GS_TRACE_MAGIC "\n");
    gboolean wrote_total = FALSE;
    for (guint i = 0; i < t->meta->len; i++) {
        const gs_trace_meta *m = &g_array_index(t->meta, gs_trace_meta, i);
        sink_str(k, "# ");
        sink_str(k, m->key);
        sink_str(k, ": ");
        /* device_total is the authority (code may have set it directly); writing it in the
         * key's place keeps the header order. */
        if (strcmp(m->key, "device_total_bytes") == 0) {
            sink_u64(k, t->device_total, '\n');
            wrote_total = TRUE;
        } else {
            sink_str(k, m->value);
            sink_str(k, "\n");
        }
    }
    if (!wrote_total && t->device_total) {
        sink_str(k, "# device_total_bytes: ");
        sink_u64(k, t->device_total, '\n');
    }
    /* Frames only when the trace has some: a trace without writes back byte for byte. */
    gboolean frames = t->frames && t->frames->len;
    for (guint i = 0; frames && i < t->frames->len; i++) {
        sink_str(k, GS_TRACE_FRAME_PREFIX);
        sink_u64(k, i + 1, ':');
        sink_str(k, " ");
        sink_str(k, g_ptr_array_index(t->frames, i));
        sink_str(k, "\n");
    }
    sink_str(k, frames ? GS_TRACE_COLUMNS_FRAMES "\n" : GS_TRACE_COLUMNS "\n");
    /* The (event, frame) pairs: none at all when every row says 0 (its data is NULL then, and
     * NULL + 0 is undefined: UBSan, fuzz_trace's crash-frames-unused.gstrace). */
    gboolean pairs = frames && t->ev_frames && t->ev_frames->len;
    const gs_trace_ev_frame *fr =
        pairs ? (const gs_trace_ev_frame *)(void *)t->ev_frames->data : NULL;
    const gs_trace_ev_frame *fr_end = pairs ? fr + t->ev_frames->len : NULL;

    const uint64_t *streams = (const uint64_t *)(void *)t->streams->data;
    for (size_t i = 0; i < t->n; i++) {
        const gs_event *e = &t->ev[i];
        sink_u64(k, i, ',');
        sink_u64(k, e->time_us, ',');
        sink_str(k, gs_op_name((gs_op)e->op));
        sink_str(k, ",");
        sink_str(k, g_ptr_array_index(t->clients, e->client));
        sink_str(k, ",");
        sink_u64(k, e->device, ',');
        sink_u64(k, streams[e->stream], ',');
        sink_u64(k, names_slot(e) ? t->slot_id[e->slot] : gs_event_is_pool(e) ? e->slot : 0, ',');
        if (!frames) {
            sink_u64(k, e->size, '\n');
        } else {
            sink_u64(k, e->size, ',');
            if (fr < fr_end && fr->ev == i)
                sink_u64(k, (fr++)->frame, '\n');
            else
                sink_str(k, "\n");
        }
        if (k->err_no || k->zerr)
            return;
    }
}

gboolean gs_trace_save(const gs_trace *t, const char *path, GError **err)
{
    g_return_val_if_fail(t != NULL && path != NULL, FALSE);
    gboolean binary = g_str_has_suffix(path, GS_TRACE_BINARY_SUFFIX);
    if (g_str_has_suffix(path, GS_TRACE_BINARY_SUFFIX ".gz")) {
        /* it was written as gzip-compressed text, whatever the name said */
        g_set_error(err, GS_TRACE_ERROR, GS_TRACE_ERROR_FORMAT,
                    "%s: the binary format is read where it lies, never compressed: write "
                    "NAME" GS_TRACE_BINARY_SUFFIX ", or NAME.gstrace.gz for compressed text", path);
        return FALSE;
    }
    if (!check_writable(t, path, err))
        return FALSE;
    if (binary) {
        /* The binary reader takes only what the text reader would make of the same trace. */
        char *why = gs_trace_binary_problem(t);
        if (why) {
            g_set_error(err, GS_TRACE_ERROR, GS_TRACE_ERROR_FORMAT,
                        "%s: cannot be written as a binary trace: %s", path, why);
            g_free(why);
            return FALSE;
        }
    }

    /* util's one writer: a link or a device written in place, a file through a temporary
     * file beside it and a rename */
    gs_output out;
    int fd = gs_output_open(path, &out);
    if (fd < 0) {
        int e = errno;
        g_set_error(err, GS_TRACE_ERROR, GS_TRACE_ERROR_IO, "%s: %s", path, g_strerror(e));
        return FALSE;
    }
    sink *k = g_new0(sink, 1);
    k->f = fdopen(fd, "wb");
    if (!k->f) {
        k->err_no = errno;
        close(fd);
    } else {
        if (binary) {
            k->err_no = gs_trace_binary_write(t, k->f);
        } else {
            if (g_str_has_suffix(path, ".gz")) {
                if (deflateInit2(&k->zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, MAX_WBITS + 16, 8,
                                 Z_DEFAULT_STRATEGY) != Z_OK)
                    g_error("zlib: failed to allocate the deflate state"); /* as g_new would */
                k->gz = TRUE;
            }
            write_trace(k, t);
            sink_flush(k, TRUE);
        }
        if (fclose(k->f) != 0 && !k->err_no)
            k->err_no = errno;
    }
    /* (the descriptor is closed: fclose, or close above) */
    int e = gs_output_commit(path, &out, -1, k->err_no ? k->err_no : k->zerr ? EIO : 0);
    if (!k->err_no && !k->zerr) k->err_no = e;

    gboolean ok = !k->err_no && !k->zerr;
    if (!ok) {
        if (k->zerr)
            g_set_error(err, GS_TRACE_ERROR, GS_TRACE_ERROR_IO, "%s: %s", path, k->zerr);
        else
            g_set_error(err, GS_TRACE_ERROR, GS_TRACE_ERROR_IO, "%s: %s", path,
                        g_strerror(k->err_no));
    }
    if (k->gz)
        deflateEnd(&k->zs);
    g_free(k);
    return ok;
}
