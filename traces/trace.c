/* trace.c - the trace object (the text format of docs/trace-format.md, in memory): creating and freeing
 * it, its metadata, the op names, the format's rules for names and numbers (trace-int.h), and
 * the builder API that tests and generators use to write traces in code. The reader is read.c,
 * the writer write.c.
 */
#include "trace-int.h"

#include <string.h>
#include <sys/mman.h>

G_DEFINE_QUARK(gs-trace-error-quark, gs_trace_error)

/* The layout facts trace.h states: an event is 32 bytes, and every client index below the
 * limit fits gs_event.client. */
G_STATIC_ASSERT(sizeof(gs_event) == 32);
G_STATIC_ASSERT(GS_TRACE_MAX_CLIENTS - 1 <= UINT16_MAX);

static const char *const op_names[GS_OP_COUNT] = {
    [GS_OP_ALLOC] = "alloc",
    [GS_OP_FREE] = "free",
    [GS_OP_FREE_DONE] = "free_done",
    [GS_OP_EMPTY_CACHE] = "empty_cache",
    [GS_OP_MARK] = "mark",
    [GS_OP_OOM] = "oom",
    [GS_OP_POOL_BEGIN] = "pool_begin",
    [GS_OP_POOL_END] = "pool_end",
    [GS_OP_POOL_RELEASE] = "pool_release",
};

const char *gs_op_name(gs_op op)
{
    return (unsigned)op < GS_OP_COUNT ? op_names[op] : "unknown";
}

/* ---- The format's rules (trace-int.h) ------------------------------------------------------- */

gboolean gs_trace_valid_name(const char *s, size_t len)
{
    if (len == 0)
        return FALSE;
    for (size_t i = 0; i < len; i++)
        if (!gs_trace_is_name_char((unsigned char)s[i]))
            return FALSE;
    return TRUE;
}

gboolean gs_trace_parse_u64(const char *s, size_t len, uint64_t *out)
{
    uint64_t v = 0;
    if (len == 0)
        return FALSE;
    for (size_t i = 0; i < len; i++) {
        unsigned d = (unsigned char)s[i] - '0';
        if (d > 9)
            return FALSE;
        if (v > (UINT64_MAX - d) / 10)
            return FALSE;
        v = v * 10 + d;
    }
    *out = v;
    return TRUE;
}

/* A "D=N,D=N" list (device_total_bytes_by_device, offline_bytes_by_device): its entries by
 * device, for lookups of many devices (of a device named twice, the later entry counts); NULL
 * when it is malformed. Read once, not once for each device looked up. */
typedef struct {
    uint32_t dev, at;
    uint64_t n;
} dev_value;

static gint cmp_dev_value(gconstpointer a, gconstpointer b)
{
    const dev_value *x = a, *y = b;
    return x->dev != y->dev ? (x->dev < y->dev ? -1 : 1) : (x->at < y->at ? -1 : x->at > y->at);
}

static GArray *by_device_sorted(const char *v)
{
    GArray *a = g_array_new(FALSE, FALSE, sizeof(dev_value));
    for (const char *q = v;; q++) {
        const char *end = strchr(q, ','), *eq = strchr(q, '=');
        if (!end) end = q + strlen(q);
        uint64_t dev, n;
        if (!eq || eq > end || !gs_trace_parse_u64(q, (size_t)(eq - q), &dev) || dev > UINT32_MAX ||
            !gs_trace_parse_u64(eq + 1, (size_t)(end - eq - 1), &n) || n > GS_MAX_DEVICE_BYTES) {
            g_array_free(a, TRUE);
            return NULL;
        }
        dev_value x = {(uint32_t)dev, a->len, n};
        g_array_append_val(a, x);
        if (!*end) break;
        q = end;
    }
    g_array_sort(a, cmp_dev_value);
    return a;
}

/* Each of ids[0..n) looked up in a (by_device_sorted): found[k], and out[k] when found. */
static void by_device_lookup(const GArray *a, const uint32_t *ids, size_t n, uint64_t *out,
                             bool *found)
{
    const dev_value *v = (const dev_value *)(void *)a->data;
    for (size_t k = 0; k < n; k++) {
        size_t lo = 0, hi = a->len; /* the first entry past ids[k] */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (v[mid].dev <= ids[k]) lo = mid + 1;
            else hi = mid;
        }
        found[k] = lo > 0 && v[lo - 1].dev == ids[k];
        if (found[k]) out[k] = v[lo - 1].n;
    }
}

