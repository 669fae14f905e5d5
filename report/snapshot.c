/* snapshot.c - gpusim replay --export-snapshot: a simulated run as the pickle that
 * torch.cuda.memory._snapshot() writes and pytorch.org/memory_viz opens.
 *
 * The recorder is told of every event by the replay's hooks (sim/opts.h): each device operation
 * on a segment as it happens (the core's on_reserve: a cudaMalloc'd segment made or freed, a run
 * of pages mapped or unmapped), kept until the event is done; after an alloc is served, the
 * block; after every event, the heap. So the export has one segment entry per device operation,
 * as PyTorch's trace has (record_trace in map_block, unmap_block, alloc and release of a
 * segment), and as many as num_device_alloc and num_device_free count. (Comparing the heap's
 * segments after each event instead merged two unmaps of neighbouring pages in one event into
 * one entry, and a map undone in the same event into none.) At the end (or at the OOM the
 * replay stopped at) it copies the heap's segments and blocks, which become "segments".
 *
 * What memory_viz needs (PyTorch's torch/utils/viz/MemoryViz.js): it draws the final segments
 * and blocks, then walks "device_traces" backwards to find any earlier state, so the trace must
 * agree with the end state exactly: every block freed was allocated, every allocation lies in a
 * segment (or a mapped range) alive at the time. Its unpickler knows protocols 2 to 4 and a few
 * opcodes (no memo needed), and spreads each APPENDS batch into one JavaScript call, so lists
 * and dicts go out in batches of 1000, as Python's own pickler writes them.
 */
#include <string.h>

#include "report.h"

/* ---- a pickle writer: dicts, lists, str, int, bool, None, a pair (protocol 2) ---- */

typedef struct {
    GString *b;
    unsigned depth;
    unsigned count[16]; /* items since the open MARK, per open list or dict */
} pickler;

static void pk_int(pickler *p, int64_t v)
{
    if (v >= 0 && v < 256) {
        g_string_append_c(p->b, 'K');
        g_string_append_c(p->b, (char)v);
    } else if (v >= 0 && v < 65536) {
        g_string_append_c(p->b, 'M');
        g_string_append_c(p->b, (char)(v & 0xff));
        g_string_append_c(p->b, (char)(v >> 8));
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        uint32_t u = (uint32_t)(int32_t)v;
        g_string_append_c(p->b, 'J');
        for (int i = 0; i < 4; i++) g_string_append_c(p->b, (char)(u >> (8 * i)));
    } else { /* LONG1: little-endian two's complement, as few bytes as keep the sign */
        uint64_t u = (uint64_t)v;
        int n = 8;
        while (n > 1) {
            uint8_t top = (uint8_t)(u >> (8 * (n - 1))), next = (uint8_t)(u >> (8 * (n - 2)));
            if ((top == 0 && !(next & 0x80)) || (top == 0xff && (next & 0x80))) n--;
            else break;
        }
        g_string_append_c(p->b, (char)0x8a);
        g_string_append_c(p->b, (char)n);
        for (int i = 0; i < n; i++) g_string_append_c(p->b, (char)(u >> (8 * i)));
    }
}

static void pk_uint(pickler *p, uint64_t v)
{
    if (v <= INT64_MAX) {
        pk_int(p, (int64_t)v);
        return;
    }
    g_string_append_c(p->b, (char)0x8a); /* 9 bytes: the top one 0 keeps it positive */
    g_string_append_c(p->b, 9);
    for (int i = 0; i < 8; i++) g_string_append_c(p->b, (char)(v >> (8 * i)));
    g_string_append_c(p->b, 0);
}

/* BINUNICODE: a 4-byte length, then UTF-8 (a name that is not UTF-8 is made so). */
static void pk_str(pickler *p, const char *s)
{
    char *v = g_utf8_make_valid(s, -1);
    uint32_t n = (uint32_t)strlen(v);
    g_string_append_c(p->b, 'X');
    for (int i = 0; i < 4; i++) g_string_append_c(p->b, (char)(n >> (8 * i)));
    g_string_append_len(p->b, v, n);
    g_free(v);
}

