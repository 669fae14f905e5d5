/* snaprows.c - a device's snapshot events made into the trace's rows, in C: build_trace's pass
 * (traces/gsconvert/build.py, _scan), done by gpusim read-snapshot beside the columns it hands
 * the converter (docs/speed.md, "The snapshot reader in C").
 *
 * The pass was the converter's largest cost once the snapshot was read in C: about 0.6 s of
 * Python for 431k events. It is the same pass over the same columns, so the converter takes
 * these rows only where it would have run it on exactly those columns (no inference added an
 * event, one device had events); otherwise it makes its own. Where the pass would raise (an
 * alloc at an address still in use, a free of a block already freed, a completion of a block
 * never freed) this writes no rows, and the converter's own pass reports it with its message:
 * one judge, as for the reader.
 *
 * The section, after a device's columns (native byte order):
 *   u8 1 (0: no rows, nothing follows);
 *   u64 rows, then the columns, each rows long: u64 t, u8 op, u64 stream, i64 id, u64 size,
 *   u32 frame;
 *   u64 each: allocs, completions dropped, size mismatches, times clamped, deferred frees,
 *   ooms, the last row's time, whether a segment was freed that was not seen made;
 *   u64 synthesized blocks, each u64 size, u64 stream (in the order met);
 *   u64 pending frees, each i64 addr, i64 id, u64 size, u64 stream (in the order freed);
 *   u64 live blocks, each i64 addr;
 *   u64 live segments, each i64 addr;
 *   u64 allocator events, each u8 action, i64 addr, u64 size, u64 rows before it.
 */
#include "trace-int.h"

#include <string.h>

/* the converter's action and row codes (traces/gsconvert/model.py: _ACTIONS, _OPS) */
enum { A_ALLOC, A_FREE, A_FREE_DONE, A_SEG_ALLOC, A_SEG_FREE, A_SEG_MAP, A_SEG_UNMAP, A_OOM };
enum { O_ALLOC, O_FREE, O_FREE_DONE, O_OOM };
#define EVENT_BYTES 25 /* an allocator event as written: u8 action, i64 addr, u64 size, u64 row */

typedef struct {
    int64_t addr;
    int64_t id; /* the alloc's number, or -k for the k-th synthesized block */
    uint64_t size, stream;
    uint64_t order; /* when it became pending */
    uint8_t used;   /* the slot holds a block */
    uint8_t freed;  /* pending: freed, its completion not yet seen */
} block;

/* The open blocks by address: open addressing, linear probing, deletion by moving back the
 * blocks after a hole (no tombstones), at most half full. A GHashTable cost about 300
 * instructions an event here, a third of the pass. */
typedef struct {
    block *slot;
    size_t mask, n;
    int shift; /* 64 less log2 of the slots */
} table;

/* The slot an address starts from: the product's top bits (Fibonacci hashing), which every bit
 * of the address moves. Bits from the middle of it left addresses equal modulo 2^(20 + log2
 * slots) on one slot: 200,000 allocations 1 TiB apart took 55 s. */
static size_t home(const table *t, int64_t addr)
{
    return (size_t)(((uint64_t)addr * UINT64_C(0x9E3779B97F4A7C15)) >> t->shift);
}

static block *find(const table *t, int64_t addr)
{
    for (size_t i = home(t, addr);; i = (i + 1) & t->mask) {
        block *b = &t->slot[i];
        if (!b->used) return NULL;
        if (b->addr == addr) return b;
    }
}

static block *add(table *t, const block *b);

static void grow(table *t)
{
    table old = *t;
    t->mask = 2 * old.mask + 1;
    t->shift--;
    t->slot = g_new0(block, t->mask + 1);
    t->n = 0;
    for (size_t i = 0; i <= old.mask; i++)
        if (old.slot[i].used) add(t, &old.slot[i]);
    g_free(old.slot);
}

static block *add(table *t, const block *b)
{
    if (2 * (t->n + 1) > t->mask + 1) grow(t);
    size_t i = home(t, b->addr);
    while (t->slot[i].used) i = (i + 1) & t->mask;
    t->slot[i] = *b;
    t->slot[i].used = 1;
    t->n++;
    return &t->slot[i];
}

