/* check.c - gs_heap_check: every invariant of the heap, verified from scratch (TLSF's
 * tlsf_check). Blocks must tile their segments, free neighbours must have merged, each index must
 * hold exactly its pool's free (or unmapped) blocks in order with the heap property, and every
 * "current" statistic must equal a recount. Tests call it after every operation; it costs a walk
 * of the whole heap, so the replay never does.
 */
#include "core-int.h"

/* What a check found, and the recount it compares the heap's own figures with. */
typedef struct {
    int n;                              /* violations */
    char *first;                        /* the first one, described */
    gs_stats re;                        /* every stat's current value, recounted */
    size_t free_blocks[GS_MAX_POOLS_ALL];   /* free blocks the segments hold, per pool */
    size_t free_whole[GS_MAX_POOLS_ALL];    /* those that are whole segments */
    uint64_t free_bytes[GS_MAX_POOLS_ALL];  /* and their bytes */
    uint64_t largest_free;              /* the largest free block of any pool */
    size_t unmapped_blocks[GS_MAX_POOLS_ALL];
    size_t nsegments;
    uint64_t reserved;                  /* bytes of cudaMalloc segments, and mapped bytes */
    GHashTable *handles;                /* stitched segments' handles seen (each once) */
} check_ctx;

G_GNUC_PRINTF(2, 3) static void fail(check_ctx *c, const char *fmt, ...)
{
    if (c->n++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        c->first = g_strdup_vprintf(fmt, ap);
        va_end(ap);
    }
}

#define INSIST(c, cond, ...) \
    do {                     \
        if (!(cond)) fail(c, __VA_ARGS__); \
    } while (0)

/* Formats for the messages: an address, a byte count. */
#define ADDR "%#" G_GINT64_MODIFIER "x"
#define U64 "%" G_GUINT64_FORMAT

/* Add v to the "all" entry and to type t's of a recounted stat array. */
static void tally(gs_stat a[GS_STAT_TYPES], int t, int64_t v)
{
    a[GS_STAT_ALL].current += v;
    a[t].current += v;
}

/* Block n, met in an index's order after *last: in state (free, or unmapped), with the key that
 * state implies, of the pool, after *last. */
static void check_node(check_ctx *c, unsigned pool, const gs_block *n, const gs_block **last,
                       uint8_t state)
{
    INSIST(c, n->state == state, "index of pool %u holds a block in state %d, not %d (" ADDR ")",
           pool, n->state, state, n->addr);
    INSIST(c, n->skey == skey_of(n->stream, state == GS_BLOCK_FREE ? n->size : 0),
           "block " ADDR ": stale index key", n->addr);
    INSIST(c, n->pool == pool, "block " ADDR " is in the index of pool %u but belongs to pool %u",
           n->addr, pool, n->pool);
    if (*last) INSIST(c, key_of(*last) < key_of(n), "index of pool %u out of order", pool);
    *last = n;
}

/* Walk a treap in order, checking order, heap property, and that it holds only blocks in state
 * (free, or unmapped) with the key that state implies; returns the node count. */
static size_t check_tree(check_ctx *c, const gs_heap *h, unsigned pool, const gs_block *n,
                         const gs_block **last, uint8_t state)
{
    if (!n) return 0;
    size_t k = check_tree(c, h, pool, n->left, last, state);
    check_node(c, pool, n, last, state);
    if (n->left)
        INSIST(c, prio_of(n->left->addr) <= prio_of(n->addr), "treap heap property broken");
    if (n->right)
        INSIST(c, prio_of(n->right->addr) <= prio_of(n->addr), "treap heap property broken");
    return k + 1 + check_tree(c, h, pool, n->right, last, state);
}

/* Block b of expandable segment s: pages are mapped exactly under the blocks that are not
 * unmapped. Returns the bytes b maps. */