static void pk_bool(pickler *p, bool v) { g_string_append_c(p->b, (char)(v ? 0x88 : 0x89)); }
static void pk_none(pickler *p) { g_string_append_c(p->b, 'N'); }

static void pk_pair(pickler *p, int64_t a, int64_t b)
{
    pk_int(p, a);
    pk_int(p, b);
    g_string_append_c(p->b, (char)0x86); /* TUPLE2 */
}

static void pk_open(pickler *p, char empty)
{
    g_assert(p->depth < G_N_ELEMENTS(p->count));
    g_string_append_c(p->b, empty);
    g_string_append_c(p->b, '(');
    p->count[p->depth++] = 0;
}
static void pk_list(pickler *p) { pk_open(p, ']'); }
static void pk_dict(pickler *p) { pk_open(p, '}'); }

/* After each list item or dict value: a batch of 1000 is closed and the next one opened. */
static void pk_next(pickler *p, char op)
{
    if (++p->count[p->depth - 1] == 1000) {
        g_string_append_c(p->b, op);
        g_string_append_c(p->b, '(');
        p->count[p->depth - 1] = 0;
    }
}
static void pk_item(pickler *p) { pk_next(p, 'e'); }  /* APPENDS */
static void pk_value(pickler *p) { pk_next(p, 'u'); } /* SETITEMS */
static void pk_close_list(pickler *p) { g_string_append_c(p->b, 'e'), p->depth--; }
static void pk_close_dict(pickler *p) { g_string_append_c(p->b, 'u'), p->depth--; }

/* key: int value, in an open dict */
static void kv_int(pickler *p, const char *k, int64_t v) { pk_str(p, k), pk_int(p, v), pk_value(p); }
static void kv_uint(pickler *p, const char *k, uint64_t v) { pk_str(p, k), pk_uint(p, v), pk_value(p); }
static void kv_str(pickler *p, const char *k, const char *v) { pk_str(p, k), pk_str(p, v), pk_value(p); }
static void kv_bool(pickler *p, const char *k, bool v) { pk_str(p, k), pk_bool(p, v), pk_value(p); }
/* A block's or an entry's stack frames: the trace keeps one, the allocation's top user frame
 * ("file:line:function", docs/trace-format.md "Frames"), written as PyTorch writes a frame,
 * [{"filename", "line", "name"}]; none (NULL) is an empty list, which memory_viz shows as
 * "allocated before _record_history was enabled". The file name may hold colons (a Windows
 * path): line and function are the last two fields. A frame that does not split so (a
 * hand-written trace may hold anything) goes whole into filename, line 0. */
static void kv_frames(pickler *p, const char *frame)
{
    pk_str(p, "frames");
    pk_list(p);
    if (frame) {
        const char *c2 = strrchr(frame, ':'), *c1 = NULL;
        for (const char *q = c2 ? c2 : frame; c2 && q-- > frame;)
            if (*q == ':') {
                c1 = q;
                break;
            }
        uint64_t line = 0;
        char *file, *name;
        bool digits = c1 && c1 > frame && c2 - c1 > 1 && c2 - c1 <= 10;
        for (const char *q = c1 ? c1 + 1 : NULL; digits && q < c2; q++) {
            digits = *q >= '0' && *q <= '9';
            line = line * 10 + (uint64_t)(*q - '0');
        }
        if (digits) {
            file = g_strndup(frame, (size_t)(c1 - frame));
            name = g_strdup(c2 + 1);
        } else {
            line = 0;
            file = g_strdup(frame);
            name = g_strdup("");
        }
        pk_dict(p);
        kv_str(p, "filename", file);
        kv_uint(p, "line", line);
        kv_str(p, "name", name);
        pk_close_dict(p);
        pk_item(p);
        g_free(file);
        g_free(name);
    }
    pk_close_list(p);
    pk_value(p);
}

/* ---- the recorder ---- */

