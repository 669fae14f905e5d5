/* rows.c - a trace from the converter's rows (gs_trace_read_rows, trace.h).
 *
 * The converter (traces/gsconvert) holds a snapshot's trace as columns, one array a field, and
 * wrote the binary format from them in Python (traces/gsbin.py, encode_rows): a fifth of a
 * conversion, and of whatif from a snapshot, went there (docs/speed.md). It now hands the columns
 * to `gpusim write-rows` as they are, and this makes the trace encode_rows would have encoded, so
 * that gs_trace_save writes the same bytes. Anything encode_rows would not have encoded this way
 * (allocation ids not numbered 1, 2, ... in order, a device past 32 bits, an op it does not
 * carry) is declined, and the converter encodes it itself, as before.
 *
 * The stream, in the converting machine's byte order (the two ends are one machine):
 *   "GSROWS01"
 *   u32 n, then n bytes: the trace's header text as the converter renders it (the version line
 *       first, the column line last; its "# key: value" lines become the metadata)
 *   u32 n, then n bytes: the client's name
 *   u64 n, then n allocations synthesized before the log: u64 time, size, device, stream; i64 id
 *   u64 n, then the n rows by column: u64 time[n], u8 op[n] (the converter's codes), u64
 *       stream[n], i64 id[n], u64 size[n], u64 device[n]
 * and nothing after.
 */
#include <inttypes.h>
#include <string.h>

#include "trace-int.h"

static const char rows_magic[8] = {'G', 'S', 'R', 'O', 'W', 'S', '0', '1'};
static const char rows_columns[] = "seq,time_us,op,client,device,stream,id,size";

/* The converter's op codes (gsconvert/model.py: alloc, free, free_done, oom, empty_cache, mark)
 * as gs_op. */
static const uint8_t from_converter[] = {GS_OP_ALLOC, GS_OP_FREE,        GS_OP_FREE_DONE,
                                         GS_OP_OOM,   GS_OP_EMPTY_CACHE, GS_OP_MARK};

typedef struct {
    FILE *f;
    char *why; /* the first reason to decline */
} rd;

static gboolean take(rd *r, void *dst, size_t n, const char *what)
{
    if (r->why) return FALSE;
    if (n && fread(dst, 1, n, r->f) != n) {
        r->why = g_strdup_printf("the rows end inside %s", what);
        return FALSE;
    }
    return TRUE;
}

/* n items of size bytes, read into a new array (NULL and r->why when short or too large). The
 * array grows as the bytes come, so a count the stream does not hold costs no more memory than
 * the bytes it does hold. */
static void *take_array(rd *r, uint64_t n, size_t size, const char *what)
{
    if (r->why) return NULL;
    if (n > (SIZE_MAX / 2) / size) {
        r->why = g_strdup_printf("%s: %" PRIu64 " of them", what, n);
        return NULL;
    }
    size_t want = (size_t)n * size, got = 0, cap = MIN(want, (size_t)1 << 20);
    char *p = g_try_malloc(cap + 1);
    while (p && got < want) {
        if (got == cap) {
            cap = MIN(want, 2 * cap);
            char *q = g_try_realloc(p, cap + 1);
            if (!q) break;
            p = q;
        }
        size_t k = fread(p + got, 1, cap - got, r->f);
        if (!k) {
            r->why = g_strdup_printf("the rows end inside %s", what);
            break;
        }
        got += k;
    }
    if (got < want) {
        if (!r->why) r->why = g_strdup_printf("no memory for %s (%" PRIu64 " of them)", what, n);
        g_free(p);
        return NULL;
    }
    return p;
}

/* A u32-length string (NUL-terminated), or NULL; one holding a NUL is declined (the encoder
 * would not take it, and C would read it cut short). */
static char *take_string(rd *r, const char *what)
{
    uint32_t n;
    if (!take(r, &n, sizeof n, what)) return NULL;
    char *s = take_array(r, n, 1, what);
    if (!s) return NULL;
    s[n] = 0;
    if (strlen(s) != n) {
        r->why = g_strdup_printf("a NUL byte in %s", what);
        g_free(s);
        return NULL;
    }
    return s;
}