static uint64_t check_pages(check_ctx *c, const gs_segment *s, const gs_block *b)
{
    bool um = b->state == GS_BLOCK_UNMAPPED;
    if (um) INSIST(c, (b->addr - s->addr) % s->page == 0 && b->size % s->page == 0,
                   "unmapped block " ADDR " is not page-aligned", b->addr);
    for (uint64_t a = (b->addr - s->addr) / s->page * s->page; a < b->addr + b->size - s->addr;
         a += s->page) {
        if (um) INSIST(c, seg_handle(s, a / s->page) == 0,
                       "segment " ADDR ": page " U64 " under an unmapped block has a handle",
                       s->addr, a / s->page);
        else INSIST(c, seg_handle(s, a / s->page) != 0,
                    "segment " ADDR ": page " U64 " under a mapped block has no handle",
                    s->addr, a / s->page);
    }
    return um ? 0 : b->size;
}

/* Stitched segment s (core/stitch.c): every handle spans the slots its first slot says, all
 * holding it; a slot holds a handle only as its first slot or its continuation; no handle is
 * mapped twice, here or in another segment. */
static void check_stitched(check_ctx *c, const gs_segment *s)
{
    if (!c->handles) c->handles = g_hash_table_new(g_int64_hash, g_int64_equal);
    for (uint64_t i = 0; i < s->nhandles;) {
        uint64_t hd = s->handles[i];
        uint32_t n = s->hpages[i];
        if (!hd) {
            INSIST(c, n == 0, "stitched segment " ADDR ": slot " U64 " has pages, no handle",
                   s->addr, i);
            i++;
            continue;
        }
        INSIST(c, n > 0, "stitched segment " ADDR ": slot " U64 " continues no handle", s->addr,
               i);
        if (!n) {
            i++;
            continue;
        }
        INSIST(c, i + n <= s->nhandles, "stitched segment " ADDR ": handle at slot " U64
               " runs past the table", s->addr, i);
        for (uint64_t k = i + 1; k < i + n && k < s->nhandles; k++)
            INSIST(c, s->handles[k] == hd && s->hpages[k] == 0,
                   "stitched segment " ADDR ": slot " U64 " breaks the handle at " U64, s->addr,
                   k, i);
        INSIST(c, !g_hash_table_contains(c->handles, &s->handles[i]),
               "handle %" G_GUINT64_FORMAT " is mapped twice", hd);
        g_hash_table_add(c->handles, &s->handles[i]);
        i += n;
    }
}

/* Count block b (of stat type t, in a split cudaMalloc segment if split) into the recount by
 * its state, and insist that its free or unmapped neighbour has merged with it. */
static void recount_block(check_ctx *c, const gs_heap *h, const gs_block *b, int t, bool split)
{
    gs_stats *re = &c->re;
    if (b->state == GS_BLOCK_UNMAPPED) {
        c->unmapped_blocks[b->pool]++;
        INSIST(c, !(b->next && b->next->state == GS_BLOCK_UNMAPPED),
               "unmapped blocks should have coalesced at " ADDR, b->next ? b->next->addr : 0);
    } else if (b->state == GS_BLOCK_FREE) {
        c->free_blocks[b->pool]++;
        c->free_whole[b->pool] += !gs_block_is_split(b);
        c->free_bytes[b->pool] += b->size;
        c->largest_free = MAX(c->largest_free, b->size);
        INSIST(c, !(b->next && b->next->state == GS_BLOCK_FREE),
               "blocks should have coalesced at " ADDR, b->next ? b->next->addr : 0);
        if (split) {
            tally(re->inactive_split, t, 1);
            tally(re->inactive_split_bytes, t, (int64_t)b->size);
        }
    } else {
        /* Allocated and pending blocks are both "active" in PyTorch's terms. */
        tally(re->active, t, 1);
        tally(re->active_bytes, t, (int64_t)b->size);
        tally(re->requested_bytes, t, (int64_t)b->requested);
        if (b->state == GS_BLOCK_ALLOCATED) {
            tally(re->allocation, t, 1);
            tally(re->allocated_bytes, t, (int64_t)b->size);
            if (b->size >= h->oversize) re->oversize_allocations.current++;
        }
    }
}

/* Segment s: its blocks tile it exactly, in address order and linked both ways, each of its
 * pool and stream; recount what it holds. */