typedef enum {
    A_ALLOC, A_FREE_REQUESTED, A_FREE_COMPLETED, A_SEGMENT_ALLOC, A_SEGMENT_FREE, A_SEGMENT_MAP,
    A_SEGMENT_UNMAP, A_OOM, A_SNAPSHOT
} action;
static const char *const action_names[] = {
    "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
    "segment_unmap", "oom", "snapshot"};

typedef struct {
    uint8_t action;
    uint32_t stream;       /* the trace's stream index */
    uint64_t addr, size, time_us, device_free;
    const char *frame;     /* alloc, oom: the request's frame (the trace's string), or NULL */
} entry;

typedef struct {
    uint64_t addr, size, requested;
    uint32_t stream;
    uint8_t state;         /* 0: not live, GS_BLOCK_ALLOCATED or GS_BLOCK_PENDING */
    const char *frame;     /* its alloc's frame, or NULL */
} slot_copy;

typedef struct {           /* a "segments" entry at the end */
    uint64_t addr, total;
    uint32_t stream;
    bool small, expandable;
    uint32_t pool_id;      /* its private pool's id in the trace; 0: the ordinary pools */
    size_t first, n;       /* its blocks in end_blocks */
} end_seg;

typedef struct {
    uint64_t size, requested;
    uint8_t state;
    const char *frame;     /* a live block's alloc's frame, or NULL */
} end_block;

struct gs_snapshot_rec {
    const gs_trace *t;
    uint32_t device;
    GArray *trace;         /* entry */
    GArray *ops;           /* entry: the segment operations of the event under way */
    slot_copy *slots;      /* t->n_slots */
    size_t n_pending;
    uint64_t ooms;         /* num_ooms at the last look */
    bool ended;            /* observe_end was called */
    GArray *end_segs, *end_blocks;
};

gs_snapshot_rec *gs_snapshot_rec_new(const gs_trace *t)
{
    gs_snapshot_rec *r = g_new0(gs_snapshot_rec, 1);
    r->t = t;
    uint32_t *ids = NULL;
    if (gs_trace_devices(t, &ids) >= 1) r->device = ids[0];
    g_free(ids);
    r->trace = g_array_new(FALSE, FALSE, sizeof(entry));
    r->ops = g_array_new(FALSE, FALSE, sizeof(entry));
    r->slots = g_new0(slot_copy, t->n_slots ? t->n_slots : 1);
    r->end_segs = g_array_new(FALSE, FALSE, sizeof(end_seg));
    r->end_blocks = g_array_new(FALSE, FALSE, sizeof(end_block));
    return r;
}

void gs_snapshot_rec_free(gs_snapshot_rec *r)
{
    if (!r) return;
    g_array_free(r->trace, TRUE);
    g_array_free(r->ops, TRUE);
    g_array_free(r->end_segs, TRUE);
    g_array_free(r->end_blocks, TRUE);
    g_free(r->slots);
    g_free(r);
}

static void add(gs_snapshot_rec *r, action a, uint64_t addr, uint64_t size, uint32_t stream,
                uint64_t time_us)
{
    entry e = {.action = (uint8_t)a, .addr = addr, .size = size, .stream = stream,
               .time_us = time_us};
    g_array_append_val(r->trace, e);
}

/* Frees the core completed on its own (a cache flush synchronises every pending free): their
 * free_completed, before the segments they were in may go. */
static void sync_pending(gs_snapshot_rec *r, const gs_heap *h, uint64_t time_us)
{
    if (!r->n_pending) return;
    GHashTable *still = g_hash_table_new(g_int64_hash, g_int64_equal);
    for (const gs_segment *s = gs_heap_segments(h); s; s = s->next)
        for (const gs_block *b = s->head; b; b = b->next)
            if (b->state == GS_BLOCK_PENDING) g_hash_table_add(still, (gpointer)&b->addr);
    for (size_t i = 0; i < r->t->n_slots; i++) {
        slot_copy *c = &r->slots[i];
        if (c->state != GS_BLOCK_PENDING || g_hash_table_contains(still, &c->addr)) continue;
        add(r, A_FREE_COMPLETED, c->addr, c->requested, c->stream, time_us);
        c->state = 0;
        r->n_pending--;
    }
    g_hash_table_destroy(still);
}