/* Whether list v, if any, is a "D=N,D=N" list (N at most GS_MAX_DEVICE_BYTES). */
static gboolean by_device_ok(const char *v)
{
    GArray *a = v ? by_device_sorted(v) : NULL;
    if (a) g_array_free(a, TRUE);
    return !v || a;
}

static gboolean meta_u64(const gs_trace *t, const char *key, uint64_t *out, gboolean *bad)
{
    const char *v = gs_trace_get_meta(t, key);
    if (!v) return FALSE;
    if (!gs_trace_parse_u64(v, strlen(v), out)) {
        *bad = TRUE;
        return FALSE;
    }
    return TRUE;
}

const char *gs_trace_header_problem(const gs_trace *t)
{
    gboolean bad = FALSE;
    uint64_t v;
    /* (the readers refuse it as they read the entry; a built trace's writer asks here) */
    if (t->device_total > GS_MAX_DEVICE_BYTES)
        return "header 'device_total_bytes' is more than gpusim simulates (16 TiB)";
    if (meta_u64(t, "fatal_oom_event", &v, &bad) &&
        (t->n == 0 || v != t->n - 1 || t->ev[t->n - 1].op != GS_OP_OOM))
        return "header 'fatal_oom_event' must name the last event, an oom";
    if (bad) return "bad number in header 'fatal_oom_event'";
    if (meta_u64(t, "synthesized_allocs", &v, &bad) && v > t->n_slots)
        return "header 'synthesized_allocs' is more than the trace's allocations";
    if (bad) return "bad number in header 'synthesized_allocs'";
    (void)meta_u64(t, "inferred_empty_cache", &v, &bad);
    if (bad) return "bad number in header 'inferred_empty_cache'";
    if (!by_device_ok(gs_trace_get_meta(t, "device_total_bytes_by_device")))
        return "header 'device_total_bytes_by_device' is not a list DEVICE=BYTES,... "
               "(BYTES at most 16 TiB)";
    (void)meta_u64(t, "offline_events", &v, &bad);
    if (bad) return "bad number in header 'offline_events'";
    if (!by_device_ok(gs_trace_get_meta(t, "offline_bytes_by_device")))
        return "header 'offline_bytes_by_device' is not a list DEVICE=BYTES,... "
               "(BYTES at most 16 TiB)";
    return NULL;
}

struct gs_trace_tally *gs_trace_tally_new(void)
{
    struct gs_trace_tally *y = g_new0(struct gs_trace_tally, 1);
    y->devices = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    return y;
}

void gs_trace_tally_free(struct gs_trace_tally *y)
{
    if (!y)
        return;
    g_array_unref(y->devices);
    if (y->device_set) g_hash_table_unref(y->device_set);
    g_free(y);
}

/* Up to this many devices are found by a scan, past it in a hash set. */
#define DEVICE_SCAN 16

gboolean gs_trace_tally_device(struct gs_trace_tally *y, uint32_t d)
{
    GArray *a = y->devices;
    if (y->device_set) {
        if (g_hash_table_contains(y->device_set, GSIZE_TO_POINTER((gsize)d + 1))) return TRUE;
    } else {
        for (guint k = 0; k < a->len; k++)
            if (g_array_index(a, uint32_t, k) == d) return TRUE;
    }
    if (a->len >= GS_TRACE_MAX_DEVICES) return FALSE;
    g_array_append_val(a, d);
    if (y->device_set) {
        g_hash_table_add(y->device_set, GSIZE_TO_POINTER((gsize)d + 1));
    } else if (a->len > DEVICE_SCAN) {
        y->device_set = g_hash_table_new(g_direct_hash, g_direct_equal);
        for (guint k = 0; k < a->len; k++)
            g_hash_table_add(y->device_set,
                             GSIZE_TO_POINTER((gsize)g_array_index(a, uint32_t, k) + 1));
    }
    return TRUE;
}

/* The reader's tally, when it still describes the events. */
static const struct gs_trace_tally *tally(const gs_trace *t)
{
    return t->tally && t->tally->n == t->n ? t->tally : NULL;
}

