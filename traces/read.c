/* read.c - the trace reader: a trace file (text or gzip) into a gs_trace, in one pass.
 *
 * Allocation ids become slots, clients and streams become small indices, and each free that a
 * later free_done completes gets GS_EV_DEFERRED. Traces reach tens of millions of lines, so the
 * file is read (or inflated) in chunks rather than held whole, event lines are parsed by hand
 * with no allocation per line, and ids are resolved through an open-addressing table in
 * batches that prefetch their entries. Anything unusual drops to a slow path that only has to
 * explain what is wrong, with the file and line.
 */
#include "trace-int.h"

#include <zlib.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- The id table -------------------------------------------------------------------------- */

/* Open addressing with linear probing, from a 64-bit key (an allocation id, or a raw stream
 * value) to a 32-bit value. Deletion shifts the following entries back instead of leaving
 * tombstones, so a long trace that recycles ids never degrades the table. */
typedef struct {
    uint64_t key;
    uint32_t val1; /* value + 1; 0 marks an empty entry */
    uint32_t pad;
} kv_entry;

typedef struct {
    kv_entry *e;
    size_t mask;
    unsigned shift;
    size_t n;
} kv_table;

static inline size_t kv_home(const kv_table *h, uint64_t key)
{
    /* Fibonacci hashing: sequential ids spread over the whole table. */
    return (size_t)((key * UINT64_C(0x9E3779B97F4A7C15)) >> h->shift);
}

/* Every lookup in a table of millions of ids lands on a random page, and with 4 KiB pages
 * most of them also miss the TLB; a large table therefore asks for transparent huge pages.
 * (Where the kernel does not give them, this is an ordinary zeroed allocation.) */
#define HUGE_PAGE ((size_t)2 << 20)

static kv_entry *kv_alloc(size_t n)
{
    size_t bytes = n * sizeof(kv_entry);
    void *mem = NULL;
#ifdef MADV_HUGEPAGE
    if (bytes >= 2 * HUGE_PAGE && posix_memalign(&mem, HUGE_PAGE, bytes) == 0) {
        madvise(mem, bytes, MADV_HUGEPAGE);
        memset(mem, 0, bytes);
        return mem;
    }
#endif
    mem = calloc(n, sizeof(kv_entry));
    if (!mem) g_error("failed to allocate %zu bytes", bytes); /* as g_new0 would, in its words */
    return mem;
}

static void kv_init(kv_table *h, unsigned bits)
{
    h->e = kv_alloc((size_t)1 << bits);
    h->mask = ((size_t)1 << bits) - 1;
    h->shift = 64 - bits;
    h->n = 0;
}

static void kv_destroy(kv_table *h)
{
    free(h->e);
    h->e = NULL;
}

static inline kv_entry *kv_find(const kv_table *h, uint64_t key)
{
    for (size_t i = kv_home(h, key);; i = (i + 1) & h->mask) {
        kv_entry *x = &h->e[i];
        if (x->val1 == 0)
            return NULL;
        if (x->key == key)
            return x;
    }
}

static void kv_insert(kv_table *h, uint64_t key, uint32_t val);

static void kv_grow(kv_table *h)
{
    kv_table old = *h;
    kv_init(h, 64 - old.shift + 1);
    for (size_t i = 0; i <= old.mask; i++)
        if (old.e[i].val1)
            kv_insert(h, old.e[i].key, old.e[i].val1 - 1);
    kv_destroy(&old);
}

/* The key must not be present. */
static void kv_insert(kv_table *h, uint64_t key, uint32_t val)
{
    if (2 * (h->n + 1) > h->mask + 1)
        kv_grow(h);
    size_t i = kv_home(h, key);
    while (h->e[i].val1)
        i = (i + 1) & h->mask;
    h->e[i].key = key;
    h->e[i].val1 = val + 1;
    h->n++;
}

static void kv_remove(kv_table *h, kv_entry *x)
{
    size_t i = (size_t)(x - h->e);
    for (size_t j = (i + 1) & h->mask; h->e[j].val1; j = (j + 1) & h->mask) {
        size_t k = kv_home(h, h->e[j].key);
        /* The entry at j may move into the hole at i only if its home is not cyclically
         * within (i, j]; otherwise lookups starting at its home would no longer reach it. */
        gboolean stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            h->e[i] = h->e[j];
            i = j;
        }
    }
    h->e[i].val1 = 0;
    h->n--;
}

/* ---- The parser ---------------------------------------------------------------------------- */

#if defined(__GNUC__)
#define GS_HOT_INLINE inline __attribute__((always_inline))
#define GS_PREFETCH(addr) __builtin_prefetch(addr)
#else
#define GS_HOT_INLINE inline
#define GS_PREFETCH(addr) ((void)(addr))
#endif

/* What the parser remembers about each slot until the end of the file: its size and whether
 * it is freed, 9 bytes, since a trace has about one slot per two events and the reader's peak
 * memory is what it keeps per event (BENCHMARKS.md, "End to end"). The line numbers that
 * messages give are found from event indices (line_of) and, on an error, by a walk back over
 * the events, not kept per slot; which frees are deferred is settled at the end, in one pass
 * (mark_deferred), not by remembering where each free is. */
typedef struct {
    uint64_t size;
} slot_info;

/* Where the line numbers of the appended events stop being event index + a constant (a
 * comment, a blank line or a dropped event among the events): from event ev on, line =
 * ev + delta. Rare, so kept as a list of the changes. */
typedef struct {
    size_t ev;
    size_t delta;
} line_step;

/* One event line, syntax checked but not yet applied. */
typedef struct {
    const char *client;
    size_t client_len;
    uint64_t seq, time_us, device, stream, id, size;
    uint64_t frame; /* 0: none (an empty field, or no frame column) */
    int client_ix;  /* the client's index when fast_event knew it, else -1 */
    size_t line;
    int op;
} event_rec;

/* Event lines are parsed in batches: parsing a batch prefetches each id's table entry, and
 * applying it afterwards finds them in cache. Once a trace has millions of distinct ids the
 * table outgrows the cache, and these misses would otherwise dominate the reader's time. */
#define BATCH 32

/* A client name the next line's client field is compared with first (the last line's): its
 * bytes and, where it is shorter than 8, the same followed by its comma as a word and the mask
 * of those bytes, for one comparison of 8 bytes. len 0: none yet. */
typedef struct {
    const char *name; /* owned by the trace's clients */
    size_t len;
    uint64_t word, mask;
    uint16_t ix;
} client_hint;

static void hint_set(client_hint *h, const char *name, size_t len, uint16_t ix)
{
    h->name = name;
    h->len = len;
    h->ix = ix;
    h->word = h->mask = 0;
    if (len < 8) {
        unsigned char b[8] = {0};
        memcpy(b, name, len);
        b[len] = ',';
        for (size_t i = 0; i <= len; i++) {
            h->word |= (uint64_t)b[i] << (8 * i);
            h->mask |= (uint64_t)0xff << (8 * i);
        }
    }
}

