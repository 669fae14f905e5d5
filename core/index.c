/* index.c - the free-block indexes and the policies' view of them (gs_pool_*, core.h).
 *
 * A pool's free blocks are kept in PyTorch's order (stream, size, addr) by segregated size
 * classes (core-int.h, gs_findex): per stream, 64 classes per power of two found through two
 * bitmaps, each class a sorted list or, once a walk along it gets long (GS_CLASS_WALK), a
 * treap by (size, addr). A best fit walks or descends one class (a handful of blocks of nearly the
 * same size) or none; removing a known block splices it from its list or descends its class's
 * treap; the pool's largest free block is the root of a tournament over its streams' largest,
 * brought up to date when asked for. The hot paths (lower bound, insert, remove) are static inline
 * in core-int.h, with the treaps' insertion and unlinking; here are the cold paths (a stream's or a
 * row's first use, refreshing the largest), stepping through the order, and the policies' view.
 *
 * The treaps are intrusive (their links live in the blocks), so inserting and removing never
 * allocate; priorities come from a hash of the address, so a replay is deterministic. A pool's
 * unmapped blocks (PyTorch's pool.unmapped, expandable segments) are one treap keyed
 * (stream, addr): their key's size half is 0.
 */
#include "core-int.h"

/* A segment whose blocks the index could not key: a programmer's error (requests are screened
 * against GS_MAX_REQUEST, devices against GS_MAX_DEVICE_BYTES), so it stops the program as an
 * assertion would. */
void gs_segment_too_large(const gs_segment *s)
{
    g_error("core: a segment of %" G_GUINT64_FORMAT " bytes is beyond the index's 2^48",
            s->size);
}

/* ---- the size-class index: cold paths ---- */

/* A walk along class sl of row r got too long: its list becomes a treap, which it stays until
 * it is empty. */
void gs_class_to_tree(gs_frow *r, unsigned sl)
{
    gs_block *b = r->cls[sl];
    r->cls[sl] = NULL;
    r->tree |= UINT64_C(1) << sl;
    while (b) {
        gs_block *next = b->left; /* treap_insert rewrites b's links */
        treap_insert(&r->cls[sl], b);
        b = next;
    }
}

/* Recompute the tournament above leaf i. */
static void tournament_fix(gs_findex *x, uint32_t i)
{
    for (i = (x->ns + i) >> 1; i; i >>= 1) x->tmax[i] = MAX(x->tmax[2 * i], x->tmax[2 * i + 1]);
}

/* Stream's part of x, on its first free block: the stream table grows to a power of two. */
gs_fstream *gs_findex_stream_new(gs_findex *x, uint32_t stream)
{
    g_assert(stream < GS_MAX_STREAMS);
    if (stream >= x->ns) {
        uint32_t ns = x->ns ? x->ns : 1, old = x->ns;
        while (ns <= stream) ns *= 2;
        x->s = g_renew(gs_fstream *, x->s, ns);
        memset(x->s + old, 0, (ns - old) * sizeof *x->s);
        g_free(x->tmax);
        x->tmax = g_new0(uint64_t, 2 * ns);
        x->ns = ns;
        for (uint32_t i = 0; i < old; i++) x->tmax[ns + i] = x->s[i] ? x->s[i]->largest : 0;
        for (uint32_t i = ns - 1; i >= 1; i--)
            x->tmax[i] = MAX(x->tmax[2 * i], x->tmax[2 * i + 1]);
    }
    x->s[stream] = g_new0(gs_fstream, 1);
    x->s[stream]->addr_order = x->by_addr;
    return x->s[stream];
}

gs_frow *gs_findex_row_new(gs_fstream *s, unsigned fl)
{
    s->rows[fl] = g_new0(gs_frow, 1);
    return s->rows[fl];
}

/* Stream s's largest may have changed: put it on the list to refresh. */
void gs_findex_mark(gs_findex *x, gs_fstream *s, uint32_t stream)
{
    s->dirty = true;
    if (x->ndirty == x->dirty_cap) {
        x->dirty_cap = x->dirty_cap ? 2 * x->dirty_cap : 8;
        x->dirty = g_renew(uint32_t, x->dirty, x->dirty_cap);
    }
    x->dirty[x->ndirty++] = stream;
}

static gs_block *stream_first(const gs_fstream *s)
{
    unsigned fl = (unsigned)__builtin_ctzll(s->rows_bits);
    const gs_frow *r = s->rows[fl];
    return class_min(r, (unsigned)__builtin_ctzll(r->bits));
}

static gs_block *stream_last(const gs_fstream *s)
{
    unsigned fl = 63u - (unsigned)__builtin_clzll(s->rows_bits);
    const gs_frow *r = s->rows[fl];
    return class_max(r, 63u - (unsigned)__builtin_clzll(r->bits));
}

/* Bring the marked streams' largest, and the tournament above them, up to date. */
void gs_findex_refresh(gs_findex *x)
{
    for (uint32_t k = 0; k < x->ndirty; k++) {
        uint32_t i = x->dirty[k];
        gs_fstream *s = x->s[i];
        s->largest = s->rows_bits ? stream_last(s)->size : 0;
        s->dirty = false;
        x->tmax[x->ns + i] = s->largest;
        tournament_fix(x, i);
    }
    x->ndirty = 0;
}

void gs_findex_free(gs_findex *x)
{
    for (uint32_t i = 0; i < x->ns; i++) {
        if (!x->s[i]) continue;
        for (unsigned fl = 0; fl < GS_FL; fl++) g_free(x->s[i]->rows[fl]);
        g_free(x->s[i]);
    }
    g_free(x->s);
    g_free(x->tmax);
    g_free(x->dirty);
    g_free(x->whole);
    /* empty again, still of its policy's kind: a private pool's slot is freed and reused */
    bool by_addr = x->by_addr;
    memset(x, 0, sizeof *x);
    x->by_addr = by_addr;
}