void gs_trace_get_caveats(const gs_trace *t, gs_trace_caveats *out)
{
    memset(out, 0, sizeof *out);
    gboolean bad = FALSE;
    uint64_t v;
    if (meta_u64(t, "fatal_oom_event", &v, &bad) && t->ev && t->n && v == t->n - 1 &&
        t->ev[t->n - 1].op == GS_OP_OOM) {
        out->fatal_oom = true;
        out->fatal_oom_event = (size_t)v;
    }
    const char *after = gs_trace_get_meta(t, "died_after_log");
    out->died_after_log = !out->fatal_oom && after && strcmp(after, "yes") == 0;
    out->dies = out->fatal_oom || out->died_after_log;
    if (meta_u64(t, "synthesized_allocs", &v, &bad)) out->synthesized = v;
    if (meta_u64(t, "inferred_empty_cache", &v, &bad)) out->inferred_empty_cache = v;
    const char *m = gs_trace_get_meta(t, "started_mid_run");
    out->started_mid_run = out->synthesized > 0 || (m && strcmp(m, "yes") == 0);
    out->captured = gs_trace_get_meta(t, "captured");
    out->capture_unknown = out->captured ? gs_trace_get_meta(t, "capture_unknown") : NULL;
    /* (a stand-in trace may count events it does not hold: ev NULL) */
    if (tally(t) && t->ev)
        out->n_oom_events = tally(t)->n_oom;
    else
        for (size_t i = 0; t->ev && i < t->n; i++) out->n_oom_events += t->ev[i].op == GS_OP_OOM;
}

bool gs_trace_has_pools(const gs_trace *t)
{
    /* (a stand-in trace may count events it does not hold: ev NULL) */
    if (!t->ev)
        return false;
    if (tally(t))
        return tally(t)->n_pool > 0;
    for (size_t i = 0; i < t->n; i++)
        if (gs_event_is_pool(&t->ev[i]))
            return true;
    return false;
}

bool gs_trace_read_peak_live(const gs_trace *t, uint64_t *out)
{
    const struct gs_trace_tally *y = tally(t);
    if (!t->ev || !y || y->devices->len > 1) return false;
    *out = y->peak_live;
    return true;
}