static void check_segment(check_ctx *c, const gs_heap *h, const gs_segment *s)
{
    int t = h->pools[s->pool].type;
    c->nsegments++;
    if (!s->expandable) {
        /* expandable segments count by their mapped bytes, below, and not as segments */
        c->reserved += s->size;
        tally(c->re.segment, t, 1);
        tally(c->re.reserved_bytes, t, (int64_t)s->size);
        if (s->size >= h->oversize) c->re.oversize_segments.current++;
    } else {
        INSIST(c, s->page == h->pools[s->pool].page && s->page && s->size % s->page == 0,
               "expandable segment " ADDR ": page size", s->addr);
    }
    INSIST(c, s->head && s->head->prev == NULL, "segment " ADDR ": head block has a prev", s->addr);
    uint64_t at = s->addr, mapped = 0;
    bool split = !s->expandable && s->head && s->head->next != NULL;
    for (const gs_block *b = s->head; b; b = b->next) {
        INSIST(c, b->seg == s, "block " ADDR " points to the wrong segment", b->addr);
        INSIST(c, b->addr == at, "segment " ADDR ": gap or overlap at " ADDR
               " (block starts at " ADDR ")", s->addr, at, b->addr);
        INSIST(c, b->size > 0, "block " ADDR " has size 0", b->addr);
        INSIST(c, b->pool == s->pool && b->stream == s->stream,
               "block " ADDR ": pool/stream differ from its segment", b->addr);
        INSIST(c, b->type == h->pools[s->pool].type && b->expandable == s->expandable,
               "block " ADDR ": its stat type or expandable flag differs from its segment's",
               b->addr);
        if (b->next) INSIST(c, b->next->prev == b, "block " ADDR ": next->prev is not the block",
                            b->addr);
        if (s->expandable) mapped += check_pages(c, s, b);
        else INSIST(c, b->state != GS_BLOCK_UNMAPPED,
                    "block " ADDR ": unmapped in a cudaMalloc segment", b->addr);
        recount_block(c, h, b, t, split);
        at += b->size;
    }
    INSIST(c, at == s->addr + s->size, "segment " ADDR ": blocks cover " U64 " of " U64 " bytes",
           s->addr, at - s->addr, s->size);
    if (s->hpages) check_stitched(c, s);
    if (s->expandable) {
        INSIST(c, mapped == s->mapped_pages * s->page,
               "expandable segment " ADDR ": blocks map " U64 " bytes, pages say " U64, s->addr,
               mapped, s->mapped_pages * s->page);
        c->reserved += mapped;
        tally(c->re.reserved_bytes, t, (int64_t)mapped);
    }
}

/* A block of stream's address order (addr_index.c): free, of that pool and stream, strictly
 * above the last one met. */
static void check_addr_block(check_ctx *c, unsigned pool, uint32_t stream, const gs_block *n,
                             const gs_block **last)
{
    INSIST(c, n->state == GS_BLOCK_FREE && n->pool == pool && n->stream == stream,
           "address order of pool %u stream %u holds block " ADDR " (state %d, pool %u, "
           "stream %u)", pool, stream, n->addr, n->state, n->pool, n->stream);
    if (*last) INSIST(c, (*last)->addr < n->addr, "address order of pool %u out of order", pool);
    *last = n;
}

/* A stream's treap by address: in order, the heap property, the parent links, each node's amax
 * the largest size below it. Returns the node count. */
static size_t check_addr_tree(check_ctx *c, unsigned pool, uint32_t stream, const gs_block *n,
                              const gs_block *parent, const gs_block **last)
{
    if (!n) return 0;
    INSIST(c, n->aparent == parent, "block " ADDR ": wrong parent in the address treap",
           n->addr);
    size_t k = check_addr_tree(c, pool, stream, n->aleft, n, last);
    check_addr_block(c, pool, stream, n, last);
    uint64_t m = n->size;
    if (n->aleft) {
        INSIST(c, prio_of(n->aleft->addr) <= prio_of(n->addr), "address treap heap property");
        m = MAX(m, n->aleft->amax);
    }
    if (n->aright) {
        INSIST(c, prio_of(n->aright->addr) <= prio_of(n->addr), "address treap heap property");
        m = MAX(m, n->aright->amax);
    }
    INSIST(c, n->amax == m, "block " ADDR ": amax " U64 ", its subtree's largest " U64, n->addr,
           n->amax, m);
    return k + 1 + check_addr_tree(c, pool, stream, n->aright, n, last);
}