/* Whether the field at q is h's name and its comma. */
static GS_HOT_INLINE gboolean hint_matches(const client_hint *h, const char *q, const char *end)
{
    if (!h->len || (size_t)(end - q) <= h->len)
        return FALSE;
#if G_BYTE_ORDER == G_LITTLE_ENDIAN
    if (h->len < 8 && end - q >= 8) {
        uint64_t x;
        memcpy(&x, q, 8);
        return (x & h->mask) == h->word;
    }
#endif
    return memcmp(q, h->name, h->len) == 0 && q[h->len] == ',';
}

/* A few clients, checked by length and bytes before the hash table: traces name one to a
 * handful of clients, often alternating line by line. */
#define QUICK_CLIENTS 8

typedef struct {
    const char *name;
    unsigned flags;
    gs_trace_warn_fn warn;
    void *ud;
    GError **err;
    gs_trace *t;
    size_t line;

    slot_info *si;   /* per slot, same capacity as t->slot_id */
    uint8_t *freed;  /* per slot: 0 live, 1 freed (its id may still get a free_done) */
    size_t n_free_done; /* free_done events kept */
    size_t slot_cap;
    /* Live (or freed, maybe pending) id -> slot + 1. While every id is below direct_limit
     * (ids are usually counted up from 1), an array indexed by id: 4 bytes an id, where the
     * hash table takes 32 to 64 (16-byte entries, at most half full); the first larger id
     * moves them all into the table (ids_kv) for good. */
    uint32_t *direct;
    size_t direct_cap;
    uint64_t direct_limit;
    gboolean ids_kv;
    kv_table ids;
    GArray *lines;    /* line_step, in order of ev */
    size_t line_delta; /* of the last step (0: none yet) */
    kv_table streams; /* raw stream -> index */
    GHashTable *client_ix; /* name (owned by t->clients) -> index + 1 */
    GString *keybuf;       /* reusable NUL-terminated copy of a client field for lookups */
    struct {
        const char *name;
        size_t len;
    } quick[QUICK_CLIENTS]; /* clients 0..QUICK_CLIENTS-1 */

    client_hint hint; /* the last event's client, for fast_event */

    /* Consecutive lines usually share their stream. */
    uint64_t last_stream;
    uint32_t last_stream_ix;
    gboolean have_stream;

    enum { WANT_MAGIC, WANT_COLUMNS, EVENTS } state;
    uint64_t seq; /* expected seq of the next event line */
    unsigned version; /* of the magic line: 1 or 2 (oom events) */
    gboolean frame_col; /* the column line has the 9th column, frame */
} parser;

/* What becomes of an event line once its id is resolved. */
typedef enum {
    EV_APPEND, /* appended to the trace */
    EV_DROP,   /* lenient mode: a semantic problem, counted and warned about; the line is skipped */
    EV_STOP,   /* a fatal error, set in p->err */
} ev_fate;

/* Reports a problem with the line being read as "FILE:LINE: message": as the error
 * (GS_TRACE_ERROR_FORMAT), or, with as_warning, as a counted lenient-mode warning. */
static void report(parser *p, gboolean as_warning, const char *fmt, va_list ap)
    G_GNUC_PRINTF(3, 0);
static void report(parser *p, gboolean as_warning, const char *fmt, va_list ap)
{
    char *full = gs_located_vprintf(p->name, p->line, fmt, ap);
    if (as_warning) {
        p->t->n_warnings++;
        if (p->warn)
            p->warn(full, p->ud);
    } else {
        g_set_error_literal(p->err, GS_TRACE_ERROR, GS_TRACE_ERROR_FORMAT, full);
    }
    g_free(full);
}