static gint cmp_u32(gconstpointer a, gconstpointer b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

size_t gs_trace_devices(const gs_trace *t, uint32_t **ids)
{
    GArray *a = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    if (tally(t) && t->ev) {
        g_array_append_vals(a, tally(t)->devices->data, tally(t)->devices->len);
    } else if (t->ev) {
        /* (a trace built in code: counted as a reader counts) */
        struct gs_trace_tally *y = gs_trace_tally_new();
        uint32_t last = 0;
        for (size_t i = 0; i < t->n; i++) {
            uint32_t d = t->ev[i].device;
            if (y->devices->len && d == last) continue; /* runs of events share a device */
            last = d;
            if (!gs_trace_tally_device(y, d)) {
                g_array_append_val(y->devices, d); /* one past the limit: refused (replay) */
                break;
            }
        }
        g_array_append_vals(a, y->devices->data, y->devices->len);
        gs_trace_tally_free(y);
    }
    if (a->len == 0) {
        uint32_t zero = 0;
        g_array_append_val(a, zero);
    }
    g_array_sort(a, cmp_u32);
    size_t n = a->len;
    *ids = (uint32_t *)(void *)g_array_free(a, FALSE);
    return n;
}

void gs_trace_device_totals(const gs_trace *t, const uint32_t *ids, size_t n, uint64_t *out)
{
    const char *bd = gs_trace_get_meta(t, "device_total_bytes_by_device");
    GArray *a = bd ? by_device_sorted(bd) : NULL;
    bool *found = g_new0(bool, n ? n : 1);
    if (a) by_device_lookup(a, ids, n, out, found);
    for (size_t k = 0; k < n; k++)
        if (!found[k]) out[k] = t->device_total;
    g_free(found);
    if (a) g_array_free(a, TRUE);
}

uint64_t gs_trace_device_total(const gs_trace *t, uint32_t device)
{
    uint64_t v;
    gs_trace_device_totals(t, &device, 1, &v);
    return v;
}

void gs_trace_stored_offlines(const gs_trace *t, const char *planner, const uint32_t *ids, size_t n,
                              uint64_t *out, bool *found)
{
    const char *ob = gs_trace_get_meta(t, "offline_bytes_by_device");
    /* figures planned over other events (a trace cut with head, say) are not this trace's */
    uint64_t n_ev = 0;
    gboolean bad = FALSE;
    bool same = meta_u64(t, "offline_events", &n_ev, &bad) ? n_ev == t->n : !bad;
    GArray *a = ob && same && g_strcmp0(gs_trace_get_meta(t, "offline_planner"), planner) == 0
                    ? by_device_sorted(ob)
                    : NULL;
    memset(found, 0, n * sizeof *found);
    if (a) {
        by_device_lookup(a, ids, n, out, found);
        g_array_free(a, TRUE);
    }
}

bool gs_trace_stored_offline(const gs_trace *t, const char *planner, uint32_t device,
                             uint64_t *out)
{
    bool found;
    gs_trace_stored_offlines(t, planner, &device, 1, out, &found);
    return found;
}

/* ---- The object ----------------------------------------------------------------------------- */

static void meta_clear(void *p)
{
    gs_trace_meta *m = p;
    g_free(m->key);
    g_free(m->value);
}

/* Builder bookkeeping, kept out of the public struct: where each slot's alloc is (a free
 * copies its client, stream and size) and whether the slot may still be freed. */
enum { SLOT_LIVE, SLOT_PENDING, SLOT_DONE };

struct gs_trace_builder {
    size_t *slot_ev; /* event index of each slot's ALLOC */
    uint8_t *state;  /* SLOT_* */
    size_t cap;      /* allocated length of slot_ev, state and t->slot_id */
};

static void builder_free(gs_trace *t)
{
    if (!t->builder) return;
    g_free(t->builder->slot_ev);
    g_free(t->builder->state);
    g_clear_pointer(&t->builder, g_free);
}

gs_trace *gs_trace_new(void)
{
    gs_trace *t = g_new0(gs_trace, 1);
    t->clients = g_ptr_array_new_with_free_func(g_free);
    t->streams = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    t->meta = g_array_new(FALSE, FALSE, sizeof(gs_trace_meta));
    g_array_set_clear_func(t->meta, meta_clear);
    return t;
}

void gs_trace_free(gs_trace *t)
{
    if (!t)
        return;
    g_free(t->path);
    if (t->map)
        munmap(t->map, t->map_len);
    else
        g_free(t->ev);
    gs_trace_tally_free(t->tally);
    g_free(t->slot_id);
    if (t->clients)
        g_ptr_array_unref(t->clients);
    if (t->streams)
        g_array_unref(t->streams);
    if (t->meta)
        g_array_unref(t->meta);
    if (t->frames)
        g_ptr_array_unref(t->frames);
    if (t->ev_frames)
        g_array_unref(t->ev_frames);
    builder_free(t);
    g_free(t);
}

void gs_trace_truncate(gs_trace *t, size_t n)
{
    g_return_if_fail(t != NULL && n <= t->n);
    t->n = n;
    size_t slots = 0; /* (slots are numbered in the order of their alloc events) */
    guint streams = 0, clients = 0;
    for (size_t i = 0; i < n; i++) {
        slots += t->ev[i].op == GS_OP_ALLOC;
        streams = MAX(streams, t->ev[i].stream + 1);
        clients = MAX(clients, (guint)t->ev[i].client + 1);
    }
    t->n_slots = slots;
    /* the streams and clients past the last one the events kept name (a builder numbers them
     * in the order of first use: those only the cut events used), which a writer would find
     * unused */
    if (streams < t->streams->len) g_array_set_size(t->streams, streams);
    if (clients < t->clients->len) g_ptr_array_set_size(t->clients, (gint)clients);
    if (t->ev_frames) { /* sorted by event */
        guint keep = t->ev_frames->len;
        while (keep && g_array_index(t->ev_frames, gs_trace_ev_frame, keep - 1).ev >= n) keep--;
        g_array_set_size(t->ev_frames, keep);
    }
    builder_free(t); /* made again from the events kept, if more are added */
}

const char *gs_trace_frame(const gs_trace *t, size_t ev)
{
    if (!t->ev_frames)
        return NULL;
    const gs_trace_ev_frame *f = (const gs_trace_ev_frame *)(void *)t->ev_frames->data;
    size_t lo = 0, hi = t->ev_frames->len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (f[mid].ev < ev)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == t->ev_frames->len || f[lo].ev != ev || !f[lo].frame ||
        f[lo].frame > t->frames->len)
        return NULL;
    return g_ptr_array_index(t->frames, f[lo].frame - 1);
}