/* A stream's address order, list or treap: its blocks in order, their count, the form the
 * count allows (a list of at most GS_ADDR_TREE_AT, a treap of at least GS_ADDR_LIST_AT) and,
 * for a list, the back links and the finger (one of its blocks). Returns the blocks held. */
static size_t check_addr(check_ctx *c, unsigned pool, uint32_t stream, const gs_fstream *s)
{
    const gs_block *last = NULL;
    size_t n = 0;
    if (s->atree) {
        n = check_addr_tree(c, pool, stream, s->by_addr, NULL, &last);
        INSIST(c, n >= GS_ADDR_LIST_AT, "pool %u stream %u: a treap of %zu blocks", pool, stream,
               n);
    } else {
        bool finger = !s->afinger;
        for (const gs_block *b = s->by_addr; b && n <= s->naddr; b = b->aright) {
            INSIST(c, b->aleft == last, "block " ADDR ": wrong back link in the address list",
                   b->addr);
            check_addr_block(c, pool, stream, b, &last);
            finger = finger || b == s->afinger;
            n++;
        }
        INSIST(c, n <= GS_ADDR_TREE_AT, "pool %u stream %u: a list of %zu blocks", pool, stream,
               n);
        INSIST(c, finger, "pool %u stream %u: the finger is not in the address list", pool,
               stream);
    }
    INSIST(c, n == s->naddr, "pool %u stream %u: %zu blocks in address order, count says %u",
           pool, stream, n, s->naddr);
    return n;
}

/* The pool's whole blocks (addr_index.c): exactly its free blocks that are whole segments,
 * each at the place its segment says, and no other segment marked. */
static void check_whole(check_ctx *c, const gs_heap *h, unsigned pool)
{
    const gs_findex *x = &h->pools[pool].blocks;
    size_t marked = 0;
    for (const gs_segment *s = h->segments; s; s = s->next) marked += s->pool == pool && s->whole_at;
    if (!x->by_addr) {
        INSIST(c, x->nwhole == 0 && marked == 0, "pool %u: whole blocks kept, not by_addr", pool);
        return;
    }
    INSIST(c, marked == x->nwhole, "pool %u: %zu segments marked whole, %u kept", pool, marked,
           x->nwhole);
    for (uint32_t i = 0; i < x->nwhole; i++) {
        const gs_block *b = x->whole[i];
        INSIST(c, b->state == GS_BLOCK_FREE && b->pool == pool && !gs_block_is_split(b) &&
                      b->seg->whole_at == i + 1,
               "pool %u: whole block %u (" ADDR ") is not a free whole segment at its place",
               pool, i, b->addr);
    }
    INSIST(c, x->nwhole == c->free_whole[pool], "pool %u: %u whole blocks kept, segments have %zu",
           pool, x->nwhole, c->free_whole[pool]);
}

/* Class sl of row r in pool's index: a treap (check_tree), or a sorted list of free blocks,
 * each linked back to the one before and the head back to the tail. Returns its blocks; the
 * last in *last. */
static size_t check_class(check_ctx *c, const gs_heap *h, unsigned pool, const gs_frow *r,
                          unsigned sl, const gs_block **last)
{
    if (class_is_tree(r, sl)) {
        INSIST(c, r->cls[sl] != NULL, "pool %u: treap class %u is empty", pool, sl);
        return check_tree(c, h, pool, r->cls[sl], last, GS_BLOCK_FREE);
    }
    size_t k = 0;
    const gs_block *prev = NULL;
    for (const gs_block *b = r->cls[sl]; b && k <= c->free_blocks[pool]; b = b->left, k++) {
        check_node(c, pool, b, last, GS_BLOCK_FREE);
        if (prev)
            INSIST(c, b->right == prev, "pool %u: class %u's list: block " ADDR " links back wrong",
                   pool, sl, b->addr);
        prev = b;
    }
    INSIST(c, !prev || r->cls[sl]->right == prev,
           "pool %u: class %u's head does not lead to its tail", pool, sl);
    return k;
}