void gs_snapshot_observe_reserve(const gs_segment *s, uint64_t addr, int64_t bytes, void *ud)
{
    gs_snapshot_rec *r = ud;
    if (!bytes) return;
    action a = s->expandable ? (bytes > 0 ? A_SEGMENT_MAP : A_SEGMENT_UNMAP)
                             : (bytes > 0 ? A_SEGMENT_ALLOC : A_SEGMENT_FREE);
    entry e = {.action = (uint8_t)a,
               .addr = addr,
               .size = bytes > 0 ? (uint64_t)bytes : (uint64_t)-bytes,
               .stream = s->stream};
    g_array_append_val(r->ops, e);
}

/* The event's segment operations, in the order they were made, at the event's time: after the
 * frees the core completed on its own (a cache flush synchronises every pending free before it
 * releases a segment). */
static void flush_ops(gs_snapshot_rec *r, const gs_heap *h, uint64_t time_us)
{
    sync_pending(r, h, time_us);
    for (guint i = 0; i < r->ops->len; i++) {
        entry *e = &g_array_index(r->ops, entry, i);
        e->time_us = time_us;
        g_array_append_val(r->trace, *e);
    }
    g_array_set_size(r->ops, 0);
}

void gs_snapshot_observe_alloc(const gs_heap *h, const gs_event *e, const gs_block *b, void *ud)
{
    gs_snapshot_rec *r = ud;
    flush_ops(r, h, e->time_us);
    slot_copy *c = &r->slots[e->slot];
    /* e is an event of r->t (the replay's), so its index is its place there */
    const char *frame = gs_trace_frame(r->t, (size_t)(e - r->t->ev));
    *c = (slot_copy){.addr = b->addr, .size = b->size, .requested = e->size, .stream = e->stream,
                     .state = GS_BLOCK_ALLOCATED, .frame = frame};
    add(r, A_ALLOC, b->addr, e->size, e->stream, e->time_us);
    g_array_index(r->trace, entry, r->trace->len - 1).frame = frame;
}

void gs_snapshot_observe(const gs_heap *h, const gs_event *e, size_t index, void *ud)
{
    gs_snapshot_rec *r = ud;
    slot_copy *c = e->slot < r->t->n_slots ? &r->slots[e->slot] : NULL;
    switch ((gs_op)e->op) {
    case GS_OP_FREE:
        if (!c || c->state != GS_BLOCK_ALLOCATED) break; /* its alloc failed and was skipped */
        add(r, A_FREE_REQUESTED, c->addr, c->requested, c->stream, e->time_us);
        if (e->flags & GS_EV_DEFERRED) {
            c->state = GS_BLOCK_PENDING;
            r->n_pending++;
        } else {
            add(r, A_FREE_COMPLETED, c->addr, c->requested, c->stream, e->time_us);
            c->state = 0;
        }
        break;
    case GS_OP_FREE_DONE:
        if (c && c->state == GS_BLOCK_PENDING) {
            add(r, A_FREE_COMPLETED, c->addr, c->requested, c->stream, e->time_us);
            c->state = 0;
            r->n_pending--;
        }
        break;
    default:
        break;
    }
    flush_ops(r, h, e->time_us);
    if (e->op == GS_OP_ALLOC || e->op == GS_OP_OOM) {
        uint64_t ooms = gs_heap_stats(h)->num_ooms;
        if (ooms > r->ooms) {
            /* PyTorch's entry says what cudaMemGetInfo had free; here, what the limit left */
            uint64_t lim = gs_heap_limit(h), res = gs_heap_reserved(h);
            entry o = {.action = A_OOM, .size = e->size, .stream = e->stream,
                       .time_us = e->time_us, .device_free = lim > res ? lim - res : 0,
                       .frame = r->t->n ? gs_trace_frame(r->t, index % r->t->n) : NULL};
            g_array_append_val(r->trace, o);
            r->ooms = ooms;
        }
    }
}