uint32_t gs_trace_add_frame(gs_trace *t, const char *frame)
{
    g_return_val_if_fail(frame && !strpbrk(frame, "\r\n"), 0);
    if (!t->frames) {
        t->frames = g_ptr_array_new_with_free_func(g_free);
        t->ev_frames = g_array_new(FALSE, FALSE, sizeof(gs_trace_ev_frame));
    }
    g_ptr_array_add(t->frames, g_strdup(frame));
    return t->frames->len;
}

void gs_trace_set_frame(gs_trace *t, size_t ev, uint32_t frame)
{
    g_return_if_fail(t->frames && frame >= 1 && frame <= t->frames->len);
    guint n = t->ev_frames->len;
    g_return_if_fail(n == 0 ||
                     g_array_index(t->ev_frames, gs_trace_ev_frame, n - 1).ev < ev);
    gs_trace_ev_frame f = {ev, frame};
    g_array_append_val(t->ev_frames, f);
}

const char *gs_trace_get_meta(const gs_trace *t, const char *key)
{
    g_return_val_if_fail(t != NULL && key != NULL, NULL);
    /* A repeated key: the later line wins, as it does for device_total. */
    for (guint i = t->meta->len; i-- > 0;) {
        const gs_trace_meta *m = &g_array_index(t->meta, gs_trace_meta, i);
        if (strcmp(m->key, key) == 0)
            return m->value;
    }
    return NULL;
}

void gs_trace_set_meta(gs_trace *t, const char *key, const char *value)
{
    g_return_if_fail(t != NULL && key != NULL && value != NULL);
    /* Refuse what the writer could not write back as one "# key: value" line. */
    g_return_if_fail(gs_trace_valid_name(key, strlen(key)));
    g_return_if_fail(strpbrk(value, "\r\n") == NULL);

    if (strcmp(key, "device_total_bytes") == 0) {
        uint64_t v;
        g_return_if_fail(gs_trace_parse_u64(value, strlen(value), &v));
        t->device_total = v;
    }
    for (guint i = t->meta->len; i-- > 0;) {
        gs_trace_meta *m = &g_array_index(t->meta, gs_trace_meta, i);
        if (strcmp(m->key, key) == 0) {
            g_free(m->value);
            m->value = g_strdup(value);
            return;
        }
    }
    gs_trace_meta m = { g_strdup(key), g_strdup(value) };
    g_array_append_val(t->meta, m);
}

/* ---- Building ------------------------------------------------------------------------------- */

/* The builder's per-slot state, created on first use; for a loaded (or hand-filled) trace it
 * is recovered from the events, so building can continue where a file left off. */
static struct gs_trace_builder *builder(gs_trace *t)
{
    if (t->builder)
        return t->builder;
    struct gs_trace_builder *b = g_new0(struct gs_trace_builder, 1);
    b->cap = t->n_slots;
    b->slot_ev = g_new0(size_t, b->cap ? b->cap : 1);
    b->state = g_new0(uint8_t, b->cap ? b->cap : 1);
    for (size_t i = 0; i < t->n; i++) {
        const gs_event *e = &t->ev[i];
        if (e->slot >= t->n_slots)
            continue;
        if (e->op == GS_OP_ALLOC) {
            b->slot_ev[e->slot] = i;
            b->state[e->slot] = SLOT_LIVE;
        } else if (e->op == GS_OP_FREE) {
            b->state[e->slot] = e->flags & GS_EV_DEFERRED ? SLOT_PENDING : SLOT_DONE;
        } else if (e->op == GS_OP_FREE_DONE) {
            b->state[e->slot] = SLOT_DONE;
        }
    }
    t->builder = b;
    return b;
}