/* Pool i's size-class index: every class's list or treap holds blocks of that stream and class
 * only, in order (a treap with the heap property); the bitmaps mark exactly the classes and rows
 * that hold blocks; the counts, each stream's largest and the tournament agree with what the
 * classes hold. Then a walk in the policies' view (gs_pool_first/next, and back with last/prev)
 * meets every block once, in strictly ascending order, and the lower bound of each (stream, size)
 * met is its first block. Returns the blocks held. */
static size_t check_findex(check_ctx *c, const gs_heap *h, unsigned i)
{
    const gs_findex *x = &h->pools[i].blocks;
    size_t total = 0;
    INSIST(c, (x->ns & (x->ns - 1)) == 0, "pool %u: stream table of %u entries", i, x->ns);
    for (uint32_t si = 0; si < x->ns; si++) {
        const gs_fstream *s = x->s[si];
        INSIST(c, x->tmax[x->ns + si] == (s ? s->largest : 0),
               "pool %u: tournament leaf of stream %u", i, si);
        INSIST(c, !s || !s->dirty, "pool %u: stream %u's largest is still marked out of date",
               i, si);
        if (!s) continue;
        size_t n = 0;
        uint64_t largest = 0;
        for (unsigned fl = 0; fl < GS_FL; fl++) {
            const gs_frow *r = s->rows[fl];
            INSIST(c, !!(s->rows_bits >> fl & 1) == (r && r->bits),
                   "pool %u stream %u: row %u's bit is wrong", i, si, fl);
            for (unsigned sl = 0; r && sl < GS_SL; sl++) {
                INSIST(c, !!(r->bits >> sl & 1) == (r->cls[sl] != NULL),
                       "pool %u stream %u: class %u.%u's bit is wrong", i, si, fl, sl);
                const gs_block *last = NULL;
                size_t k = check_class(c, h, i, r, sl, &last);
                n += k;
                if (last) largest = MAX(largest, last->size);
                /* every block of this class is of its stream and class */
                for (const gs_block *b = r->cls[sl] ? class_min(r, sl) : NULL; b;
                     b = class_after(r, sl, b)) {
                    unsigned bsl, bfl = size_class(b->size, &bsl);
                    INSIST(c, b->stream == si && bfl == fl && bsl == sl && b->fl == fl &&
                                  b->sl == sl,
                           "block " ADDR " of stream %u, size " U64 " is in class %u.%u of "
                           "stream %u", b->addr, b->stream, b->size, fl, sl, si);
                }
            }
        }
        INSIST(c, largest == s->largest, "pool %u stream %u: largest is " U64 ", says " U64, i,
               si, largest, s->largest);
        size_t na = x->by_addr ? check_addr(c, i, si, s) : (s->by_addr != NULL);
        INSIST(c, x->by_addr ? na == n : na == 0,
               "pool %u stream %u: %zu blocks in address order, %zu by size", i, si, na, n);
        total += n;
    }
    for (uint32_t k = 1; k < x->ns; k++)
        INSIST(c, x->tmax[k] == MAX(x->tmax[2 * k], x->tmax[2 * k + 1]),
               "pool %u: tournament node %u", i, k);
    INSIST(c, x->ndirty == 0, "pool %u: %u streams left to refresh", i, x->ndirty);

    size_t fwd = 0, back = 0;
    const gs_block *prev = NULL, *run = NULL;
    for (const gs_block *b = gs_pool_first(h, i); b && fwd <= total; b = gs_pool_next(h, b)) {
        if (prev) INSIST(c, key_of(prev) < key_of(b), "index of pool %u out of order", i);
        if (!run || run->skey != b->skey) {
            run = b;
            INSIST(c, gs_pool_lower_bound(h, i, b->stream, b->size) == b,
                   "pool %u: the lower bound of stream %u, size " U64 " is not " ADDR, i,
                   b->stream, b->size, b->addr);
        }
        prev = b;
        fwd++;
    }
    for (const gs_block *b = gs_pool_last(h, i); b && back <= total; b = gs_pool_prev(h, b))
        back++;
    INSIST(c, fwd == total && back == total,
           "pool %u: stepping through the index meets %zu blocks forward and %zu back, not %zu",
           i, fwd, back, total);
    return total;
}