static void drop(table *t, block *b)
{
    size_t i = (size_t)(b - t->slot), j = i;
    t->n--;
    for (;;) {
        t->slot[i].used = 0;
        for (;;) {
            j = (j + 1) & t->mask;
            if (!t->slot[j].used) return;
            size_t k = home(t, t->slot[j].addr);
            /* stays where it is unless its home lies cyclically outside (i, j] */
            if (i <= j ? (i < k && k <= j) : (i < k || k <= j)) continue;
            break;
        }
        t->slot[i] = t->slot[j];
        i = j;
    }
}

typedef struct {
    uint64_t *t, *stream, *size;
    int64_t *id;
    uint8_t *op;
    uint32_t *frame;
    size_t rows;
    GArray *synth;  /* u64 size, u64 stream pairs */
    GArray *events; /* allocator events, as written (EVENT_BYTES each) */
    uint64_t nalloc, dropped, mismatch, clamped, deferred, ooms, last_t, unseen;
} pass;

static void put_array(GString *o, const GArray *a)
{
    gs_put(o, a->data, (size_t)a->len * g_array_get_element_size((GArray *)a));
}

static void add_event(pass *p, uint8_t action, int64_t addr, uint64_t size)
{
    uint64_t seq = p->rows;
    char rec[EVENT_BYTES];
    rec[0] = (char)action;
    memcpy(rec + 1, &addr, 8);
    memcpy(rec + 9, &size, 8);
    memcpy(rec + 17, &seq, 8);
    g_array_append_vals(p->events, rec, 1);
}

/* The row of event k, or FALSE where the converter's pass would raise. *row: whether it makes
 * a row (op, id, size, frame set). */
static gboolean step(pass *p, table *blocks, GHashTable *segments, const gs_snap_columns *c,
                     size_t k, uint64_t *order, gboolean *row, uint8_t *op, int64_t *id,
                     uint64_t *size, uint32_t *frame)
{
    int64_t addr = c->addr[k];
    block *b = find(blocks, addr);
    *row = TRUE;
    *size = c->size[k];
    *frame = 0;
    switch (c->action[k]) {
    case A_ALLOC:
        if (b) return FALSE;
        b = add(blocks, &(block){addr, (int64_t)++p->nalloc, c->size[k], c->stream[k], 0, 1, 0});
        *op = O_ALLOC;
        *id = b->id;
        *frame = c->frame[k];
        return TRUE;
    case A_FREE: {
        if (b && b->freed) return FALSE; /* freed twice */
        block f;
        if (!b) { /* allocated before the log began */
            uint64_t pair[2] = {c->size[k], c->stream[k]};
            g_array_append_vals(p->synth, pair, 2);
            f = (block){addr, -(int64_t)(p->synth->len / 2), c->size[k], c->stream[k], 0, 1, 0};
        } else {
            f = *b;
            p->mismatch += b->size != c->size[k];
            drop(blocks, b);
        }
        *op = O_FREE;
        *id = f.id;
        *size = f.size;
        if (c->deferred[k]) {
            f.freed = 1;
            f.order = (*order)++;
            add(blocks, &f);
        }
        return TRUE;
    }
    case A_FREE_DONE:
        if (b && !b->freed) return FALSE; /* never freed */
        if (!b) {
            p->dropped++;
            *row = FALSE;
            return TRUE;
        }
        p->deferred++;
        *op = O_FREE_DONE;
        *id = b->id;
        *size = b->size;
        drop(blocks, b);
        return TRUE;
    case A_OOM:
        add_event(p, A_OOM, addr, c->size[k]);
        p->ooms++;
        *op = O_OOM;
        *id = 0;
        *frame = c->frame[k];
        return TRUE;
    default:
        if (c->action[k] == A_SEG_ALLOC) {
            if (!g_hash_table_contains(segments, &addr))
                g_hash_table_add(segments, g_memdup2(&addr, sizeof addr));
        } else if (c->action[k] == A_SEG_FREE) {
            if (!g_hash_table_remove(segments, &addr)) p->unseen = 1;
        }
        add_event(p, c->action[k], addr, c->size[k]);
        *row = FALSE;
        return TRUE;
    }
}