static gs_event *push_event(gs_trace *t)
{
    /* The builder's events are edited after they are pushed (tests set a device): no tally. */
    gs_trace_tally_free(t->tally);
    t->tally = NULL;
    if (t->map) {
        /* A binary trace's events read into a mapping of their own (binary.c's
         * events_memory): building on goes on in a copy that can grow. */
        gs_event *ev = g_new(gs_event, t->n + 1);
        memcpy(ev, t->ev, t->n * sizeof *ev);
        munmap(t->map, t->map_len);
        t->map = NULL;
        t->ev = ev;
        t->cap = t->n + 1;
    }
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 256;
        t->ev = g_renew(gs_event, t->ev, t->cap);
    }
    gs_event *e = &t->ev[t->n];
    memset(e, 0, sizeof *e);
    /* Built traces have no clock; the event index keeps time non-decreasing and unique. */
    e->time_us = t->n;
    t->n++;
    return e;
}

static int find_client(const gs_trace *t, const char *name)
{
    for (guint i = 0; i < t->clients->len; i++)
        if (strcmp(g_ptr_array_index(t->clients, i), name) == 0)
            return (int)i;
    return -1;
}

static uint16_t builder_client(gs_trace *t, const char *name)
{
    int i = find_client(t, name);
    if (i >= 0)
        return (uint16_t)i;
    g_ptr_array_add(t->clients, g_strdup(name));
    return (uint16_t)(t->clients->len - 1);
}

static int find_stream(const gs_trace *t, uint64_t raw)
{
    const uint64_t *s = (const uint64_t *)(void *)t->streams->data;
    for (guint i = t->streams->len; i-- > 0;)
        if (s[i] == raw)
            return (int)i;
    return -1;
}

static uint32_t builder_stream(gs_trace *t, uint64_t raw)
{
    int i = find_stream(t, raw);
    if (i >= 0)
        return (uint32_t)i;
    g_array_append_val(t->streams, raw);
    return t->streams->len - 1;
}

uint32_t gs_trace_add_alloc(gs_trace *t, const char *client, uint64_t stream, uint64_t size)
{
    g_return_val_if_fail(t != NULL && client != NULL, UINT32_MAX);
    g_return_val_if_fail(gs_trace_valid_name(client, strlen(client)), UINT32_MAX);
    g_return_val_if_fail(t->n_slots < UINT32_MAX - 1, UINT32_MAX);
    /* The trace's limits (trace.h): no client or stream one too many. */
    g_return_val_if_fail(t->clients->len < GS_TRACE_MAX_CLIENTS || find_client(t, client) >= 0,
                         UINT32_MAX);
    g_return_val_if_fail(t->streams->len < GS_TRACE_MAX_STREAMS || find_stream(t, stream) >= 0,
                         UINT32_MAX);
    struct gs_trace_builder *b = builder(t);
    if (t->n_slots == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 256;
        t->slot_id = g_renew(uint64_t, t->slot_id, b->cap);
        b->slot_ev = g_renew(size_t, b->slot_ev, b->cap);
        b->state = g_renew(uint8_t, b->state, b->cap);
    }
    uint32_t slot = (uint32_t)t->n_slots++;
    t->slot_id[slot] = (uint64_t)slot + 1;
    b->slot_ev[slot] = t->n;
    b->state[slot] = SLOT_LIVE;

    uint16_t c = builder_client(t, client);
    uint32_t s = builder_stream(t, stream);
    gs_event *e = push_event(t);
    e->op = GS_OP_ALLOC;
    e->slot = slot;
    e->size = size;
    e->client = c;
    e->stream = s;
    return slot;
}

/* A free or free_done copies the allocation's client, stream, device and size. */
static void add_slot_event(gs_trace *t, uint32_t slot, gs_op op, uint8_t flags)
{
    struct gs_trace_builder *b = builder(t);
    gs_event a = t->ev[b->slot_ev[slot]];
    gs_event *e = push_event(t);
    e->op = (uint8_t)op;
    e->flags = flags;
    e->slot = slot;
    e->size = a.size;
    e->client = a.client;
    e->stream = a.stream;
    e->device = a.device;
}