/* An error the reader cannot go past (syntax, limits): fatal in lenient mode too. */
static void fail(parser *p, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void fail(parser *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report(p, FALSE, fmt, ap);
    va_end(ap);
}

/* A semantic problem: fatal normally (EV_STOP); in lenient mode a counted warning (EV_DROP:
 * the line is skipped, unless the caller keeps it anyway). */
static ev_fate problem(parser *p, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static ev_fate problem(parser *p, const char *fmt, ...)
{
    gboolean lenient = (p->flags & GS_TRACE_LENIENT) != 0;
    va_list ap;
    va_start(ap, fmt);
    report(p, lenient, fmt, ap);
    va_end(ap);
    return lenient ? EV_DROP : EV_STOP;
}

/* A field quoted for a message: at most 40 bytes, non-printable bytes escaped, so a binary
 * file gives a readable error. */
static char *quote(const char *s, size_t len)
{
    GString *g = g_string_new("'");
    size_t n = len > 40 ? 40 : len;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\')
            g_string_append_c(g, (char)c);
        else
            g_string_append_printf(g, "\\x%02x", c);
    }
    g_string_append(g, len > n ? "...'" : "'");
    return g_string_free(g, FALSE);
}

static GS_HOT_INLINE int op_from(const char *s, size_t len)
{
    switch (len) {
    case 3:
        return memcmp(s, "oom", 3) == 0 ? GS_OP_OOM : -1;
    case 8:
        return memcmp(s, "pool_end", 8) == 0 ? GS_OP_POOL_END : -1;
    case 10:
        return memcmp(s, "pool_begin", 10) == 0 ? GS_OP_POOL_BEGIN : -1;
    case 12:
        return memcmp(s, "pool_release", 12) == 0 ? GS_OP_POOL_RELEASE : -1;
    case 4:
        if (memcmp(s, "free", 4) == 0)
            return GS_OP_FREE;
        if (memcmp(s, "mark", 4) == 0)
            return GS_OP_MARK;
        return -1;
    case 5:
        return memcmp(s, "alloc", 5) == 0 ? GS_OP_ALLOC : -1;
    case 9:
        return memcmp(s, "free_done", 9) == 0 ? GS_OP_FREE_DONE : -1;
    case 11:
        return memcmp(s, "empty_cache", 11) == 0 ? GS_OP_EMPTY_CACHE : -1;
    default:
        return -1;
    }
}

/* The fast path reads digits up to the first non-digit. It only ever runs before the file's
 * last '\n', which is neither a digit, a name character nor a comma, so scanning needs no
 * bounds checks. Returns NULL on no digits or overflow. */
static GS_HOT_INLINE const char *scan_u64(const char *q, uint64_t *out)
{
    const char *q0 = q;
    uint64_t v = 0;
    for (;;) {
        unsigned d = (unsigned char)*q - '0';
        if (d > 9)
            break;
        /* UINT64_MAX = 1844674407370955161 * 10 + 5 */
        if (G_UNLIKELY(v >= UINT64_C(1844674407370955161)) &&
            (v > UINT64_C(1844674407370955161) || d > 5))
            return NULL;
        v = v * 10 + d;
        q++;
    }
    if (q == q0)
        return NULL;
    *out = v;
    return q;
}

/* Eight bytes at a time (little-endian hosts), where eight are there to read: a number's
 * digits found and combined in a few word operations instead of a loop per byte, and the
 * common op fields compared whole. Parsing took most of a text trace's load (BENCHMARKS.md,
 * "End to end"). Each shortcut accepts exactly what the byte loops would, and hands anything
 * else to them. */
#if G_BYTE_ORDER == G_LITTLE_ENDIAN && defined(__GNUC__)
#define GS_SWAR 1

static GS_HOT_INLINE uint64_t load8(const char *q)
{
    uint64_t x;
    memcpy(&x, q, 8);
    return x;
}

/* The digits at the start of the 8 bytes x (first byte lowest): their number (0 to 8), and
 * their value in *val. A byte is a digit when it minus '0' is at most 9: subtracted from every
 * byte at once, a non-digit byte gets its top bit set in v (below '0', through the borrow) or in
 * v + 0x76 (above '9'); borrows and carries only run from a byte to the next, so the bytes
 * before the first non-digit, all digits, are exact. */
static GS_HOT_INLINE unsigned digits8(uint64_t x, uint64_t *val)
{
    uint64_t v = x - UINT64_C(0x3030303030303030);
    uint64_t nd = (v | (v + UINT64_C(0x7676767676767676))) & UINT64_C(0x8080808080808080);
    unsigned len = nd ? (unsigned)__builtin_ctzll(nd) >> 3 : 8;
    if (len == 0)
        return 0;
    v <<= 8 * (8 - len); /* the digits to the top bytes, zeros (leading zeros) below */
    v = (v * 10 + (v >> 8)) & UINT64_C(0x00FF00FF00FF00FF);      /* pairs */
    v = (v * 100 + (v >> 16)) & UINT64_C(0x0000FFFF0000FFFF);    /* fours */
    *val = (v * 10000 + (v >> 32)) & UINT64_C(0xFFFFFFFF);       /* eight */
    return len;
}

static const uint64_t pow10_8[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000,
                                    100000000};
#endif

/* scan_u64, eight digits at a time while q + 16 <= end; a number of 16 digits or more (and
 * every number near the end of the buffer) goes to scan_u64, which checks overflow. */
static GS_HOT_INLINE const char *scan_u64_fast(const char *q, const char *end, uint64_t *out)
{
#ifdef GS_SWAR
    if (G_LIKELY(end - q >= 16)) {
        uint64_t a, b;
        unsigned la = digits8(load8(q), &a);
        if (la < 8) {
            if (la == 0)
                return NULL;
            *out = a;
            return q + la;
        }
        unsigned lb = digits8(load8(q + 8), &b);
        if (lb < 8) {
            *out = lb ? a * pow10_8[lb] + b : a;
            return q + 8 + lb;
        }
    }
#endif
    (void)end;
    return scan_u64(q, out);
}

/* Parses one well-formed event line starting at q; returns the start of the next line, or
 * NULL for anything else (a comment, a blank line, an error), which the slow path handles.
 * hint is the last line's client: when the field is that name followed by its comma, the
 * byte loop would find that name, and its index is known (r->client_ix; else -1). */
static GS_HOT_INLINE const char *fast_event(const char *q, const char *end, event_rec *r,
                                            gboolean frame_col, const client_hint *hint)
{
    const char *f;
    if (!(q = scan_u64_fast(q, end, &r->seq)) || *q++ != ',')
        return NULL;
    if (!(q = scan_u64_fast(q, end, &r->time_us)) || *q++ != ',')
        return NULL;
#ifdef GS_SWAR
    uint64_t w = end - q >= 8 ? load8(q) : 0;
    if ((w & UINT64_C(0xFFFFFFFFFFFF)) == UINT64_C(0x2c636f6c6c61)) { /* "alloc," */
        r->op = GS_OP_ALLOC;
        q += 6;
    } else if ((w & UINT64_C(0xFFFFFFFFFF)) == UINT64_C(0x2c65657266)) { /* "free," */
        r->op = GS_OP_FREE;
        q += 5;
    } else
#endif
    {
        for (f = q; gs_trace_is_name_char((unsigned char)*q); q++)
            ;
        if ((r->op = op_from(f, (size_t)(q - f))) < 0 || *q++ != ',')
            return NULL;
    }
    r->client_ix = -1;
    if (hint_matches(hint, q, end)) {
        r->client = q;
        r->client_len = hint->len;
        r->client_ix = hint->ix;
        q += hint->len;
    } else {
        for (f = q; gs_trace_is_name_char((unsigned char)*q); q++)
            ;
        if (q == f || *q != ',')
            return NULL;
        r->client = f;
        r->client_len = (size_t)(q - f);
    }
    q++;
    if (!(q = scan_u64_fast(q, end, &r->device)) || r->device > UINT32_MAX || *q++ != ',')
        return NULL;
    if (!(q = scan_u64_fast(q, end, &r->stream)) || *q++ != ',')
        return NULL;
    if (!(q = scan_u64_fast(q, end, &r->id)) || *q++ != ',')
        return NULL;
    if (!(q = scan_u64_fast(q, end, &r->size)))
        return NULL;
    r->frame = 0;
    if (G_UNLIKELY(frame_col)) { /* ",N" or "," */
        if (*q++ != ',')
            return NULL;
        if ((unsigned)((unsigned char)*q - '0') <= 9 && !(q = scan_u64(q, &r->frame)))
            return NULL;
    }
    if (*q == '\r')
        q++;
    return *q == '\n' ? q + 1 : NULL;
}

static const char *const column_names[9] = {
    "seq", "time_us", "op", "client", "device", "stream", "id", "size", "frame",
};

/* Slow path: the fast path refused an event line; find out why, in column order. */
static void diagnose(parser *p, const char *s, const char *le)
{
    const char *f[9];
    size_t fl[9], nf = 0, want = p->frame_col ? 9 : 8;
    for (const char *q = s;;) {
        const char *c = memchr(q, ',', (size_t)(le - q));
        const char *fe = c ? c : le;
        if (nf < 9) {
            f[nf] = q;
            fl[nf] = (size_t)(fe - q);
        }
        nf++;
        if (!c)
            break;
        q = c + 1;
    }
    if (nf != want) {
        fail(p, "expected %zu columns, got %zu", want, nf);
        return;
    }
    for (size_t i = 0; i < want; i++) {
        uint64_t v;
        gboolean ok;
        const char *what = "bad number in column";
        if (i == 2) {
            if (op_from(f[i], fl[i]) < 0) {
                char *q = quote(f[i], fl[i]);
                fail(p, "unknown op %s", q);
                g_free(q);
                return;
            }
            continue;
        }
        if (i == 3) {
            ok = gs_trace_valid_name(f[i], fl[i]);
            what = "bad client name in column";
        } else if (i == 8 && fl[i] == 0) {
            ok = TRUE; /* an empty frame: none */
        } else {
            ok = gs_trace_parse_u64(f[i], fl[i], &v) && (i != 4 || v <= UINT32_MAX);
        }
        if (!ok) {
            char *q = quote(f[i], fl[i]);
            fail(p, "%s '%s': %s", what, column_names[i], q);
            g_free(q);
            return;
        }
    }
    fail(p, "malformed event line"); /* not reached: the fast path accepts such a line */
}

static gboolean intern_client(parser *p, const char *s, size_t len, uint16_t *ix)
{
    guint nq = MIN(p->t->clients->len, QUICK_CLIENTS);
    for (guint i = 0; i < nq; i++)
        if (p->quick[i].len == len && memcmp(p->quick[i].name, s, len) == 0) {
            *ix = (uint16_t)i;
            return TRUE;
        }
    g_string_truncate(p->keybuf, 0);
    g_string_append_len(p->keybuf, s, (gssize)len);
    guint v = GPOINTER_TO_UINT(g_hash_table_lookup(p->client_ix, p->keybuf->str));
    if (v == 0) {
        GPtrArray *c = p->t->clients;
        if (c->len >= GS_TRACE_MAX_CLIENTS) {
            char *q = quote(s, len);
            fail(p, "too many clients: a trace may have at most %u, and %s would be one more",
                 GS_TRACE_MAX_CLIENTS, q);
            g_free(q);
            return FALSE;
        }
        char *name = g_strndup(s, len);
        if (c->len < QUICK_CLIENTS) {
            p->quick[c->len].name = name;
            p->quick[c->len].len = len;
        }
        g_ptr_array_add(c, name);
        v = c->len;
        g_hash_table_insert(p->client_ix, name, GUINT_TO_POINTER(v));
    }
    *ix = (uint16_t)(v - 1);
    return TRUE;
}

static GS_HOT_INLINE gboolean intern_stream(parser *p, uint64_t raw, uint32_t *ix)
{
    if (p->have_stream && raw == p->last_stream) {
        *ix = p->last_stream_ix;
        return TRUE;
    }
    kv_entry *x = kv_find(&p->streams, raw);
    if (x) {
        *ix = x->val1 - 1;
    } else {
        GArray *s = p->t->streams;
        if (s->len >= GS_TRACE_MAX_STREAMS) {
            fail(p, "too many streams: a trace may have at most %u, and stream %" PRIu64
                    " would be one more", GS_TRACE_MAX_STREAMS, raw);
            return FALSE;
        }
        *ix = s->len;
        g_array_append_val(s, raw);
        kv_insert(&p->streams, raw, *ix);
    }
    p->have_stream = TRUE;
    p->last_stream = raw;
    p->last_stream_ix = *ix;
    return TRUE;
}

/* ---- Ids to slots, and lines of events ---- */

/* The slot + 1 that id maps to (0 or NULL: none), as a place ids_remove can clear. */
static GS_HOT_INLINE uint32_t *ids_find(parser *p, uint64_t id)
{
    if (!p->ids_kv)
        return id < p->direct_cap && p->direct[id] ? &p->direct[id] : NULL;
    kv_entry *x = kv_find(&p->ids, id);
    return x ? &x->val1 : NULL;
}

static void ids_to_table(parser *p)
{
    kv_init(&p->ids, 10);
    for (size_t id = 0; id < p->direct_cap; id++)
        if (p->direct[id])
            kv_insert(&p->ids, id, p->direct[id] - 1);
    g_free(p->direct);
    p->direct = NULL;
    p->direct_cap = 0;
    p->ids_kv = TRUE;
}

/* id (not mapped now) -> slot. */
static GS_HOT_INLINE void ids_add(parser *p, uint64_t id, uint32_t slot)
{
    if (!p->ids_kv && id >= p->direct_cap) {
        if (id >= p->direct_limit) {
            ids_to_table(p);
        } else {
            size_t cap = MAX(MAX(2 * p->direct_cap, (size_t)id + 1), (size_t)1024);
            cap = MIN(cap, (size_t)p->direct_limit);
            p->direct = g_renew(uint32_t, p->direct, cap);
            memset(p->direct + p->direct_cap, 0, (cap - p->direct_cap) * sizeof *p->direct);
            p->direct_cap = cap;
        }
    }
    if (p->ids_kv)
        kv_insert(&p->ids, id, slot);
    else
        p->direct[id] = slot + 1;
}

/* v: what ids_find gave for a mapped id. */
static GS_HOT_INLINE void ids_remove(parser *p, uint32_t *v)
{
    if (p->ids_kv)
        kv_remove(&p->ids, (kv_entry *)(void *)((char *)v - offsetof(kv_entry, val1)));
    else
        *v = 0;
}

static GS_HOT_INLINE void ids_prefetch(const parser *p, uint64_t id)
{
    if (p->ids_kv)
        GS_PREFETCH(&p->ids.e[kv_home(&p->ids, id)]);
    else if (id < p->direct_cap)
        GS_PREFETCH(&p->direct[id]);
}

/* The line of appended event ev. */
static size_t line_of(const parser *p, size_t ev)
{
    const line_step *st = (const line_step *)(void *)p->lines->data;
    size_t lo = 0, hi = p->lines->len; /* the last step at or before ev */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (st[mid].ev <= ev)
            lo = mid + 1;
        else
            hi = mid;
    }
    return ev + (lo ? st[lo - 1].delta : 0);
}