/* The header's metadata, as gsbin.py's _meta reads it: each line between the version line and
 * the column line that is "# KEY: VALUE" with KEY of [A-Za-z0-9_.-]+, in order; device_total_bytes
 * the last such entry's number (digits only). FALSE and why when the header is not one. */
static gboolean header_meta(gs_trace *t, char *head, char **why)
{
    gchar **lines = g_strsplit(head, "\n", -1);
    guint n = g_strv_length(lines);
    if (n && !*lines[n - 1]) n--; /* the text's last line break */
    for (guint i = 0; i < n; i++) {
        size_t len = strlen(lines[i]);
        if (len && lines[i][len - 1] == '\r') lines[i][len - 1] = 0;
    }
    gboolean ok = n >= 2 && strcmp(lines[n - 1], rows_columns) == 0;
    if (!ok) *why = g_strdup("the header does not end with the column line");
    for (guint i = 1; ok && i + 1 < n; i++) {
        const char *l = lines[i];
        const char *sep = strncmp(l, "# ", 2) == 0 ? strstr(l + 2, ": ") : NULL;
        if (!sep || !gs_trace_valid_name(l + 2, (size_t)(sep - l - 2))) continue; /* a comment */
        gs_trace_meta m = {g_strndup(l + 2, (size_t)(sep - l - 2)), g_strdup(sep + 2)};
        g_array_append_val(t->meta, m);
        if (strcmp(m.key, "device_total_bytes") == 0 &&
            !gs_trace_parse_u64(m.value, strlen(m.value), &t->device_total)) {
            *why = g_strdup_printf("header line %u: device_total_bytes is no number", i + 1);
            ok = FALSE;
        }
    }
    g_strfreev(lines);
    return ok;
}

/* The stream's index of s, made on its first appearance; UINT32_MAX past the limit. */
static uint32_t stream_index(gs_trace *t, GHashTable *ix, uint64_t s)
{
    gpointer v;
    if (g_hash_table_lookup_extended(ix, &s, NULL, &v)) return GPOINTER_TO_UINT(v);
    if (t->streams->len >= GS_TRACE_MAX_STREAMS) return UINT32_MAX;
    uint32_t k = t->streams->len;
    g_array_append_val(t->streams, s);
    g_hash_table_insert(ix, g_memdup2(&s, sizeof s), GUINT_TO_POINTER(k));
    return k;
}

