/* binary.c - the binary trace format (docs/trace-format.md, "The binary format"): a trace as
 * it is in memory, so that loading it is a read plus one validating pass, not a parse.
 *
 * The file is a fixed header, the stream values, the allocation ids of the slots, the client
 * names and the header metadata, then the events as 32-byte little-endian records laid out as
 * gs_event is (on a little-endian host they are read straight into the event array). Ids are
 * already resolved to slots and the deferred flag already derived, but nothing in the file is
 * trusted: the validating pass (binary_problem) enforces every rule the text reader does, by
 * what the text reader would have made of the same trace written as text, so that a binary file
 * loads if and only if its text form would, and as the same trace. The writer runs the same
 * pass over the trace it is asked to write, so it never writes a file the reader refuses.
 *
 * A binary trace has no lenient mode: the writer only writes traces that were valid, so a
 * problem in one is damage, not a recording's quirk, and is always an error.
 */
#include "trace-int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The layout below is gs_event's (trace.h); the static asserts pin the offsets the format
 * promises, so a change to gs_event cannot silently change the file format. */
G_STATIC_ASSERT(offsetof(gs_event, time_us) == 0);
G_STATIC_ASSERT(offsetof(gs_event, size) == 8);
G_STATIC_ASSERT(offsetof(gs_event, slot) == 16);
G_STATIC_ASSERT(offsetof(gs_event, stream) == 20);
G_STATIC_ASSERT(offsetof(gs_event, client) == 24);
G_STATIC_ASSERT(offsetof(gs_event, op) == 26);
G_STATIC_ASSERT(offsetof(gs_event, flags) == 27);
G_STATIC_ASSERT(offsetof(gs_event, device) == 28);
G_STATIC_ASSERT(sizeof(gs_event) == GS_TRACE_BINARY_RECORD);

#define HEADER_BYTES 64

const unsigned char gs_trace_binary_magic[8] = {0x89, 'G', 'S', 'B', 'I', 'N', '\r', '\n'};

gboolean gs_trace_is_binary(const char *data, size_t len)
{
    return len >= sizeof gs_trace_binary_magic &&
           memcmp(data, gs_trace_binary_magic, sizeof gs_trace_binary_magic) == 0;
}

/* ---- Little-endian fields ------------------------------------------------------------------- */

static uint64_t get_le(const unsigned char *p, unsigned bytes)
{
    uint64_t v = 0;
    for (unsigned i = bytes; i-- > 0;) v = v << 8 | p[i];
    return v;
}

static void put_le(unsigned char *p, uint64_t v, unsigned bytes)
{
    for (unsigned i = 0; i < bytes; i++, v >>= 8) p[i] = (unsigned char)v;
}

/* Events and the u64 tables are copied as bytes: on a big-endian host they are swapped in
 * place after reading and before writing (a copy). */
#if G_BYTE_ORDER == G_BIG_ENDIAN
static void swap_u64s(uint64_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) v[i] = GUINT64_SWAP_LE_BE(v[i]);
}

static void swap_events(gs_event *e, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        e[i].time_us = GUINT64_SWAP_LE_BE(e[i].time_us);
        e[i].size = GUINT64_SWAP_LE_BE(e[i].size);
        e[i].slot = GUINT32_SWAP_LE_BE(e[i].slot);
        e[i].stream = GUINT32_SWAP_LE_BE(e[i].stream);
        e[i].client = GUINT16_SWAP_LE_BE(e[i].client);
        e[i].device = GUINT32_SWAP_LE_BE(e[i].device);
    }
}
#endif

/* ---- The validating pass -------------------------------------------------------------------- */

/* A slot's state while the events are checked, in the text reader's terms. */
enum { S_LIVE = 1, S_FREED, S_PENDING, S_DONE };

static gboolean names_slot(unsigned op)
{
    return op == GS_OP_ALLOC || op == GS_OP_FREE || op == GS_OP_FREE_DONE;
}