void gs_snapshot_observe_end(const gs_heap *h, void *ud)
{
    gs_snapshot_rec *r = ud;
    r->ended = true;
    uint64_t t_end = r->trace->len ? g_array_index(r->trace, entry, r->trace->len - 1).time_us : 0;
    add(r, A_SNAPSHOT, 0, 0, 0, t_end);
    /* oldest segment first, as PyTorch lists them by address within a pool: by address here */
    /* a live block's frame is its slot's: by address, since the heap's blocks name no slot */
    GHashTable *frame_at = g_hash_table_new(g_int64_hash, g_int64_equal);
    for (size_t k = 0; k < r->t->n_slots; k++)
        if (r->slots[k].state && r->slots[k].frame)
            g_hash_table_insert(frame_at, &r->slots[k].addr, (gpointer)r->slots[k].frame);
    GPtrArray *ss = g_ptr_array_new();
    for (const gs_segment *s = gs_heap_segments(h); s; s = s->next) g_ptr_array_add(ss, (gpointer)s);
    for (guint i = ss->len; i-- > 0;) {
        const gs_segment *s = ss->pdata[i];
        end_seg cur = {0};
        bool open = false;
        for (const gs_block *b = s->head; b; b = b->next) {
            if (b->state == GS_BLOCK_UNMAPPED) { /* an expandable segment: a segment per run */
                if (open) g_array_append_val(r->end_segs, cur);
                open = false;
                continue;
            }
            if (!open) {
                cur = (end_seg){.addr = b->addr, .stream = s->stream, .small = b->type == GS_STAT_SMALL,
                                .expandable = s->expandable, .first = r->end_blocks->len,
                                .pool_id = gs_heap_pool_id(h, gs_pool_private(s->pool))};
                open = true;
            }
            end_block eb = {.size = b->size, .requested = b->requested, .state = b->state};
            if (b->state == GS_BLOCK_ALLOCATED || b->state == GS_BLOCK_PENDING)
                eb.frame = g_hash_table_lookup(frame_at, &b->addr);
            g_array_append_val(r->end_blocks, eb);
            cur.total += b->size;
            cur.n++;
        }
        if (open) g_array_append_val(r->end_segs, cur);
    }
    g_ptr_array_free(ss, TRUE);
    g_hash_table_destroy(frame_at);
}

static uint64_t raw_stream(const gs_trace *t, uint32_t s)
{
    return s < t->streams->len ? g_array_index(t->streams, uint64_t, s) : s;
}