/* The line of the last event op (an alloc or a free) of slot s: found by a walk back over the
 * events, on an error only. */
static size_t line_of_slot_op(const parser *p, uint32_t s, gs_op op)
{
    const gs_trace *t = p->t;
    for (size_t i = t->n; i-- > 0;)
        if (t->ev[i].op == op && t->ev[i].slot == s)
            return line_of(p, i);
    return 0;
}

/* A free is deferred when a free_done of its slot follows (the reader only keeps a free_done
 * of a freed slot whose id has not been allocated again): one pass back over the events, with
 * a bit per slot, once the file is read. */
static void mark_deferred(parser *p)
{
    gs_trace *t = p->t;
    if (!p->n_free_done) return;
    uint8_t *done = g_new0(uint8_t, t->n_slots / 8 + 1);
    for (size_t i = t->n; i-- > 0;) {
        gs_event *e = &t->ev[i];
        if (e->op == GS_OP_FREE_DONE)
            done[e->slot / 8] |= (uint8_t)(1u << (e->slot % 8));
        else if (e->op == GS_OP_FREE && (done[e->slot / 8] >> (e->slot % 8) & 1))
            e->flags |= GS_EV_DEFERRED;
    }
    g_free(done);
}

/* An alloc: a new slot for its id, which must not be live. */
static GS_HOT_INLINE ev_fate resolve_alloc(parser *p, const event_rec *r, gs_event *ev)
{
    gs_trace *t = p->t;
    uint32_t *x = ids_find(p, r->id);
    if (x && !p->freed[*x - 1])
        return problem(p, "alloc of live id %" PRIu64 " (allocated at line %zu)", r->id,
                       line_of_slot_op(p, *x - 1, GS_OP_ALLOC));
    if (t->n_slots >= UINT32_MAX - 1) {
        fail(p, "too many allocations");
        return EV_STOP;
    }
    if (t->n_slots == p->slot_cap) {
        p->slot_cap = p->slot_cap ? 2 * p->slot_cap : 1024;
        t->slot_id = g_renew(uint64_t, t->slot_id, p->slot_cap);
        p->si = g_renew(slot_info, p->si, p->slot_cap);
        p->freed = g_renew(uint8_t, p->freed, p->slot_cap);
    }
    ev->slot = (uint32_t)t->n_slots++;
    t->slot_id[ev->slot] = r->id;
    p->si[ev->slot] = (slot_info){ .size = r->size };
    p->freed[ev->slot] = 0;
    /* A freed id with no free_done yet is reused: that free was immediate after all. */
    if (x)
        *x = ev->slot + 1;
    else
        ids_add(p, r->id, ev->slot);
    return EV_APPEND;
}