static gint cmp_u64(gconstpointer a, gconstpointer b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The tables: client names valid and distinct, stream values distinct, metadata writable as
 * "# key: value" lines. NULL when they are, else the problem (g_free it). */
static char *tables_problem(const gs_trace *t)
{
    if (t->clients->len > GS_TRACE_MAX_CLIENTS)
        return g_strdup_printf("too many clients: a trace may have at most %u",
                               GS_TRACE_MAX_CLIENTS);
    if (t->streams->len > GS_TRACE_MAX_STREAMS)
        return g_strdup_printf("too many streams: a trace may have at most %u",
                               GS_TRACE_MAX_STREAMS);
    char *why = NULL;
    GHashTable *seen = g_hash_table_new(g_str_hash, g_str_equal);
    for (guint c = 0; c < t->clients->len && !why; c++) {
        const char *name = g_ptr_array_index(t->clients, c);
        if (!gs_trace_valid_name(name, strlen(name)))
            why = g_strdup_printf("bad client name '%s'", name);
        else if (!g_hash_table_add(seen, (gpointer)name))
            why = g_strdup_printf("client '%s' named twice", name);
    }
    g_hash_table_unref(seen);
    if (!why && t->streams->len > 1) {
        uint64_t *s = g_memdup2(t->streams->data, t->streams->len * sizeof(uint64_t));
        qsort(s, t->streams->len, sizeof *s, cmp_u64);
        for (guint i = 1; i < t->streams->len && !why; i++)
            if (s[i] == s[i - 1]) why = g_strdup_printf("stream %" PRIu64 " named twice", s[i]);
        g_free(s);
    }
    for (guint i = 0; i < t->meta->len && !why; i++) {
        const gs_trace_meta *m = &g_array_index(t->meta, gs_trace_meta, i);
        if (!gs_trace_valid_name(m->key, strlen(m->key)))
            why = g_strdup_printf("bad header key '%s'", m->key);
        else if (strpbrk(m->value, "\r\n"))
            why = g_strdup("bad character in header value");
    }
    return why;
}

/* The id rules of the text format on slots: an id may be allocated again only once its slot is
 * freed, and a deferred free's free_done must come before its id is allocated again (the text
 * reader would apply it to the new allocation). When the slots' ids only increase, no id is
 * ever allocated twice and the rules hold by themselves; otherwise a table maps each id to its
 * slot while it is live or pending (keys point into t->slot_id). */
typedef struct {
    GHashTable *live; /* NULL when ids only increase */
} id_check;

static void id_check_init(id_check *c, const gs_trace *t)
{
    c->live = NULL;
    for (size_t s = 1; s < t->n_slots; s++)
        if (t->slot_id[s] <= t->slot_id[s - 1]) {
            c->live = g_hash_table_new(g_int64_hash, g_int64_equal);
            return;
        }
}

#define PREFETCH_AHEAD 192 /* events: 6 KiB */

/* Every event against the slots, clients and streams, in order, counted into the tally y (its
 * devices, at most GS_TRACE_MAX_DEVICES); the event index of a problem in *where. NULL when the
 * events are a trace the text reader would have built, else the problem (g_free it). */
static char *events_problem(const gs_trace *t, size_t *where, struct gs_trace_tally *y)
{
    size_t n_slots = t->n_slots;
    uint8_t *state = g_new0(uint8_t, n_slots ? n_slots : 1);
    uint64_t *size = g_new(uint64_t, n_slots ? n_slots : 1);
    id_check ids;
    id_check_init(&ids, t);
    uint32_t next_slot = 0, next_client = 0, next_stream = 0;
    size_t pending = 0;
    char *why = NULL;
    size_t i;
    for (i = 0; i < t->n && !why; i++) {
        const gs_event *e = &t->ev[i];
        /* This pass is the events' first reader since they were read in: a page and more
         * ahead, so that the walk to the next page's entry is not waited for (the hardware's
         * prefetcher stops at page boundaries). */
        if (G_LIKELY(i + PREFETCH_AHEAD < t->n)) __builtin_prefetch(&t->ev[i + PREFETCH_AHEAD]);
        unsigned op = e->op;
        if (!gs_trace_tally_event(y, e)) {
            why = g_strdup_printf("too many devices: a trace may have at most %u, and device %u "
                                  "would be one more",
                                  GS_TRACE_MAX_DEVICES, e->device);
            break;
        }
        if (op >= GS_OP_COUNT) {
            why = g_strdup_printf("unknown op %u", op);
            break;
        }
        /* Private pool events (text version 3) are not in binary version 1: refused, so a
         * binary file never reads as another trace. */
        if (op >= GS_OP_POOL_BEGIN) {
            why = g_strdup_printf("%s: private pool events (trace version 3) are not carried "
                                  "by the binary format: keep it as text", gs_op_name(op));
            break;
        }
        /* Clients and streams are numbered in order of first appearance, as the text reader
         * numbers them, and each one a table holds is used. */
        if (e->client == next_client) next_client++;
        else if (e->client > next_client) {
            why = g_strdup_printf("client %u before client %u", e->client, next_client);
            break;
        }
        if (e->stream == next_stream) next_stream++;
        else if (e->stream > next_stream) {
            why = g_strdup_printf("stream %u before stream %u", e->stream, next_stream);
            break;
        }
        if (e->flags & ~(op == GS_OP_FREE ? GS_EV_DEFERRED : 0u)) {
            why = g_strdup_printf("flags 0x%x on %s", e->flags, gs_op_name(op));
            break;
        }
        if (!names_slot(op)) {
            if (e->slot != UINT32_MAX) {
                why = g_strdup_printf("slot %u on %s", e->slot, gs_op_name(op));
                break;
            }
            continue;
        }
        uint32_t s = e->slot;
        if (op == GS_OP_ALLOC) {
            if (s != next_slot || s >= n_slots) {
                why = g_strdup_printf("alloc of slot %u, expected slot %u", s, next_slot);
                break;
            }
            next_slot++;
            uint64_t id = t->slot_id[s];
            if (ids.live) {
                gpointer v = g_hash_table_lookup(ids.live, &id);
                uint32_t old = GPOINTER_TO_UINT(v) - 1;
                if (v && state[old] == S_LIVE)
                    why = g_strdup_printf("alloc of live id %" PRIu64 " (slot %u)", id, old);
                else if (v && state[old] == S_PENDING)
                    why = g_strdup_printf("alloc of id %" PRIu64 " before the free_done of its "
                                          "deferred free (slot %u)", id, old);
                else
                    g_hash_table_replace(ids.live, &t->slot_id[s], GUINT_TO_POINTER(s + 1));
                if (why) break;
            }
            state[s] = S_LIVE;
            size[s] = e->size;
            continue;
        }
        if (s >= next_slot) {
            why = g_strdup_printf("%s of slot %u, which is not allocated yet", gs_op_name(op), s);
            break;
        }
        uint64_t id = t->slot_id[s];
        if (op == GS_OP_FREE && state[s] != S_LIVE)
            why = g_strdup_printf("double free of id %" PRIu64, id);
        else if (op == GS_OP_FREE_DONE && state[s] != S_PENDING)
            why = g_strdup_printf("free_done of id %" PRIu64 " without a pending free", id);
        else if (e->size != size[s])
            why = g_strdup_printf("%s of id %" PRIu64 " with size %" PRIu64
                                  ", allocated with size %" PRIu64, gs_op_name(op), id, e->size,
                                  size[s]);
        if (why) break;
        gboolean gone;
        if (op == GS_OP_FREE) {
            gboolean deferred = (e->flags & GS_EV_DEFERRED) != 0;
            state[s] = deferred ? S_PENDING : S_FREED;
            pending += deferred;
            gone = !deferred;
        } else {
            state[s] = S_DONE;
            pending--;
            gone = TRUE;
        }
        if (gone && ids.live) g_hash_table_remove(ids.live, &id);
    }
    if (why) {
        *where = i;
    } else {
        *where = t->n;
        if (next_slot != n_slots)
            why = g_strdup_printf("%zu allocations, but the events allocate %u", n_slots,
                                  next_slot);
        else if (next_client != t->clients->len)
            why = g_strdup_printf("%u clients, but the events name %u", t->clients->len,
                                  next_client);
        else if (next_stream != t->streams->len)
            why = g_strdup_printf("%u streams, but the events name %u", t->streams->len,
                                  next_stream);
        for (size_t s = 0; pending && !why && s < n_slots; s++)
            if (state[s] == S_PENDING)
                why = g_strdup_printf("deferred free of id %" PRIu64 " never completed",
                                      t->slot_id[s]);
    }
    if (ids.live) g_hash_table_unref(ids.live);
    g_free(state);
    g_free(size);
    return why;
}

/* ---- The reader ----------------------------------------------------------------------------- */

/* The input: a first piece already in memory, then, if fd >= 0, the rest of the file. */
typedef struct {
    const char *name;
    GError **err;
    int fd;
    const char *buf;
    size_t len, pos;
    uint64_t off;    /* bytes consumed */
    bool sized;      /* the input's size is known and the header's counts were checked against
                      * it; not for a pipe (read_alloc) */
} src;

static void bin_fail(src *in, uint64_t off, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static void bin_fail(src *in, uint64_t off, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    char *full = g_strdup_printf("%s: byte %" PRIu64 ": %s", in->name, off, msg);
    char *p = gs_printable(full);
    g_set_error_literal(in->err, GS_TRACE_ERROR, GS_TRACE_ERROR_FORMAT, p);
    g_free(p);
    g_free(full);
    g_free(msg);
}

/* One read(2) of the file, retried on EINTR: the bytes read, 0 at its end, -1 with the error
 * set. */
static ssize_t fd_read(src *in, void *dst, size_t n)
{
    for (;;) {
        ssize_t r = read(in->fd, dst, n);
        if (r >= 0 || errno != EINTR) {
            if (r < 0) {
                int e = errno;
                g_set_error(in->err, GS_TRACE_ERROR, GS_TRACE_ERROR_IO, "%s: %s", in->name,
                            g_strerror(e));
            }
            return r;
        }
    }
}

/* Reads exactly n bytes into dst; FALSE (the error set) on an I/O error or the end of input. */
static gboolean src_read(src *in, void *dst, size_t n, const char *what)
{
    char *d = dst;
    size_t have = MIN(n, in->len - in->pos);
    memcpy(d, in->buf + in->pos, have);
    in->pos += have;
    size_t got = have;
    while (got < n && in->fd >= 0) {
        ssize_t r = fd_read(in, d + got, n - got);
        if (r < 0) return FALSE;
        if (r == 0) break;
        got += (size_t)r;
    }
    if (got < n) {
        bin_fail(in, in->off + got, "truncated binary trace: the file ends in the %s", what);
        return FALSE;
    }
    in->off += n;
    return TRUE;
}

/* n bytes of the input in a new buffer of n + extra bytes (g_free it), or NULL after bin_fail.
 * Where the input's size is unknown (a pipe), nothing has checked the header's counts: the
 * buffer then grows as the bytes arrive (doubling from GROW_FIRST), so a damaged count costs
 * no more memory than the input holds and ends as a truncated trace, not as an allocation of
 * terabytes. n + extra fits a size_t (read_binary bounds every count). */
#define GROW_FIRST (UINT64_C(1) << 20)
static void *read_alloc(src *in, uint64_t n, size_t extra, const char *what)
{
    if (in->sized || n <= GROW_FIRST) {
        /* (a file the host has not the memory for is an error, not an abort in g_malloc) */
        char *b = g_try_malloc(MAX((size_t)n + extra, 1));
        if (!b) {
            bin_fail(in, in->off, "out of host memory for the %s (%" PRIu64 " bytes)", what,
                     n + extra);
            return NULL;
        }
        if (!src_read(in, b, (size_t)n, what)) {
            g_free(b);
            return NULL;
        }
        return b;
    }
    uint64_t cap = GROW_FIRST, got = 0;
    char *b = g_malloc((size_t)cap);
    while (got < n) {
        if (got == cap) {
            cap = MIN(n, 2 * cap);
            char *more = g_try_realloc(b, (size_t)cap);
            if (!more) {
                g_free(b);
                bin_fail(in, in->off, "out of host memory for the %s (%" PRIu64 " bytes)", what,
                         cap);
                return NULL;
            }
            b = more;
        }
        if (!src_read(in, b + got, (size_t)(cap - got), what)) {
            g_free(b);
            return NULL;
        }
        got = cap;
    }
    return g_realloc(b, MAX((size_t)n + extra, 1));
}

/* The events of a file are read into memory of the trace's own, as every other part of it is,
 * never used where the file lies mapped: a mapping reads the file again at every use, so a file
 * written over in place after the checking pass handed the replay events nothing had checked (a
 * slot index out of range: SIGSEGV in the replay's prefetch), and one truncated meanwhile (a
 * copy over it) took its pages away (SIGBUS; a private mapping's pages copied on write go too,
 * as POSIX wants them to). Reading costs a fault for each page of fresh memory, which on the VM
 * of BENCHMARKS.md doubled a whole run's CPU time with 4 KiB pages; in 2 MiB pages, where the
 * kernel gives them (MADV_HUGEPAGE), a run costs what it did mapped, within the noise
 * (BENCHMARKS.md, "Binary events read, not mapped"). The memory is an anonymous mapping aligned
 * to 2 MiB, owned by the trace (t->map); events under 2 MiB go to g_malloc'd memory, as does
 * everything when no mapping can be had (NULL). */
#define HUGE_PAGE ((size_t)2 << 20)
static gs_event *events_memory(size_t bytes, void **map, size_t *map_len)
{
    size_t len = (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    char *m =
        mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    size_t head = (HUGE_PAGE - (uintptr_t)m % HUGE_PAGE) % HUGE_PAGE;
    if (head) munmap(m, head);
    munmap(m + head + len, HUGE_PAGE - head);
    m += head;
#ifdef MADV_HUGEPAGE
    (void)madvise(m, len, MADV_HUGEPAGE);
#endif
    *map = m;
    *map_len = len;
    return (gs_event *)(void *)m;
}

/* Nothing may follow the events. */
static gboolean src_at_end(src *in)
{
    char c;
    gboolean more = in->pos < in->len;
    if (!more && in->fd >= 0) {
        ssize_t r = fd_read(in, &c, 1);
        if (r < 0) return FALSE;
        more = r > 0;
    }
    if (more) bin_fail(in, in->off, "bytes after the last event");
    return !more;
}

static size_t pad8(size_t n)
{
    return (8 - n % 8) % 8;
}

/* A string of the strings section: u32 length, then the bytes. */
static char *read_string(src *in, uint64_t *left, const char *what)
{
    unsigned char lb[4];
    if (*left < 4) {
        bin_fail(in, in->off, "the strings section ends in a %s", what);
        return NULL;
    }
    if (!src_read(in, lb, 4, "strings section")) return NULL;
    uint64_t len = get_le(lb, 4);
    *left -= 4;
    if (len > *left) {
        bin_fail(in, in->off - 4, "%s of %" PRIu64 " bytes past the strings section", what, len);
        return NULL;
    }
    char *s = read_alloc(in, len, 1, "strings section");
    if (!s) return NULL;
    s[len] = '\0';
    *left -= len;
    if (memchr(s, '\0', len)) {
        bin_fail(in, in->off - len, "NUL byte in a %s", what);
        g_free(s);
        return NULL;
    }
    return s;
}

/* A header entry, as the text reader takes a "# key: value" line (read.c's header_comment). */
static gboolean add_meta(src *in, gs_trace *t, char *key, char *value, uint64_t at)
{
    gs_trace_meta m = {key, value};
    g_array_append_val(t->meta, m);
    if (!gs_trace_valid_name(key, strlen(key))) {
        bin_fail(in, at, "bad header key '%s'", key);
        return FALSE;
    }
    if (strpbrk(value, "\r\n")) {
        bin_fail(in, at, "bad character in header value");
        return FALSE;
    }
    if (strcmp(key, "device_total_bytes") == 0) {
        if (!gs_trace_parse_u64(value, strlen(value), &t->device_total)) {
            bin_fail(in, at, "bad number in header 'device_total_bytes': '%.40s'", value);
            return FALSE;
        }
        if (t->device_total > GS_MAX_DEVICE_BYTES) {
            bin_fail(in, at, "header 'device_total_bytes': %" PRIu64
                             " is more than gpusim simulates (16 TiB)", t->device_total);
            return FALSE;
        }
    }
    return TRUE;
}

static gs_trace *read_binary(src *in, uint64_t file_size)
{
    in->sized = file_size != UINT64_MAX;
    unsigned char h[HEADER_BYTES];
    if (!src_read(in, h, sizeof h, "header")) return NULL;
    if (!gs_trace_is_binary((const char *)h, sizeof h)) { /* (the caller has checked it) */
        bin_fail(in, 0, "not a binary gpusim trace");
        return NULL;
    }
    uint64_t version = get_le(h + 8, 4), header_bytes = get_le(h + 12, 4);
    uint64_t n_events = get_le(h + 16, 8), n_slots = get_le(h + 24, 8);
    uint64_t n_clients = get_le(h + 32, 4), n_streams = get_le(h + 36, 4);
    uint64_t n_meta = get_le(h + 40, 4), record = get_le(h + 44, 4);
    uint64_t strings = get_le(h + 48, 8), reserved = get_le(h + 56, 8);
    if (version != GS_TRACE_BINARY_VERSION) {
        bin_fail(in, 8, "unsupported binary trace version %" PRIu64, version);
        return NULL;
    }
    if (header_bytes != HEADER_BYTES || record != GS_TRACE_BINARY_RECORD || reserved != 0) {
        bin_fail(in, 12, "bad binary header (header size %" PRIu64 ", record size %" PRIu64
                         ", reserved %" PRIu64 ")", header_bytes, record, reserved);
        return NULL;
    }
    if (n_clients > GS_TRACE_MAX_CLIENTS) {
        bin_fail(in, 32, "too many clients: a trace may have at most %u, this one says %" PRIu64,
                 GS_TRACE_MAX_CLIENTS, n_clients);
        return NULL;
    }
    if (n_streams > GS_TRACE_MAX_STREAMS) {
        bin_fail(in, 36, "too many streams: a trace may have at most %u, this one says %" PRIu64,
                 GS_TRACE_MAX_STREAMS, n_streams);
        return NULL;
    }
    if (n_slots > UINT32_MAX - 1 || n_slots > n_events) {
        bin_fail(in, 24, "too many allocations: %" PRIu64 " (of %" PRIu64 " events)", n_slots,
                 n_events);
        return NULL;
    }
    /* The size the counts imply, checked against the file before anything is allocated for
     * them (a damaged count must not ask for terabytes). Every term is bounded above, so the
     * sum cannot overflow once n_events is. */
    if (n_events > (UINT64_MAX / 2) / GS_TRACE_BINARY_RECORD || strings > UINT64_MAX / 4) {
        bin_fail(in, 16, "impossible counts in the header");
        return NULL;
    }
    uint64_t expect = HEADER_BYTES + 8 * n_streams + 8 * n_slots + strings + pad8(strings) +
                      GS_TRACE_BINARY_RECORD * n_events;
    if (file_size != UINT64_MAX && expect != file_size) {
        bin_fail(in, 16, "the header's counts make %" PRIu64 " bytes, the file has %" PRIu64,
                 expect, file_size);
        return NULL;
    }
    if (expect > SIZE_MAX / 2) {
        bin_fail(in, 16, "impossible counts in the header");
        return NULL;
    }

    gs_trace *t = gs_trace_new();
    t->path = g_strdup(in->name);
    gboolean ok = TRUE;
    if (n_streams) {
        g_array_set_size(t->streams, (guint)n_streams);
        ok = src_read(in, t->streams->data, 8 * n_streams, "stream table");
    }
    t->n_slots = n_slots;
    if (ok) {
        t->slot_id = read_alloc(in, 8 * n_slots, 0, "id table");
        ok = t->slot_id != NULL;
    }
#if G_BYTE_ORDER == G_BIG_ENDIAN
    if (ok) {
        swap_u64s((uint64_t *)(void *)t->streams->data, t->streams->len);
        swap_u64s(t->slot_id, n_slots);
    }
#endif
    uint64_t left = strings, start = in->off;
    for (uint64_t c = 0; ok && c < n_clients; c++) {
        uint64_t at = in->off;
        char *name = read_string(in, &left, "client name");
        ok = name != NULL;
        if (ok) g_ptr_array_add(t->clients, name);
        if (ok && !gs_trace_valid_name(name, strlen(name))) {
            bin_fail(in, at, "bad client name '%.40s'", name);
            ok = FALSE;
        }
    }
    for (uint64_t m = 0; ok && m < n_meta; m++) {
        uint64_t at = in->off;
        char *key = read_string(in, &left, "header key");
        char *value = key ? read_string(in, &left, "header value") : NULL;
        if (!value) {
            g_free(key);
            ok = FALSE;
        } else {
            ok = add_meta(in, t, key, value, at);
        }
    }
    if (ok && left) {
        bin_fail(in, in->off, "%" PRIu64 " bytes left in the strings section", left);
        ok = FALSE;
    }
    unsigned char pad[8] = {0};
    if (ok && (ok = src_read(in, pad, pad8(strings), "strings section")) &&
        get_le(pad, 8) != 0) {
        bin_fail(in, start + strings, "padding after the strings section is not zero");
        ok = FALSE;
    }
    if (ok) {
        size_t bytes = (size_t)(GS_TRACE_BINARY_RECORD * n_events);
        if (in->fd >= 0 && in->sized && bytes >= HUGE_PAGE &&
            (t->ev = events_memory(bytes, &t->map, &t->map_len)))
            ok = src_read(in, t->ev, bytes, "events"); /* (gs_trace_free unmaps it) */
        else ok = (t->ev = read_alloc(in, bytes, 0, "events")) != NULL;
        if (ok) t->n = t->cap = n_events;
#if G_BYTE_ORDER == G_BIG_ENDIAN
        if (ok) swap_events(t->ev, n_events);
#endif
    }
    ok = ok && src_at_end(in);
    if (ok) {
        uint64_t events_at = in->off - GS_TRACE_BINARY_RECORD * n_events;
        char *why = tables_problem(t);
        size_t where = 0;
        if (why) {
            bin_fail(in, start, "%s", why);
        } else if ((why = events_problem(t, &where, (t->tally = gs_trace_tally_new())))) {
            if (where < t->n)
                bin_fail(in, events_at + GS_TRACE_BINARY_RECORD * where, "event %zu: %s", where,
                         why);
            else
                bin_fail(in, 16, "%s", why);
        } else {
            const char *hp = gs_trace_header_problem(t);
            if (hp) bin_fail(in, start, "%s", hp);
            ok = hp == NULL;
        }
        if (why) ok = FALSE;
        g_free(why);
    }
    if (!ok) {
        gs_trace_free(t);
        return NULL;
    }
    return t;
}

gs_trace *gs_trace_binary_read(const char *name, int fd, const char *first, size_t first_len,
                               GError **err)
{
    uint64_t size = first_len;
    if (fd >= 0) {
        /* A regular file's size is known: the header's counts are checked against it first. */
        struct stat st;
        off_t at = lseek(fd, 0, SEEK_CUR);
        size = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && at >= 0
                   ? (uint64_t)st.st_size - (uint64_t)at + first_len
                   : UINT64_MAX;
    }
    src in = {.name = name, .err = err, .fd = fd, .buf = first, .len = first_len};
    return read_binary(&in, size);
}

/* ---- The writer ----------------------------------------------------------------------------- */

/* The header entries as the text writer writes them (write.c): device_total_bytes holds
 * t->device_total, in its entry's place or after the others. */
static GPtrArray *meta_as_written(const gs_trace *t)
{
    GPtrArray *kv = g_ptr_array_new_with_free_func(g_free);
    gboolean wrote_total = FALSE;
    for (guint i = 0; i < t->meta->len; i++) {
        const gs_trace_meta *m = &g_array_index(t->meta, gs_trace_meta, i);
        g_ptr_array_add(kv, g_strdup(m->key));
        if (strcmp(m->key, "device_total_bytes") == 0) {
            g_ptr_array_add(kv, g_strdup_printf("%" PRIu64, t->device_total));
            wrote_total = TRUE;
        } else {
            g_ptr_array_add(kv, g_strdup(m->value));
        }
    }
    if (!wrote_total && t->device_total) {
        g_ptr_array_add(kv, g_strdup("device_total_bytes"));
        g_ptr_array_add(kv, g_strdup_printf("%" PRIu64, t->device_total));
    }
    return kv;
}

char *gs_trace_binary_problem(const gs_trace *t)
{
    /* Frames are for reports, on traces small enough to keep as text; the binary format is
     * for traces large enough that parsing shows, and does not carry them (trace-format.md). */
    if (t->frames && t->frames->len)
        return g_strdup("it has frames ('# frame N:' lines), which the binary format does not "
                        "carry: keep it as text");
    /* what both readers check of the header once the events are in */
    const char *hp = gs_trace_header_problem(t);
    if (hp) return g_strdup(hp);
    char *why = tables_problem(t);
    size_t where;
    struct gs_trace_tally *y = gs_trace_tally_new(); /* (its devices: the reader's limit) */
    if (!why && (why = events_problem(t, &where, y)) && where < t->n) {
        char *w = g_strdup_printf("event %zu: %s", where, why);
        g_free(why);
        why = w;
    }
    gs_trace_tally_free(y);
    return why;
}

static void put_string(GByteArray *b, const char *s)
{
    unsigned char lb[4];
    size_t len = strlen(s);
    put_le(lb, len, 4);
    g_byte_array_append(b, lb, 4);
    g_byte_array_append(b, (const guint8 *)s, (guint)len);
}

/* n items of size bytes from p, all written; nothing to write is no call (an empty array's
 * data is NULL, which fwrite must not get: UBSan in fuzz_binary's corpus replay). */
static gboolean put_all(FILE *f, const void *p, size_t size, size_t n)
{
    return n == 0 || fwrite(p, size, n, f) == n;
}

int gs_trace_binary_write(const gs_trace *t, FILE *f)
{
    GPtrArray *kv = meta_as_written(t);
    GByteArray *strs = g_byte_array_new();
    for (guint c = 0; c < t->clients->len; c++) put_string(strs, g_ptr_array_index(t->clients, c));
    for (guint i = 0; i < kv->len; i++) put_string(strs, g_ptr_array_index(kv, i));
    size_t strings = strs->len;
    static const unsigned char zero[8] = {0};
    g_byte_array_append(strs, zero, (guint)pad8(strings));

    unsigned char h[HEADER_BYTES] = {0};
    memcpy(h, gs_trace_binary_magic, sizeof gs_trace_binary_magic);
    put_le(h + 8, GS_TRACE_BINARY_VERSION, 4);
    put_le(h + 12, HEADER_BYTES, 4);
    put_le(h + 16, t->n, 8);
    put_le(h + 24, t->n_slots, 8);
    put_le(h + 32, t->clients->len, 4);
    put_le(h + 36, t->streams->len, 4);
    put_le(h + 40, kv->len / 2, 4);
    put_le(h + 44, GS_TRACE_BINARY_RECORD, 4);
    put_le(h + 48, strings, 8);

    gboolean ok = fwrite(h, 1, sizeof h, f) == sizeof h;
#if G_BYTE_ORDER == G_BIG_ENDIAN
    uint64_t *st = g_memdup2(t->streams->data, t->streams->len * 8u + 1);
    uint64_t *ids = g_memdup2(t->slot_id, t->n_slots * 8u + 1);
    swap_u64s(st, t->streams->len);
    swap_u64s(ids, t->n_slots);
    ok = ok && put_all(f, st, 8, t->streams->len);
    ok = ok && put_all(f, ids, 8, t->n_slots);
    g_free(st);
    g_free(ids);
#else
    ok = ok && put_all(f, t->streams->data, 8, t->streams->len);
    ok = ok && put_all(f, t->slot_id, 8, t->n_slots);
#endif
    ok = ok && put_all(f, strs->data, 1, strs->len);
#if G_BYTE_ORDER == G_BIG_ENDIAN
    for (size_t i = 0; ok && i < t->n; i += 4096) {
        size_t m = MIN(t->n - i, 4096);
        gs_event *c = g_memdup2(t->ev + i, m * sizeof *c);
        swap_events(c, m);
        ok = fwrite(c, sizeof *c, m, f) == m;
        g_free(c);
    }
#else
    ok = ok && put_all(f, t->ev, sizeof *t->ev, t->n);
#endif
    g_byte_array_unref(strs);
    g_ptr_array_unref(kv);
    return ok ? 0 : (errno ? errno : EIO);
}