/* The events from the synthesized allocations (pre: n of 5 u64) and the rows' columns. */
static char *fill_events(gs_trace *t, const uint64_t *pre, uint64_t npre, uint64_t nrows,
                         const uint64_t *time, const uint8_t *op, const uint64_t *stream,
                         const int64_t *id, const uint64_t *size, const uint64_t *dev)
{
    uint64_t n = npre + nrows;
    if (n > SIZE_MAX / sizeof(gs_event) || n < npre) return g_strdup("too many rows");
    t->ev = g_try_new0(gs_event, n ? n : 1);
    if (!t->ev) return g_strdup("no memory for the events");
    t->n = t->cap = (size_t)n;
    /* allocations numbered 1, 2, ... as they come (build_trace numbers them so) */
    uint64_t nalloc = npre;
    for (uint64_t k = 0; k < npre; k++)
        if (pre[5 * k + 4] != (uint64_t)(k + 1)) return g_strdup("a synthesized allocation's id");
    for (uint64_t i = 0; i < nrows; i++) {
        if (op[i] >= G_N_ELEMENTS(from_converter)) return g_strdup("an op the binary format lacks");
        if (op[i] == 0 && id[i] != (int64_t)++nalloc)
            return g_strdup("allocations not numbered in order");
    }
    if (nalloc >= UINT32_MAX) return g_strdup("too many allocations");
    uint8_t *done = g_try_malloc0(nalloc + 1); /* done[id]: a free_done of id follows */
    if (!done) return g_strdup("no memory for the allocations");
    for (uint64_t i = 0; i < nrows; i++)
        if (op[i] == 2 && id[i] > 0 && (uint64_t)id[i] <= nalloc) done[id[i]] = 1;
    t->n_slots = (size_t)nalloc;
    t->slot_id = g_new(uint64_t, nalloc + 1);
    for (uint64_t k = 0; k < nalloc; k++) t->slot_id[k] = k + 1;
    GHashTable *ix = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    char *why = NULL;
    for (uint64_t i = 0; i < n && !why; i++) {
        gs_event *e = &t->ev[i];
        uint64_t d, s;
        if (i < npre) {
            const uint64_t *p = &pre[5 * i];
            e->time_us = p[0], e->size = p[1], d = p[2], s = p[3];
            e->op = GS_OP_ALLOC;
            e->slot = (uint32_t)i;
        } else {
            uint64_t j = i - npre;
            e->time_us = time[j], e->size = size[j], d = dev[j], s = stream[j];
            e->op = from_converter[op[j]];
            e->slot = UINT32_MAX;
            if (op[j] <= 2) {
                if (id[j] <= 0 || (uint64_t)id[j] > nalloc) {
                    why = g_strdup("a free of no allocation");
                    break;
                }
                e->slot = (uint32_t)(id[j] - 1);
                if (op[j] == 1 && done[id[j]]) e->flags = GS_EV_DEFERRED;
            }
        }
        e->device = (uint32_t)d;
        e->stream = stream_index(t, ix, s);
        if (d > UINT32_MAX) why = g_strdup("a device past 32 bits");
        else if (e->stream == UINT32_MAX) why = g_strdup("too many streams");
    }
    g_hash_table_unref(ix);
    g_free(done);
    return why;
}

gs_trace *gs_trace_read_rows(FILE *f, char **why)
{
    rd r = {f, NULL};
    gs_trace *t = gs_trace_new();
    char magic[8];
    uint64_t npre = 0, nrows = 0;
    uint64_t *pre = NULL, *time = NULL, *stream = NULL, *size = NULL, *dev = NULL;
    int64_t *id = NULL;
    uint8_t *op = NULL;
    char *head = NULL, *client = NULL;
    if (take(&r, magic, sizeof magic, "the magic") && memcmp(magic, rows_magic, sizeof magic))
        r.why = g_strdup("not the converter's rows (GSROWS01)");
    head = take_string(&r, "the header");
    client = take_string(&r, "the client's name");
    if (take(&r, &npre, sizeof npre, "the synthesized count"))
        pre = take_array(&r, npre, 5 * sizeof *pre, "the synthesized allocations");
    if (take(&r, &nrows, sizeof nrows, "the row count")) {
        time = take_array(&r, nrows, sizeof *time, "the time column");
        op = take_array(&r, nrows, sizeof *op, "the op column");
        stream = take_array(&r, nrows, sizeof *stream, "the stream column");
        id = take_array(&r, nrows, sizeof *id, "the id column");
        size = take_array(&r, nrows, sizeof *size, "the size column");
        dev = take_array(&r, nrows, sizeof *dev, "the device column");
    }
    if (!r.why && fgetc(f) != EOF) r.why = g_strdup("bytes after the last column");
    if (!r.why && !gs_trace_valid_name(client, strlen(client)))
        r.why = g_strdup("the client's name is not one a trace may hold");
    if (!r.why && header_meta(t, head, &r.why)) {
        g_ptr_array_add(t->clients, g_strdup(client));
        r.why = fill_events(t, pre, npre, nrows, time, op, stream, id, size, dev);
    }
    g_free(head), g_free(client), g_free(pre), g_free(time), g_free(op);
    g_free(stream), g_free(id), g_free(size), g_free(dev);
    if (r.why) {
        *why = r.why;
        gs_trace_free(t);
        return NULL;
    }
    return t;
}