/* A free or a free_done: the slot its id names now, and the size that slot was allocated with
 * (a size of 0 in the file means "as allocated"; another one is a problem). */
static GS_HOT_INLINE ev_fate resolve_free(parser *p, const event_rec *r, gs_event *ev)
{
    uint64_t id = r->id;
    uint32_t *x = ids_find(p, id);
    slot_info *si = x ? &p->si[*x - 1] : NULL;
    gboolean freed = x && p->freed[*x - 1];
    if (r->op == GS_OP_FREE) {
        if (!x)
            return problem(p, "free of unknown id %" PRIu64, id);
        if (freed)
            return problem(p, "double free of id %" PRIu64 " (freed at line %zu)", id,
                           line_of_slot_op(p, *x - 1, GS_OP_FREE));
    } else if (!freed) {
        return problem(p, "free_done of id %" PRIu64 " without a pending free", id);
    }
    /* In lenient mode a wrong size is warned about and the event kept, at the right size. */
    if (r->size != 0 && r->size != si->size &&
        problem(p, "%s of id %" PRIu64 " with size %" PRIu64 ", allocated with size %" PRIu64,
                gs_op_name((gs_op)r->op), id, r->size, si->size) == EV_STOP)
        return EV_STOP;
    ev->slot = *x - 1;
    ev->size = si->size;
    if (r->op == GS_OP_FREE) {
        p->freed[*x - 1] = 1;
    } else {
        p->n_free_done++; /* its free is marked deferred at the end (mark_deferred) */
        ids_remove(p, x); /* the id is dead now and may be allocated again */
    }
    return EV_APPEND;
}

/* The frame column of an event line: a number declared by a "# frame N:" line, on an alloc or
 * an oom only (the request it names). Fatal in lenient mode too: it is syntax, not a problem
 * of the allocations. */
static gboolean frame_of(parser *p, const event_rec *r)
{
    if (r->op != GS_OP_ALLOC && r->op != GS_OP_OOM) {
        fail(p, "frame %" PRIu64 " on a '%s' line: only alloc and oom lines name a frame",
             r->frame, gs_op_name((gs_op)r->op));
        return FALSE;
    }
    if (r->frame > p->t->frames->len) {
        fail(p, "bad frame in column 'frame': %" PRIu64 " (the header declares %u)", r->frame,
             p->t->frames->len);
        return FALSE;
    }
    return TRUE;
}

/* Applies one parsed event: checks seq, resolves its id to a slot and appends it. Returns
 * FALSE on a fatal error; in lenient mode a dropped event still returns TRUE. */
static gboolean apply_event(parser *p, const event_rec *r, uint64_t expect_seq)
{
    gs_trace *t = p->t;
    uint16_t client;
    uint32_t stream;

    p->line = r->line;
    if (r->seq != expect_seq) {
        fail(p, "expected seq %" PRIu64 ", got %" PRIu64, expect_seq, r->seq);
        return FALSE;
    }
    gs_event ev = {
        .time_us = r->time_us,
        .size = r->size,
        .slot = UINT32_MAX,
        .op = (uint8_t)r->op,
        .flags = 0,
        .device = (uint32_t)r->device,
    };
    ev_fate fate;
    switch (r->op) {
    case GS_OP_ALLOC:
        fate = resolve_alloc(p, r, &ev);
        break;
    case GS_OP_FREE:
    case GS_OP_FREE_DONE:
        fate = resolve_free(p, r, &ev);
        break;
    case GS_OP_OOM: /* names no allocation, like EMPTY_CACHE and MARK; a version-2 op */
        if (p->version < 2) {
            fail(p, "op 'oom' needs '%s' (this file says version 1)", GS_TRACE_MAGIC_2);
            return FALSE;
        }
        fate = EV_APPEND;
        break;
    case GS_OP_POOL_BEGIN:
    case GS_OP_POOL_END:
    case GS_OP_POOL_RELEASE:
        /* The pool's id in slot; size a flag. Syntax, so fatal in lenient mode too. */
        if (p->version < 3) {
            fail(p, "op '%s' needs '%s' (this file says version %u)", gs_op_name((gs_op)r->op),
                 GS_TRACE_MAGIC_3, p->version);
            return FALSE;
        }
        if (r->id == 0 || r->id >= UINT32_MAX) {
            fail(p, "bad pool id in column 'id': %" PRIu64 " (1 .. 4294967294)", r->id);
            return FALSE;
        }
        if (r->size > 1) {
            fail(p, "bad flag in column 'size' of '%s': %" PRIu64 " (0 or 1)",
                 gs_op_name((gs_op)r->op), r->size);
            return FALSE;
        }
        ev.slot = (uint32_t)r->id;
        fate = EV_APPEND;
        break;
    default: /* EMPTY_CACHE, MARK: id is parsed but means nothing; size is kept */
        fate = EV_APPEND;
        break;
    }
    if (fate != EV_APPEND)
        return fate == EV_DROP;
    if (G_UNLIKELY(r->frame) && !frame_of(p, r))
        return FALSE;
    /* Only an event kept names its client and stream: one dropped in lenient mode must not add
     * either (a one-client trace reported as several clients, the robustness review). */
    if (r->client_ix >= 0)
        client = (uint16_t)r->client_ix;
    else if (!intern_client(p, r->client, r->client_len, &client))
        return FALSE;
    if (!intern_stream(p, r->stream, &stream))
        return FALSE;
    ev.stream = stream;
    ev.client = client;
    if (G_UNLIKELY(client != p->hint.ix || !p->hint.len))
        hint_set(&p->hint, g_ptr_array_index(t->clients, client), r->client_len, client);
    if (t->n == t->cap) {
        /* Large blocks are grown by mremap, so doubling copies nothing. */
        t->cap *= 2;
        t->ev = g_renew(gs_event, t->ev, t->cap);
    }
    if (G_UNLIKELY(p->line - t->n != p->line_delta)) {
        line_step st = {t->n, p->line - t->n};
        g_array_append_val(p->lines, st);
        p->line_delta = st.delta;
    }
    if (G_UNLIKELY(r->frame)) {
        gs_trace_ev_frame fr = {t->n, (uint32_t)r->frame};
        g_array_append_val(t->ev_frames, fr);
    }
    if (G_UNLIKELY(!gs_trace_tally_event(t->tally, &ev))) {
        fail(p, "too many devices: a trace may have at most %u, and device %u would be one more",
             GS_TRACE_MAX_DEVICES, ev.device);
        return FALSE;
    }
    t->ev[t->n++] = ev;
    return TRUE;
}