static gint by_order(gconstpointer a, gconstpointer b)
{
    const block *x = *(block *const *)a, *y = *(block *const *)b;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* What the pass leaves: the rows, its counts, and the blocks and segments still open. */
static void put_pass(GString *o, const pass *p, const table *blocks, GHashTable *segments)
{
    size_t n = p->rows;
    gs_put_u64(o, n);
    gs_put(o, p->t, 8 * n);
    gs_put(o, p->op, n);
    gs_put(o, p->stream, 8 * n);
    gs_put(o, p->id, 8 * n);
    gs_put(o, p->size, 8 * n);
    gs_put(o, p->frame, 4 * n);
    uint64_t counts[] = {p->nalloc,   p->dropped, p->mismatch, p->clamped,
                         p->deferred, p->ooms,    p->last_t,   p->unseen};
    gs_put(o, counts, sizeof counts);
    gs_put_u64(o, p->synth->len / 2);
    put_array(o, p->synth);

    GPtrArray *pending = g_ptr_array_new();
    GArray *live = g_array_new(FALSE, FALSE, 8);
    for (size_t i = 0; i <= blocks->mask; i++) {
        block *b = &blocks->slot[i];
        if (!b->used) continue;
        if (b->freed) g_ptr_array_add(pending, b);
        else g_array_append_val(live, b->addr);
    }
    /* the converter's dict gives its pending frees in the order they were freed */
    g_ptr_array_sort(pending, by_order);
    gs_put_u64(o, pending->len);
    for (guint k = 0; k < pending->len; k++) {
        const block *b = g_ptr_array_index(pending, k);
        int64_t f[4] = {b->addr, b->id, (int64_t)b->size, (int64_t)b->stream};
        gs_put(o, f, sizeof f);
    }
    gs_put_u64(o, live->len);
    put_array(o, live);
    gs_put_u64(o, g_hash_table_size(segments));
    GHashTableIter it;
    gpointer key;
    g_hash_table_iter_init(&it, segments);
    while (g_hash_table_iter_next(&it, &key, NULL)) gs_put(o, key, 8);
    gs_put_u64(o, p->events->len);
    put_array(o, p->events);
    g_ptr_array_free(pending, TRUE);
    g_array_free(live, TRUE);
}

void gs_snapshot_put_rows(GString *out, const gs_snap_columns *c)
{
    size_t n = c->n ? c->n : 1;
    pass p = {
        .t = g_new(uint64_t, n),
        .stream = g_new(uint64_t, n),
        .size = g_new(uint64_t, n),
        .id = g_new(int64_t, n),
        .op = g_new(uint8_t, n),
        .frame = g_new(uint32_t, n),
        .synth = g_array_new(FALSE, FALSE, 8),
        .events = g_array_new(FALSE, FALSE, EVENT_BYTES),
    };
    table blocks = {g_new0(block, 1024), 1023, 0, 64 - 10};
    GHashTable *segments = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    gboolean ok = TRUE;
    int64_t base = 0; /* the first row's time */
    uint64_t order = 0;
    for (size_t k = 0; k < c->n && ok; k++) {
        gboolean row;
        uint8_t op;
        int64_t id;
        uint64_t size;
        uint32_t frame;
        ok = step(&p, &blocks, segments, c, k, &order, &row, &op, &id, &size, &frame);
        if (!ok || !row) continue;
        int64_t t = c->time[k];
        if (!p.rows) base = t;
        /* the time from the first row's, held non-decreasing (a clock that went back) */
        uint64_t rel = t >= base ? (uint64_t)t - (uint64_t)base : 0;
        if (t < base || rel < p.last_t) {
            p.clamped++;
            rel = p.last_t;
        }
        p.last_t = rel;
        size_t r = p.rows++;
        p.t[r] = rel;
        p.op[r] = op;
        p.stream[r] = c->stream[k];
        p.id[r] = id;
        p.size[r] = size;
        p.frame[r] = frame;
    }
    g_string_append_c(out, (char)ok);
    if (ok) put_pass(out, &p, &blocks, segments);
    g_free(blocks.slot);
    g_hash_table_destroy(segments);
    g_free(p.t);
    g_free(p.stream);
    g_free(p.size);
    g_free(p.id);
    g_free(p.op);
    g_free(p.frame);
    g_array_free(p.synth, TRUE);
    g_array_free(p.events, TRUE);
}