/* ---- stepping through the order ---- */

/* Whether stream i holds free blocks. */
static bool stream_has(const gs_findex *x, uint32_t i) { return x->s[i] && x->s[i]->rows_bits; }

/* The first stream >= from that holds blocks, or ns. A scan of the stream table: only steps
 * across streams (the policies' walks, their lower bound past a stream's end) take it. */
static uint32_t stream_from(const gs_findex *x, uint32_t from)
{
    uint32_t i = from;
    while (i < x->ns && !stream_has(x, i)) i++;
    return MIN(i, x->ns);
}

/* The last stream < before that holds blocks, or UINT32_MAX. */
static uint32_t stream_before(const gs_findex *x, uint32_t before)
{
    for (uint32_t i = MIN(before, x->ns); i-- > 0;)
        if (stream_has(x, i)) return i;
    return UINT32_MAX;
}

gs_block *gs_findex_first_from(const gs_findex *x, uint32_t stream)
{
    uint32_t i = stream_from(x, stream);
    return i < x->ns ? stream_first(x->s[i]) : NULL;
}

static gs_block *findex_last(const gs_findex *x)
{
    uint32_t i = stream_before(x, x->ns);
    return i != UINT32_MAX ? stream_last(x->s[i]) : NULL;
}

/* The first block of b's stream after b's class: the smallest of the next class that holds
 * any, or NULL. */
gs_block *gs_findex_after_class(const gs_findex *x, const gs_block *b)
{
    const gs_fstream *s = x->s[b->stream];
    unsigned fl = b->fl, sl = b->sl;
    const gs_frow *r = s->rows[fl];
    uint64_t above = r->bits >> sl >> 1;
    if (above) return class_min(r, sl + 1 + (unsigned)__builtin_ctzll(above));
    uint64_t rows = s->rows_bits >> fl >> 1;
    if (rows) {
        r = s->rows[fl + 1 + __builtin_ctzll(rows)];
        return class_min(r, (unsigned)__builtin_ctzll(r->bits));
    }
    return NULL;
}

gs_block *gs_findex_prev(const gs_findex *x, const gs_block *b)
{
    const gs_fstream *s = x->s[b->stream];
    unsigned sl, fl = size_class(b->size, &sl);
    const gs_frow *r = s->rows[fl];
    gs_block *n = class_before(r, sl, b);
    if (n) return n;
    uint64_t below = r->bits & ((UINT64_C(1) << sl) - 1);
    if (below) return class_max(r, 63u - (unsigned)__builtin_clzll(below));
    uint64_t rows = s->rows_bits & ((UINT64_C(1) << fl) - 1);
    if (rows) {
        r = s->rows[63 - __builtin_clzll(rows)];
        return class_max(r, 63u - (unsigned)__builtin_clzll(r->bits));
    }
    uint32_t i = stream_before(x, b->stream);
    return i != UINT32_MAX ? stream_last(x->s[i]) : NULL;
}

/* ---- the policies' view (core.h) ---- */

gs_block *gs_pool_lower_bound(const gs_heap *h, unsigned pool, uint32_t stream, uint64_t size)
{
    const gs_findex *x = &h->pools[pool].blocks;
    gs_fpos at;
    gs_block *b = findex_lower_bound_in(x, stream, size, &at);
    return b ? b : gs_findex_first_from(x, stream + 1);
}
gs_block *gs_pool_first(const gs_heap *h, unsigned pool)
{
    return gs_findex_first_from(&h->pools[pool].blocks, 0);
}
gs_block *gs_pool_last(const gs_heap *h, unsigned pool)
{
    return findex_last(&h->pools[pool].blocks);
}
gs_block *gs_pool_next(const gs_heap *h, const gs_block *b)
{
    const gs_findex *x = &h->pools[b->pool].blocks;
    gs_block *n = findex_next_in(x, b);
    return n ? n : gs_findex_first_from(x, b->stream + 1);
}
gs_block *gs_pool_prev(const gs_heap *h, const gs_block *b)
{
    return gs_findex_prev(&h->pools[b->pool].blocks, b);
}
/* No running count is kept (a load and a store at every insert and removal, for tests): a walk. */
size_t gs_pool_count(const gs_heap *h, unsigned pool)
{
    size_t n = 0;
    for (const gs_block *b = gs_pool_first(h, pool); b; b = gs_pool_next(h, b)) n++;
    return n;
}
uint64_t gs_block_age(const gs_heap *h, const gs_block *b)
{
    return h->gc_ages ? h->pools[b->pool].get_free_calls - b->gc_base : 0;
}

/* Every mapped byte of a segment is in a free, an allocated or a pending block (unmapped
 * blocks are not reserved), so the free bytes are the reserved ones less the active ones: no
 * running sum of the index's blocks (a load and a store at every insert and removal).
 * gs_heap_check holds this to the sum over the free blocks. */
uint64_t gs_heap_free_bytes(const gs_heap *h, uint64_t *largest)
{
    uint64_t big = 0;
    gs_heap *m = (gs_heap *)h; /* logically const: refreshing the largest changes no answer */
    for (unsigned i = 0; i < h->pool_hi; i++) big = MAX(big, findex_largest(&m->pools[i].blocks));
    if (largest) *largest = big;
    return (uint64_t)(stat_all(h->st.reserved_bytes) - stat_all(h->st.allocated_bytes) -
                      h->pend_bytes[GS_STAT_ALL]);
}