/* The header: "# key: value" with a name-like key is metadata, any other '#' line a comment. */
static gboolean header_comment(parser *p, const char *s, const char *le)
{
    if (le - s < 2 || s[1] != ' ')
        return TRUE;
    const char *k = s + 2;
    const char *sep = NULL;
    for (const char *q = k; q + 1 < le; q++)
        if (q[0] == ':' && q[1] == ' ') {
            sep = q;
            break;
        }
    if (!sep || !gs_trace_valid_name(k, (size_t)(sep - k)))
        return TRUE;
    const char *v = sep + 2;
    size_t vlen = (size_t)(le - v);
    if (memchr(v, '\0', vlen) || memchr(v, '\r', vlen)) {
        fail(p, "bad character in header value");
        return FALSE;
    }
    gs_trace_meta m = { g_strndup(k, (size_t)(sep - k)), g_strndup(v, vlen) };
    g_array_append_val(p->t->meta, m);
    if (strcmp(m.key, "device_total_bytes") == 0 &&
        !gs_trace_parse_u64(v, vlen, &p->t->device_total)) {
        char *qv = quote(v, vlen);
        fail(p, "bad number in header 'device_total_bytes': %s", qv);
        g_free(qv);
        return FALSE;
    }
    if (strcmp(m.key, "device_total_bytes") == 0 && p->t->device_total > GS_MAX_DEVICE_BYTES) {
        fail(p, "header 'device_total_bytes': %" PRIu64 " is more than gpusim simulates (16 TiB)",
             p->t->device_total);
        return FALSE;
    }
    return TRUE;
}

/* "# frame N: file:line:function": N must be the next number (1, 2, ...), so a frame's number
 * is its place in the header and the writer gives the same lines back. */
static gboolean frame_line(parser *p, const char *s, const char *le)
{
    const char *q = s + strlen(GS_TRACE_FRAME_PREFIX), *colon = q;
    while (colon < le && *colon != ':')
        colon++;
    uint64_t n;
    gs_trace *t = p->t;
    if (colon + 1 >= le || colon[1] != ' ' || !gs_trace_parse_u64(q, (size_t)(colon - q), &n)) {
        fail(p, "bad frame line: expected '%sN: file:line:function'", GS_TRACE_FRAME_PREFIX);
        return FALSE;
    }
    uint32_t next = t->frames ? t->frames->len + 1 : 1;
    if (n != next) {
        fail(p, "bad frame line: expected frame %u, got %" PRIu64, next, n);
        return FALSE;
    }
    const char *v = colon + 2;
    if (memchr(v, '\0', (size_t)(le - v)) || memchr(v, '\r', (size_t)(le - v))) {
        fail(p, "bad character in frame line");
        return FALSE;
    }
    if (next == UINT32_MAX) {
        fail(p, "too many frames");
        return FALSE;
    }
    char *f = g_strndup(v, (size_t)(le - v));
    gs_trace_add_frame(t, f);
    g_free(f);
    return TRUE;
}

static gboolean magic_line(parser *p, const char *s, const char *le)
{
    static const char prefix[] = "# gpusim-trace ";
    size_t plen = sizeof prefix - 1, len = (size_t)(le - s);
    if (len == strlen(GS_TRACE_MAGIC) && memcmp(s, GS_TRACE_MAGIC, len) == 0) {
        p->version = 1;
        return TRUE;
    }
    if (len == strlen(GS_TRACE_MAGIC_2) && memcmp(s, GS_TRACE_MAGIC_2, len) == 0) {
        p->version = 2;
        return TRUE;
    }
    if (len == strlen(GS_TRACE_MAGIC_3) && memcmp(s, GS_TRACE_MAGIC_3, len) == 0) {
        p->version = 3;
        return TRUE;
    }
    uint64_t version;
    if (len > plen && memcmp(s, prefix, plen) == 0 &&
        gs_trace_parse_u64(s + plen, len - plen, &version))
        fail(p, "unsupported trace version %" PRIu64, version);
    else
        fail(p, "not a gpusim trace: expected '%s'", GS_TRACE_MAGIC);
    return FALSE;
}

/* Parses and applies a run of well-formed event lines from *sp, stopping before the first
 * line the fast path does not take (or at end). Returns FALSE on a fatal error. */
static gboolean event_run(parser *p, const char **sp, const char *end, uint64_t *seq)
{
    event_rec b[BATCH];
    const char *s = *sp;
    for (;;) {
        size_t n = 0;
        const char *next;
        while (n < BATCH && s < end &&
               (next = fast_event(s, end, &b[n], p->frame_col, &p->hint))) {
            b[n].line = ++p->line;
            ids_prefetch(p, b[n].id);
            s = next;
            n++;
        }
        for (size_t i = 0; i < n; i++)
            if (!apply_event(p, &b[i], (*seq)++))
                return FALSE;
        if (n < BATCH)
            break;
    }
    *sp = s;
    return TRUE;
}

/* Parses complete lines: [s, end) ends just after a '\n'. Input arrives in pieces (a file
 * read in chunks, gzip inflated in chunks), so all state lives in the parser. */
static gboolean feed_lines(parser *p, const char *s, const char *end)
{
    while (s < end) {
        if (p->state == EVENTS) {
            if (!event_run(p, &s, end, &p->seq))
                return FALSE;
            if (s == end)
                break;
        }
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *le = nl > s && nl[-1] == '\r' ? nl - 1 : nl;
        const char *line = s;
        s = nl + 1;
        p->line++;

        if (p->state == WANT_MAGIC) {
            if (!magic_line(p, line, le))
                return FALSE;
            p->state = WANT_COLUMNS;
            continue;
        }
        if (le == line)
            continue; /* blank line */
        if (line[0] == '#') {
            if (p->state != WANT_COLUMNS)
                continue;
            size_t fl = strlen(GS_TRACE_FRAME_PREFIX);
            /* "# frame " and a digit is a frame line; any other "# frame ..." a comment. */
            if ((size_t)(le - line) > fl && memcmp(line, GS_TRACE_FRAME_PREFIX, fl) == 0 &&
                (unsigned)((unsigned char)line[fl] - '0') <= 9) {
                if (!frame_line(p, line, le))
                    return FALSE;
            } else if (!header_comment(p, line, le)) {
                return FALSE;
            }
            continue;
        }
        if (p->state == WANT_COLUMNS) {
            size_t llen = (size_t)(le - line);
            const char *want = p->t->frames ? GS_TRACE_COLUMNS_FRAMES : GS_TRACE_COLUMNS;
            if (llen != strlen(want) || memcmp(line, want, llen) != 0) {
                char *q = quote(line, llen);
                if (!p->t->frames && llen == strlen(GS_TRACE_COLUMNS_FRAMES) &&
                    memcmp(line, GS_TRACE_COLUMNS_FRAMES, llen) == 0)
                    fail(p, "column 'frame' without a '%sN: ...' header line",
                         GS_TRACE_FRAME_PREFIX);
                else
                    fail(p, "expected column line '%s', got %s", want, q);
                g_free(q);
                return FALSE;
            }
            p->frame_col = p->t->frames != NULL;
            p->state = EVENTS;
            continue;
        }
        /* An event line the fast path refused: it has an error somewhere. */
        diagnose(p, line, le);
        return FALSE;
    }
    return TRUE;
}

/* End of input: total bytes of text seen, and how many of them after the last '\n'. */
static gboolean finish_text(parser *p, size_t total, size_t leftover)
{
    if (total == 0) {
        g_set_error(p->err, GS_TRACE_ERROR, GS_TRACE_ERROR_FORMAT,
                    "%s: empty file, expected '%s'", p->name, GS_TRACE_MAGIC);
        return FALSE;
    }
    if (leftover) {
        p->line++;
        fail(p, "truncated line (no newline at end of file)");
        return FALSE;
    }
    if (p->state != EVENTS) {
        fail(p, "missing column line '%s'", GS_TRACE_COLUMNS);
        return FALSE;
    }
    mark_deferred(p);
    const char *why = gs_trace_header_problem(p->t);
    if (why) {
        g_set_error(p->err, GS_TRACE_ERROR, GS_TRACE_ERROR_FORMAT, "%s: %s", p->name, why);
        return FALSE;
    }
    return TRUE;
}