gboolean gs_snapshot_write(const gs_snapshot_rec *r, const char *path, const char *trace_name,
                           const char *policy, uint64_t capacity, uint64_t device_total,
                           GError **err)
{
    pickler p = {.b = g_string_new(NULL)};
    g_string_append_len(p.b, "\x80\x02", 2); /* PROTO 2 */
    pk_dict(&p);

    pk_str(&p, "segments");
    pk_list(&p);
    for (guint i = 0; i < r->end_segs->len; i++) {
        const end_seg *s = &g_array_index(r->end_segs, end_seg, i);
        uint64_t allocated = 0, active = 0, requested = 0;
        for (size_t k = 0; k < s->n; k++) {
            const end_block *b = &g_array_index(r->end_blocks, end_block, s->first + k);
            if (b->state == GS_BLOCK_ALLOCATED) allocated += b->size;
            if (b->state == GS_BLOCK_ALLOCATED || b->state == GS_BLOCK_PENDING) {
                active += b->size;
                requested += b->requested;
            }
        }
        pk_dict(&p);
        kv_int(&p, "device", r->device);
        kv_uint(&p, "address", s->addr);
        kv_uint(&p, "total_size", s->total);
        kv_uint(&p, "allocated_size", allocated);
        kv_uint(&p, "active_size", active);
        kv_uint(&p, "requested_size", requested);
        kv_uint(&p, "stream", raw_stream(r->t, s->stream));
        kv_str(&p, "segment_type", s->small ? "small" : "large");
        /* PyTorch's MempoolId_t: (0, 0) for the ordinary pools; a private pool's as (id, 0),
         * the shape PyTorch gives a graph's pool ((1, 0) for the first, as in the graph and
         * graphpool references), since the trace keeps only the pool's number (docs/cli.md) */
        pk_str(&p, "segment_pool_id");
        pk_pair(&p, s->pool_id, 0);
        pk_value(&p);
        kv_bool(&p, "is_expandable", s->expandable);
        kv_frames(&p, NULL);
        pk_str(&p, "blocks");
        pk_list(&p);
        uint64_t addr = s->addr;
        for (size_t k = 0; k < s->n; k++) {
            const end_block *b = &g_array_index(r->end_blocks, end_block, s->first + k);
            bool live = b->state == GS_BLOCK_ALLOCATED || b->state == GS_BLOCK_PENDING;
            pk_dict(&p);
            kv_uint(&p, "address", addr);
            kv_uint(&p, "size", b->size);
            kv_uint(&p, "requested_size", live ? b->requested : 0);
            kv_str(&p, "state", b->state == GS_BLOCK_ALLOCATED ? "active_allocated"
                                : b->state == GS_BLOCK_PENDING ? "active_pending_free"
                                                               : "inactive");
            kv_frames(&p, live ? b->frame : NULL);
            pk_close_dict(&p);
            pk_item(&p);
            addr += b->size;
        }
        pk_close_list(&p);
        pk_value(&p);
        pk_close_dict(&p);
        pk_item(&p);
    }
    pk_close_list(&p);
    pk_value(&p);

    /* a list per device up to this one: memory_viz indexes device_traces by device */
    pk_str(&p, "device_traces");
    pk_list(&p);
    for (uint32_t d = 0; d < r->device; d++) {
        pk_list(&p);
        pk_close_list(&p);
        pk_item(&p);
    }
    pk_list(&p);
    for (guint i = 0; i < r->trace->len; i++) {
        const entry *e = &g_array_index(r->trace, entry, i);
        pk_dict(&p);
        kv_str(&p, "action", action_names[e->action]);
        kv_uint(&p, "addr", e->addr);
        kv_uint(&p, "size", e->size);
        kv_uint(&p, "stream", raw_stream(r->t, e->stream));
        kv_uint(&p, "time_us", e->time_us);
        if (e->action == A_OOM) kv_uint(&p, "device_free", e->device_free);
        kv_frames(&p, e->frame);
        pk_close_dict(&p);
        pk_item(&p);
    }
    pk_close_list(&p);
    pk_item(&p);
    pk_close_list(&p);
    pk_value(&p);

    pk_str(&p, "allocator_settings");
    pk_dict(&p);
    const char *colon = strchr(policy, ':');
    kv_str(&p, "PYTORCH_CUDA_ALLOC_CONF", colon ? colon + 1 : "");
    kv_bool(&p, "expandable_segments", strstr(policy, "expandable_segments:True") != NULL);
    pk_close_dict(&p);
    pk_value(&p);

    /* not PyTorch's: what this snapshot is (memory_viz ignores keys it does not know) */
    pk_str(&p, "gpusim");
    pk_dict(&p);
    kv_bool(&p, "simulated", true);
    kv_str(&p, "trace", trace_name);
    kv_str(&p, "policy", policy);
    if (capacity) kv_uint(&p, "capacity_bytes", capacity);
    else pk_str(&p, "capacity_bytes"), pk_none(&p), pk_value(&p);
    kv_uint(&p, "device_total_bytes", device_total);
    pk_close_dict(&p);
    pk_value(&p);

    pk_close_dict(&p);
    g_string_append_c(p.b, '.'); /* STOP */
    g_assert(p.depth == 0);
    gboolean ok = gs_write_whole(path, p.b->str, p.b->len, err);
    g_string_free(p.b, TRUE);
    return ok;
}