/* Each pool's two indexes hold exactly the free and the unmapped blocks its segments have;
 * the pending list holds only pending blocks. */
static void check_indexes(check_ctx *c, const gs_heap *h)
{
    (void)gs_heap_free_bytes(h, NULL); /* every stream's largest up to date, as asked for */
    uint64_t all_free = 0;
    for (unsigned i = 0; i < h->pool_hi; i++) {
        const gs_pool *p = &h->pools[i];
        size_t n = check_findex(c, h, i);
        check_whole(c, h, i);
        INSIST(c, n == c->free_blocks[i],
               "index of pool %u holds %zu blocks, segments have %zu free", i, n,
               c->free_blocks[i]);
        all_free += c->free_bytes[i];
        const gs_block *last = NULL;
        n = check_tree(c, h, i, p->unmapped.root, &last, GS_BLOCK_UNMAPPED);
        INSIST(c, n == p->unmapped.count,
               "unmapped index of pool %u holds %zu blocks, count says %zu", i, n,
               p->unmapped.count);
        INSIST(c, n == c->unmapped_blocks[i],
               "unmapped index of pool %u holds %zu blocks, segments have %zu", i, n,
               c->unmapped_blocks[i]);
    }
    for (const gs_block *b = h->pending; b; b = b->right)
        INSIST(c, b->state == GS_BLOCK_PENDING, "pending list holds a block that is not pending");
    uint64_t largest = UINT64_MAX, total = gs_heap_free_bytes(h, &largest);
    INSIST(c, total == all_free,
           "gs_heap_free_bytes says " U64 " free bytes, the free blocks hold " U64, total,
           all_free);
    INSIST(c, largest == c->largest_free,
           "the largest free block is " U64 " bytes, gs_heap_free_bytes says " U64,
           c->largest_free, largest);
}

/* Every stat's current value equals the recount. */
static void check_stats(check_ctx *c, const gs_heap *h)
{
    const gs_stats *st = gs_heap_stats(h);
#define CHECK_ARRAY(name)                                                                    \
    for (int t = 0; t < GS_STAT_TYPES; t++)                                                  \
        INSIST(c, c->re.name[t].current == st->name[t].current,                            \
               "stat " #name "[%d].current is %" G_GINT64_FORMAT ", recount gives %"         \
               G_GINT64_FORMAT, t, st->name[t].current, c->re.name[t].current);
    GS_STAT_ARRAYS(CHECK_ARRAY)
#undef CHECK_ARRAY
    INSIST(c, c->re.oversize_allocations.current == st->oversize_allocations.current,
           "stat oversize_allocations differs from recount");
    INSIST(c, c->re.oversize_segments.current == st->oversize_segments.current,
           "stat oversize_segments differs from recount");
}

int gs_heap_check(const gs_heap *h, char **why)
{
    check_ctx c;
    memset(&c, 0, sizeof c);
    for (const gs_segment *s = h->segments; s; s = s->next) check_segment(&c, h, s);
    INSIST(&c, c.nsegments == h->nsegments, "segment list holds %zu segments, count says %zu",
           c.nsegments, h->nsegments);
    INSIST(&c, c.reserved == h->total_reserved,
           "segments hold " U64 " bytes, reserved says " U64, c.reserved, h->total_reserved);
    check_indexes(&c, h);
    check_stats(&c, h);
    if (c.handles) g_hash_table_destroy(c.handles);
    if (why) *why = c.first;
    else g_free(c.first);
    return c.n;
}