static void parser_init(parser *p, const char *name, unsigned flags, gs_trace_warn_fn warn,
                        void *ud, GError **err, size_t ev_guess)
{
    gs_trace *t = gs_trace_new();
    t->path = g_strdup(name);
    *p = (parser){
        .name = name, .flags = flags, .warn = warn, .ud = ud, .err = err, .t = t,
        .client_ix = g_hash_table_new(g_str_hash, g_str_equal),
        .keybuf = g_string_new(NULL),
        .state = WANT_MAGIC,
    };
    /* Ids up to about twice the events the input's size suggests go in the array: at most 8
     * bytes an event, the hash table's least. */
    p->direct_limit = 2 * (uint64_t)ev_guess + 65536;
    p->lines = g_array_new(FALSE, FALSE, sizeof(line_step));
    kv_init(&p->streams, 4);
    t->cap = ev_guess < 64 ? 64 : ev_guess;
    t->tally = gs_trace_tally_new();
    t->ev = g_new(gs_event, t->cap);
}

/* Frees the parse-time state; returns the trace if ok, else frees it too. */
static gs_trace *parser_done(parser *p, gboolean ok)
{
    kv_destroy(&p->ids);
    g_free(p->direct);
    g_array_unref(p->lines);
    kv_destroy(&p->streams);
    g_hash_table_unref(p->client_ix);
    g_string_free(p->keybuf, TRUE);
    g_free(p->si);
    g_free(p->freed);
    if (!ok) {
        gs_trace_free(p->t);
        return NULL;
    }
    return p->t;
}

/* Text arriving in pieces: bytes after the last complete line wait here for the rest. */
#define CHUNK ((size_t)256 << 10)

typedef struct {
    char *buf;
    size_t cap, len;
    size_t total; /* bytes of text seen */
} carry;

/* Room for at least want more bytes at the end of the carry buffer. */
static char *carry_space(carry *c, size_t want)
{
    if (c->cap - c->len < want) {
        c->cap = MAX(2 * c->cap, c->len + want);
        c->buf = g_realloc(c->buf, c->cap);
    }
    return c->buf + c->len;
}

/* The longest line a text trace may have. An event line is under 200 bytes, a frame or header
 * line a few thousand; an input without end (/dev/zero, a line of 1 GiB in 1 MB of gzip) would
 * otherwise be held whole before its first line is judged. */
#define GS_TRACE_MAX_LINE (1u << 20)

/* What carry_commit refuses at once, before holding more: a NUL byte (no text trace has one),
 * a first line that cannot be the magic, a line past GS_TRACE_MAX_LINE. c->buf[0..len) is the
 * part of a line not yet parsed, fresh the bytes just added. */
static gboolean carry_check(parser *p, const carry *c, const char *fresh, size_t n)
{
    const char *nul = memchr(fresh, '\0', n);
    const char *nl = memchr(c->buf, '\n', c->len);
    size_t open = (size_t)((nl ? nl : c->buf + c->len) - c->buf); /* the first line's bytes */
    if (nul && (!nl || nul < nl)) {
        p->line++;
        fail(p, "a NUL byte: not a text trace");
        return FALSE;
    }
    static const char prefix[] = "# gpusim-trace";
    size_t have = MIN(open, sizeof prefix - 1);
    if (p->state == WANT_MAGIC && memcmp(c->buf, prefix, have) != 0) {
        p->line++;
        fail(p, "not a gpusim trace: expected '%s'", GS_TRACE_MAGIC);
        return FALSE;
    }
    if (!nl && c->len > GS_TRACE_MAX_LINE) {
        p->line++;
        fail(p, "a line of more than %u bytes: not a gpusim trace line", GS_TRACE_MAX_LINE);
        return FALSE;
    }
    return TRUE;
}

/* n bytes were written at the end: parse every line they complete, keep the rest. */
static gboolean carry_commit(parser *p, carry *c, size_t n)
{
    const char *fresh = c->buf + c->len;
    c->len += n;
    c->total += n;
    const char *nl = memrchr(fresh, '\n', n);
    if (!nl)
        return carry_check(p, c, fresh, n);
    size_t done = (size_t)(nl + 1 - c->buf);
    if (!feed_lines(p, c->buf, c->buf + done))
        return FALSE;
    memmove(c->buf, c->buf + done, c->len - done);
    c->len -= done;
    return carry_check(p, c, c->buf, c->len);
}

static gboolean is_gzip(const char *data, size_t len)
{
    return len >= 2 && (unsigned char)data[0] == 0x1f && (unsigned char)data[1] == 0x8b;
}

static void io_fail(parser *p, int e)
{
    g_set_error(p->err, GS_TRACE_ERROR, GS_TRACE_ERROR_IO, "%s: %s", p->name, g_strerror(e));
}

ssize_t gs_trace_read_some(int fd, void *buf, size_t n)
{
    ssize_t r;
    do
        r = read(fd, buf, n);
    while (r < 0 && errno == EINTR);
    return r;
}

/* The compressed input of parse_gzip: a first piece already in memory, then, if fd >= 0, the
 * rest of the file, a chunk at a time. */
typedef struct {
    int fd;
    const char *in; /* the piece being inflated: in[pos..len) is still to go */
    size_t len, pos;
    char *buf;      /* where the file's chunks are read; allocated on the first read */
    gboolean eof;   /* nothing more to read */
} gz_input;

/* The next chunk of the file, once the current piece is used up. FALSE on an I/O error. */
static gboolean gz_refill(parser *p, gz_input *z)
{
    if (!z->buf)
        z->buf = g_malloc(CHUNK);
    ssize_t r = gs_trace_read_some(z->fd, z->buf, CHUNK);
    if (r < 0) {
        io_fail(p, errno);
        return FALSE;
    }
    z->eof = r == 0;
    z->in = z->buf;
    z->len = (size_t)r;
    z->pos = 0;
    return TRUE;
}

/* Inflates gzip data into the parser, chunk by chunk, so a large compressed trace never sits
 * decompressed in memory. The input is first[0..first_len), then, if fd >= 0, the rest of
 * the file. Several concatenated members are one valid gzip file (`cat a.gz b.gz`); anything
 * else after a member makes zlib fail on the header, and the file is refused. zlib itself,
 * called as GIO's GZlibDecompressor called it (gzip wrapper, no flush). */