void gs_trace_add_free(gs_trace *t, uint32_t slot)
{
    g_return_if_fail(t != NULL && slot < t->n_slots);
    g_return_if_fail(builder(t)->state[slot] == SLOT_LIVE);
    add_slot_event(t, slot, GS_OP_FREE, 0);
    t->builder->state[slot] = SLOT_DONE;
}

void gs_trace_add_free_deferred(gs_trace *t, uint32_t slot)
{
    g_return_if_fail(t != NULL && slot < t->n_slots);
    g_return_if_fail(builder(t)->state[slot] == SLOT_LIVE);
    add_slot_event(t, slot, GS_OP_FREE, GS_EV_DEFERRED);
    t->builder->state[slot] = SLOT_PENDING;
}

void gs_trace_add_free_done(gs_trace *t, uint32_t slot)
{
    g_return_if_fail(t != NULL && slot < t->n_slots);
    g_return_if_fail(builder(t)->state[slot] == SLOT_PENDING);
    add_slot_event(t, slot, GS_OP_FREE_DONE, 0);
    t->builder->state[slot] = SLOT_DONE;
}

void gs_trace_add_oom(gs_trace *t, const char *client, uint64_t stream, uint64_t size)
{
    g_return_if_fail(t != NULL && client != NULL);
    g_return_if_fail(gs_trace_valid_name(client, strlen(client)));
    g_return_if_fail(t->clients->len < GS_TRACE_MAX_CLIENTS || find_client(t, client) >= 0);
    g_return_if_fail(t->streams->len < GS_TRACE_MAX_STREAMS || find_stream(t, stream) >= 0);
    uint16_t c = builder_client(t, client);
    uint32_t s = builder_stream(t, stream);
    gs_event *e = push_event(t);
    e->op = GS_OP_OOM;
    e->slot = UINT32_MAX;
    e->size = size;
    e->client = c;
    e->stream = s;
}

void gs_trace_add_pool(gs_trace *t, gs_op op, uint64_t stream, uint32_t id, bool flag)
{
    g_return_if_fail(t != NULL && op >= GS_OP_POOL_BEGIN && op <= GS_OP_POOL_RELEASE);
    g_return_if_fail(id != 0 && id != UINT32_MAX);
    g_return_if_fail(t->streams->len < GS_TRACE_MAX_STREAMS || find_stream(t, stream) >= 0);
    uint16_t c = t->clients->len ? 0 : builder_client(t, "torch");
    uint32_t s = builder_stream(t, stream);
    gs_event *e = push_event(t);
    e->op = (uint8_t)op;
    e->slot = id;
    e->size = flag;
    e->client = c;
    e->stream = s;
}

void gs_trace_add_op(gs_trace *t, gs_op op, uint64_t size)
{
    g_return_if_fail(t != NULL && (op == GS_OP_EMPTY_CACHE || op == GS_OP_MARK));
    /* The builder API names no client here: use the first one (every line needs one), so a
     * built single-client trace stays single-client. */
    uint16_t c = t->clients->len ? 0 : builder_client(t, "torch");
    uint32_t s = t->streams->len ? 0 : builder_stream(t, 0);
    gs_event *e = push_event(t);
    e->op = (uint8_t)op;
    e->slot = UINT32_MAX;
    e->size = size;
    e->client = c;
    e->stream = s;
}

size_t gs_trace_pool_ids(const gs_trace *t, uint32_t **ids)
{
    *ids = NULL;
    if (!gs_trace_has_pools(t)) return 0; /* most traces: no pass over their events */
    GArray *a = NULL;
    /* a stand-in trace (libgpusim_torch.so's report without a recording) counts events it
     * does not hold: ev NULL */
    for (size_t i = 0; t->ev && i < t->n; i++) {
        const gs_event *e = &t->ev[i];
        if (!gs_event_is_pool(e)) continue;
        if (!a) a = g_array_new(FALSE, FALSE, sizeof(uint32_t));
        uint32_t id = gs_event_pool(e);
        bool seen = false;
        for (guint k = 0; k < a->len && !seen; k++) seen = g_array_index(a, uint32_t, k) == id;
        if (!seen) g_array_append_val(a, id);
    }
    if (!a) return 0;
    size_t n = a->len;
    *ids = (uint32_t *)(void *)g_array_free(a, FALSE);
    return n;
}