static gboolean parse_gzip(parser *p, int fd, const char *first, size_t first_len)
{
    z_stream zs = {0};
    carry c = { 0 };
    gz_input z = { .fd = fd, .in = first, .len = first_len, .eof = fd < 0 };
    gboolean finished = FALSE, ok = TRUE, corrupt = FALSE;
    if (inflateInit2(&zs, MAX_WBITS + 16) != Z_OK)
        g_error("zlib: failed to allocate the inflate state"); /* as g_new would */

    for (;;) {
        if (z.pos == z.len && !z.eof) {
            if (!(ok = gz_refill(p, &z)))
                break;
            continue;
        }
        if (finished) {
            if (z.pos == z.len)
                break; /* the last member ended with the input */
            inflateReset(&zs);
            finished = FALSE;
        }
        /* (zlib's counts are uInt: CHUNK, and a piece of at most UINT_MAX at a time) */
        size_t avail = MIN(z.len - z.pos, (size_t)UINT_MAX);
        zs.next_in = (Bytef *)(uintptr_t)(z.in + z.pos);
        zs.avail_in = (uInt)avail;
        zs.next_out = (Bytef *)carry_space(&c, CHUNK);
        zs.avail_out = (uInt)CHUNK;
        int res = inflate(&zs, Z_NO_FLUSH);
        if (res == Z_BUF_ERROR) {
            /* No progress: "need more input" is only an error once the input is over. */
            if (z.pos == z.len && !z.eof)
                continue;
            corrupt = TRUE;
            break;
        }
        if (res != Z_OK && res != Z_STREAM_END) {
            /* Z_DATA_ERROR (a bad header, data or check), Z_NEED_DICT, Z_MEM_ERROR: what this
             * call inflated is not parsed (a damaged member's last lines are not trusted, as
             * GIO's decompressor, used before, gave none of them back). */
            corrupt = TRUE;
            break;
        }
        size_t r = avail - zs.avail_in, w = CHUNK - zs.avail_out;
        z.pos += r;
        if (w && !carry_commit(p, &c, w)) {
            ok = FALSE;
            break;
        }
        if (res == Z_STREAM_END) {
            finished = TRUE;
        } else if (r == 0 && w == 0) {
            corrupt = TRUE; /* no progress: never spin */
            break;
        }
    }
    if (ok && corrupt) {
        g_set_error(p->err, GS_TRACE_ERROR, GS_TRACE_ERROR_FORMAT,
                    "%s: truncated or corrupt gzip data", p->name);
        ok = FALSE;
    }
    if (ok)
        ok = finish_text(p, c.total, c.len);
    inflateEnd(&zs);
    g_free(z.buf);
    g_free(c.buf);
    return ok;
}

gs_trace *gs_trace_parse(const char *name, const char *data, size_t len, unsigned flags,
                         gs_trace_warn_fn warn, void *ud, GError **err)
{
    g_return_val_if_fail(data != NULL || len == 0, NULL);
    if (!name)
        name = "(memory)";
    if (gs_trace_is_binary(data, len))
        return gs_trace_binary_read(name, -1, data, len, err);
    parser p;
    gboolean ok;
    if (is_gzip(data, len)) {
        parser_init(&p, name, flags, warn, ud, err, len / 8);
        ok = parse_gzip(&p, -1, data, len);
    } else {
        /* Plain text in memory is parsed in place, up to its last '\n'. */
        parser_init(&p, name, flags, warn, ud, err, len / 40);
        const char *nl = len ? memrchr(data, '\n', len) : NULL;
        size_t done = nl ? (size_t)(nl + 1 - data) : 0;
        ok = feed_lines(&p, data, data + done) && finish_text(&p, len, len - done);
    }
    return parser_done(&p, ok);
}

/* Files are read in chunks (open/read rather than g_file_get_contents, which would hold the
 * whole file and hide the errno an I/O error message needs). */
gs_trace *gs_trace_load(const char *path, unsigned flags, gs_trace_warn_fn warn, void *ud,
                        GError **err)
{
    g_return_val_if_fail(path != NULL, NULL);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        g_set_error(err, GS_TRACE_ERROR, GS_TRACE_ERROR_IO, "%s: %s", path, g_strerror(e));
        return NULL;
    }
    size_t size = S_ISREG(st.st_mode) ? (size_t)st.st_size : 0;

    /* The first bytes decide between binary, gzip and plain text. A binary trace is read
     * straight into its arrays (binary.c), so only its magic is read here. */
    char magic[sizeof gs_trace_binary_magic];
    ssize_t r = 0, got = 0;
    while ((size_t)r < sizeof magic &&
           (got = gs_trace_read_some(fd, magic + r, sizeof magic - r)) > 0)
        r += got;
    int read_errno = got < 0 ? errno : 0;
    if (got < 0)
        r = -1;
    if (r == (ssize_t)sizeof magic && gs_trace_is_binary(magic, sizeof magic)) {
        gs_trace *t = gs_trace_binary_read(path, fd, magic, sizeof magic, err);
        close(fd);
        return t;
    }
    parser p;
    parser_init(&p, path, flags, warn, ud, err, size / 40);
    carry c = { 0 };
    gboolean ok = TRUE;
    if (r >= 0) {
        memcpy(carry_space(&c, CHUNK), magic, (size_t)r);
        got = (size_t)r < sizeof magic ? 0 : gs_trace_read_some(fd, c.buf + r, CHUNK - (size_t)r);
        r = got < 0 ? got : r + got;
    } else {
        got = r;
    }
    if (r < 0) {
        io_fail(&p, read_errno ? read_errno : errno);
        ok = FALSE;
    } else if (is_gzip(c.buf, (size_t)r)) {
        ok = parse_gzip(&p, fd, c.buf, (size_t)r);
    } else {
        while (r > 0 && (ok = carry_commit(&p, &c, (size_t)r)))
            r = gs_trace_read_some(fd, carry_space(&c, CHUNK), CHUNK);
        if (ok && r < 0) {
            io_fail(&p, errno);
            ok = FALSE;
        }
        if (ok)
            ok = finish_text(&p, c.total, c.len);
    }
    close(fd);
    g_free(c.buf);
    return parser_done(&p, ok);
}

gs_trace_sniffed gs_trace_sniff(const char *path)
{
    /* stat before open: opening a FIFO would take its writer's connection (and block with
     * none), and the reader's open after would wait for a writer that has gone */
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return GS_SNIFF_UNKNOWN;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return GS_SNIFF_UNKNOWN;
    unsigned char raw[512], head[32];
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, raw, sizeof raw) : -1;
    close(fd);
    if (n < 2) return GS_SNIFF_UNKNOWN;
    size_t have = 0;
    if (is_gzip((const char *)raw, (size_t)n)) { /* the first bytes of what it holds */
        z_stream z = {.next_in = raw, .avail_in = (uInt)n, .next_out = head,
                      .avail_out = sizeof head};
        if (inflateInit2(&z, MAX_WBITS + 16) != Z_OK) return GS_SNIFF_UNKNOWN;
        (void)inflate(&z, Z_SYNC_FLUSH);
        have = sizeof head - z.avail_out;
        inflateEnd(&z);
    } else {
        have = MIN((size_t)n, sizeof head);
        memcpy(head, raw, have);
    }
    if (have >= strlen("# gpusim-trace") && memcmp(head, "# gpusim-trace", strlen("# gpusim-trace")) == 0)
        return GS_SNIFF_TRACE;
    if (gs_trace_is_binary((const char *)head, have)) return GS_SNIFF_TRACE;
    if (have >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5) return GS_SNIFF_PICKLE;
    return GS_SNIFF_UNKNOWN;
}
