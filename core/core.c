/* core.c - the allocator engine: blocks, segments, the free-block index, split and merge, the
 * out-of-memory ladder, statistics and the invariant check. See core.h for the vocabulary.
 *
 * The order of operations in gs_heap_malloc/free mirrors PyTorch's DeviceCachingAllocator
 * (malloc, alloc_block, get_free_block, alloc_found_block, free, free_block, try_merge_blocks,
 * release_cached_blocks), because statistics such as num_alloc_retries and inactive_split only
 * come out equal to PyTorch's when every step happens in the same order. Expandable segments
 * follow find_expandable_block, map_block, try_allocate_expandable_block, unmap_block and
 * release_blocks of the same file (pytorch-caching-allocator.md §2).
 */
#include "core.h"

#include <string.h>

#include "policy.h"

/* ------------------------------------------------------------------------------------------
 * The free-block index: an intrusive treap per pool, ordered by (stream, size, addr).
 *
 * Intrusive (the links live in the block) so inserting and removing never allocate; a treap
 * because it is the shortest balanced tree to get right: expected O(log n) for insert, remove
 * and lower bound. Priorities come from a hash of the address, so a replay is deterministic.
 * Successor and predecessor are found by a descent from the root (no parent links to keep).
 *
 * The same treap, keyed (stream, addr), indexes a pool's unmapped blocks (PyTorch's
 * pool.unmapped): their key's size half is 0.
 * ------------------------------------------------------------------------------------------ */

typedef struct {
    gs_block *root;
    size_t count;
} gs_tree;

typedef struct {
    gs_tree blocks;          /* free blocks by (stream, size, addr) */
    gs_tree unmapped;        /* unmapped blocks of expandable segments by (stream, addr) */
    uint64_t get_free_calls; /* PyTorch's get_free_blocks_call_count (GC ages) */
    uint64_t page;           /* expandable segments' handle size; 0: grows by cudaMalloc */
    bool is_small;
} gs_pool;

/* The order (stream, size, addr) as one 128-bit number, so a descent compares with a few
 * branch-free instructions: a tree walk's direction is unpredictable, and mispredicted branches,
 * not instructions, are what a descent costs. Sizes stay below 2^48 (256 TiB), streams below
 * 2^16 (checked where blocks enter the index). */
typedef unsigned __int128 gs_key;

static inline gs_key make_key(uint32_t stream, uint64_t size, uint64_t addr)
{
    return ((gs_key)(((uint64_t)stream << 48) | size) << 64) | addr;
}

/* A block's key, from the high half cached when it entered the index (its size and address
 * never change while it is there). */
static inline gs_key key_of(const gs_block *b) { return ((gs_key)b->skey << 64) | b->addr; }

static uint32_t prio_of(uint64_t addr)
{
    /* splitmix64 finaliser: neighbouring addresses get unrelated priorities */
    uint64_t z = addr + UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return (uint32_t)(z ^ (z >> 31));
}

/* Insert b, whose skey the caller has set. */
static void index_insert(gs_tree *p, gs_block *b)
{
    /* Top-down, in one pass: walk down while the nodes outrank b, then b takes that place and
     * the subtree found there is split by b's key into b's left and right subtrees. */
    g_assert(b->size < (UINT64_C(1) << 48) && b->stream < GS_MAX_STREAMS);
    b->prio = prio_of(b->addr);
    gs_key k = key_of(b);
    gs_block **link = &p->root;
    while (*link && (*link)->prio >= b->prio)
        link = k < key_of(*link) ? &(*link)->left : &(*link)->right;
    gs_block *n = *link, **l = &b->left, **r = &b->right;
    while (n) {
        if (key_of(n) < k) {
            *l = n;
            l = &n->right;
            n = n->right;
        } else {
            *r = n;
            r = &n->left;
            n = n->left;
        }
    }
    *l = *r = NULL;
    *link = b;
    p->count++;
}

/* Remove b, reached through *link. */
static void index_unlink(gs_tree *p, gs_block **link, gs_block *b)
{
    /* Rotate b down (the child with the higher priority comes up) until it has at most one
     * child, then splice it out. */
    for (;;) {
        gs_block *l = b->left, *r = b->right;
        if (!l) { *link = r; break; }
        if (!r) { *link = l; break; }
        if (l->prio > r->prio) {
            b->left = l->right;
            l->right = b;
            *link = l;
            link = &l->right;
        } else {
            b->right = r->left;
            r->left = b;
            *link = r;
            link = &r->left;
        }
    }
    b->left = b->right = NULL;
    p->count--;
}

static void index_remove(gs_tree *p, gs_block *b)
{
    gs_block **link = &p->root;
    gs_key k = key_of(b);
    while (*link != b) link = k < key_of(*link) ? &(*link)->left : &(*link)->right;
    index_unlink(p, link, b);
}

/* The lower bound of (stream, size, 0) and the link that points to it, in one descent. */
static gs_block **index_lower_bound_link(gs_tree *p, uint32_t stream, uint64_t size)
{
    gs_block **link = &p->root, **best = NULL;
    gs_key k = make_key(stream, size, 0);
    while (*link) {
        bool left = k <= key_of(*link);
        best = left ? link : best;
        link = left ? &(*link)->left : &(*link)->right;
    }
    return best;
}

static gs_block *index_lower_bound(const gs_tree *p, uint32_t stream, uint64_t size, uint64_t addr)
{
    gs_block *n = p->root, *best = NULL;
    gs_key k = make_key(stream, size, addr);
    while (n) {
        bool left = k <= key_of(n);
        best = left ? n : best;
        n = left ? n->left : n->right;
    }
    return best;
}

static gs_block *index_next(const gs_tree *p, const gs_block *b)
{
    gs_block *n = p->root, *best = NULL;
    gs_key k = key_of(b);
    while (n) {
        bool left = k < key_of(n);
        best = left ? n : best;
        n = left ? n->left : n->right;
    }
    return best;
}

static gs_block *index_prev(const gs_tree *p, const gs_block *b)
{
    gs_block *n = p->root, *best = NULL;
    gs_key k = key_of(b);
    while (n) {
        bool right = k > key_of(n);
        best = right ? n : best;
        n = right ? n->right : n->left;
    }
    return best;
}

/* ------------------------------------------------------------------------------------------
 * The heap
 * ------------------------------------------------------------------------------------------ */

/* Blocks come from slabs: a split or merge happens on most events, and malloc/free per block
 * would dominate the replay time. */
#define SLAB_BLOCKS 256

struct gs_heap {
    const gs_policy *policy;
    const gs_policy_ops *P;
    const void *cfg;
    gs_backend *be;
    uint64_t limit;
    uint64_t device_total;   /* sizes expandable reservations */
    uint64_t oversize;       /* the policy's oversize threshold, cached */
    bool gc_active;          /* limit set and the policy collects garbage */
    gs_pool pools[GS_MAX_POOLS];
    unsigned npools;
    gs_segment *segments;    /* live segments, newest first */
    size_t nsegments;
    gs_block *pending;       /* frees awaiting completion, linked through ->right */
    gs_block *spare;         /* recycled block structs, linked through ->right */
    GPtrArray *slabs;
    uint64_t total_reserved; /* PyTorch's total_allocated_memory */
    bool peak_reserved_dirty;
    uint32_t tag;            /* stamped on new segments */
    gs_heap_config cb;       /* ud, reclaim, on_reserve (several allocators on one device) */
    gs_stats st;
    gs_devcalls calls;
};

/* ---- statistics helpers ---- */

/* Apply to "all" and to the pool's own type, as PyTorch's for_each_selected_stat_type does. */
static inline void stat2_inc(gs_stat a[GS_STAT_TYPES], bool small, int64_t v)
{
    gs_stat_inc(&a[GS_STAT_ALL], v);
    gs_stat_inc(&a[small ? GS_STAT_SMALL : GS_STAT_LARGE], v);
}

static inline void stat2_dec(gs_stat a[GS_STAT_TYPES], bool small, int64_t v)
{
    gs_stat_dec(&a[GS_STAT_ALL], v);
    gs_stat_dec(&a[small ? GS_STAT_SMALL : GS_STAT_LARGE], v);
}

static inline bool pool_small(const gs_heap *h, const gs_block *b)
{
    return h->pools[b->pool].is_small;
}

/* ---- block structs ---- */

static gs_block *block_new(gs_heap *h)
{
    if (!h->spare) {
        gs_block *slab = g_new(gs_block, SLAB_BLOCKS);
        g_ptr_array_add(h->slabs, slab);
        for (int i = 0; i < SLAB_BLOCKS; i++) {
            slab[i].right = h->spare;
            h->spare = &slab[i];
        }
    }
    gs_block *b = h->spare;
    h->spare = b->right;
    memset(b, 0, sizeof *b);
    return b;
}

static void block_delete(gs_heap *h, gs_block *b)
{
    b->right = h->spare;
    h->spare = b;
}

/* Insert a free block into its pool's index; its GC age starts now. */
static void pool_insert(gs_heap *h, gs_block *b)
{
    gs_pool *p = &h->pools[b->pool];
    b->state = GS_BLOCK_FREE;
    b->gc_base = p->get_free_calls;
    b->skey = ((uint64_t)b->stream << 48) | b->size;
    index_insert(&p->blocks, b);
}

static void pool_remove(gs_heap *h, gs_block *b) { index_remove(&h->pools[b->pool].blocks, b); }

static void unmapped_insert(gs_heap *h, gs_block *b)
{
    b->state = GS_BLOCK_UNMAPPED;
    b->skey = (uint64_t)b->stream << 48;
    index_insert(&h->pools[b->pool].unmapped, b);
}

static void unmapped_remove(gs_heap *h, gs_block *b)
{
    index_remove(&h->pools[b->pool].unmapped, b);
}

/* A new block [addr, addr+size) in like's segment (same stream and pool), linked between before
 * and after (either may be NULL). The caller puts it in an index. */
static gs_block *block_carve(gs_heap *h, const gs_block *like, uint64_t addr, uint64_t size,
                             gs_block *before, gs_block *after)
{
    gs_block *nb = block_new(h);
    nb->addr = addr;
    nb->size = size;
    nb->stream = like->stream;
    nb->pool = like->pool;
    nb->seg = like->seg;
    nb->prev = before;
    nb->next = after;
    if (before) before->next = nb;
    else nb->seg->head = nb;
    if (after) after->prev = nb;
    return nb;
}

gs_heap *gs_heap_new(const gs_policy *policy, gs_backend *be, const gs_heap_config *cfg)
{
    g_return_val_if_fail(policy && be, NULL);
    gs_heap *h = g_new0(gs_heap, 1);
    h->policy = policy;
    h->P = policy->ops;
    h->cfg = policy->cfg;
    h->be = be;
    h->limit = cfg ? cfg->limit : 0;
    h->device_total = cfg ? cfg->device_total : 0;
    if (cfg) h->cb = *cfg;
    h->oversize = h->P->oversize ? h->P->oversize(h->cfg) : UINT64_MAX;
    h->st.max_split_size = h->oversize == UINT64_MAX ? -1 : (int64_t)h->oversize;
    h->gc_active = h->limit > 0 && h->P->collect != NULL;
    h->npools = h->P->npools;
    g_assert(h->npools >= 1 && h->npools <= GS_MAX_POOLS);
    bool vmm = false;
    for (unsigned i = 0; i < h->npools; i++) {
        h->pools[i].is_small = h->P->pools[i].is_small;
        h->pools[i].page = h->P->expandable_page ? h->P->expandable_page(h->cfg, i) : 0;
        vmm |= h->pools[i].page != 0;
    }
    if (vmm && !gs_dev_has_vmm(be)) {
        g_free(h);
        return NULL;
    }
    if (vmm && !h->device_total) {
        uint64_t fr = 0;
        (void)gs_dev_mem_info(be, NULL, &fr, &h->device_total);
    }
    h->slabs = g_ptr_array_new_with_free_func(g_free);
    return h;
}

/* ---- segments ---- */

static void segment_unlink(gs_heap *h, gs_segment *s)
{
    if (s->prev) s->prev->next = s->next;
    else h->segments = s->next;
    if (s->next) s->next->prev = s->prev;
    h->nsegments--;
}

/* Free (cudaFree) a free block that is a whole segment. PyTorch's release_block. */
gs_status gs_heap_release_block(gs_heap *h, gs_block *b)
{
    g_return_val_if_fail(b->state == GS_BLOCK_FREE && !gs_block_is_split(b) && !b->seg->expandable,
                         GS_ERR_INVALID);
    gs_status st = gs_dev_free(h->be, &h->calls, b->addr, b->size);
    if (st != GS_OK) return st; /* the segment stays cached; the heap is unchanged */
    if (h->cb.on_reserve) h->cb.on_reserve(h->cb.ud, b->seg, -(int64_t)b->size);
    bool small = pool_small(h, b);
    h->st.num_device_free++;
    h->total_reserved -= b->size;
    pool_remove(h, b);
    stat2_dec(h->st.segment, small, 1);
    stat2_dec(h->st.reserved_bytes, small, (int64_t)b->size);
    if (b->size >= h->oversize) gs_stat_dec(&h->st.oversize_segments, 1);
    segment_unlink(h, b->seg);
    g_free(b->seg);
    block_delete(h, b);
    return GS_OK;
}

static void segment_link(gs_heap *h, gs_segment *s)
{
    s->next = h->segments;
    if (h->segments) h->segments->prev = s;
    h->segments = s;
    h->nsegments++;
}

static void note_reserved_up(gs_heap *h)
{
    if (h->st.reserved_bytes[GS_STAT_ALL].current == h->st.reserved_bytes[GS_STAT_ALL].peak)
        h->peak_reserved_dirty = true;
}

/* Grow by one cudaMalloc'd segment of seg_size for pool/stream. */
static gs_status malloc_segment(gs_heap *h, unsigned pool, uint32_t stream, uint64_t seg_size,
                                gs_block **out)
{
    uint64_t addr;
    gs_status st = gs_dev_malloc(h->be, &h->calls, seg_size, &addr);
    if (st != GS_OK) return st;

    gs_segment *s = g_new0(gs_segment, 1);
    gs_block *b = block_new(h);
    s->addr = b->addr = addr;
    s->size = b->size = seg_size;
    s->stream = b->stream = stream;
    s->pool = b->pool = (uint8_t)pool;
    s->tag = h->tag;
    s->head = b;
    b->seg = s;
    segment_link(h, s);
    if (h->cb.on_reserve) h->cb.on_reserve(h->cb.ud, s, (int64_t)seg_size);

    bool small = h->pools[pool].is_small;
    h->total_reserved += seg_size;
    stat2_inc(h->st.segment, small, 1);
    stat2_inc(h->st.reserved_bytes, small, (int64_t)seg_size);
    if (seg_size >= h->oversize) gs_stat_inc(&h->st.oversize_segments, 1);
    h->st.num_device_alloc++;
    note_reserved_up(h);
    *out = b;
    return GS_OK;
}

/* ---- expandable segments (pytorch-caching-allocator.md §2) ---- */

static uint64_t try_merge(gs_heap *h, gs_block *dst, gs_block *src);

static inline bool allocatable(const gs_block *b)
{
    return b && (b->state == GS_BLOCK_FREE || b->state == GS_BLOCK_UNMAPPED);
}

/* Reserve a new expandable segment for pool/stream: address space for 9/8 of the device, so
 * pages unmapped early in the range can be replaced at its end. One unmapped block covers it. */
static gs_status new_expandable_segment(gs_heap *h, unsigned pool, uint32_t stream,
                                        gs_block **out)
{
    uint64_t page = h->pools[pool].page;
    uint64_t want = h->device_total + h->device_total / 8;
    uint64_t slots = (want + page - 1) / page;
    uint64_t va;
    gs_status st = gs_dev_va_reserve(h->be, &h->calls, slots * page, &va);
    if (st != GS_OK) return st;
    gs_segment *s = g_new0(gs_segment, 1);
    s->addr = va;
    s->size = slots * page;
    s->stream = stream;
    s->pool = (uint8_t)pool;
    s->expandable = true;
    s->tag = h->tag;
    s->page = page;
    s->handles = g_new0(uint64_t, slots);
    gs_block *b = block_new(h);
    b->addr = va;
    b->size = s->size;
    b->stream = stream;
    b->pool = (uint8_t)pool;
    b->seg = s;
    s->head = b;
    segment_link(h, s);
    unmapped_insert(h, b);
    *out = b;
    return GS_OK;
}

/* The lowest address, in any segment of pool/stream, where free and unmapped blocks in a row
 * hold size bytes: an unmapped block, or the free block just before it. A new segment if none.
 * PyTorch's find_expandable_block. */
static gs_status find_expandable_block(gs_heap *h, unsigned pool, uint32_t stream, uint64_t size,
                                       gs_block **out)
{
    const gs_tree *u = &h->pools[pool].unmapped;
    for (gs_block *c = index_lower_bound(u, stream, 0, 0); c && c->stream == stream;
         c = index_next(u, c)) {
        gs_block *start = c->prev && c->prev->state == GS_BLOCK_FREE ? c->prev : c;
        uint64_t bytes = 0;
        for (gs_block *x = start; bytes < size && allocatable(x); x = x->next) bytes += x->size;
        if (bytes >= size) {
            *out = start;
            return GS_OK;
        }
    }
    return new_expandable_segment(h, pool, stream, out);
}

/* Give back the handles of slots [from, to) after a failed map: unmap those of [from, mapped_to)
 * first. Best effort: the call that failed is what gets reported. */
static void unwind_map(gs_heap *h, gs_segment *s, uint64_t from, uint64_t mapped_to, uint64_t to)
{
    for (uint64_t i = from; i < mapped_to; i++)
        (void)gs_dev_unmap(h->be, &h->calls, s->addr + i * s->page, s->page);
    for (uint64_t i = from; i < to && s->handles[i]; i++) {
        (void)gs_dev_page_release(h->be, &h->calls, s->handles[i], s->page);
        s->handles[i] = 0;
    }
}

/* Map whole pages at the start of unmapped block b to cover size bytes: one cuMemCreate per
 * page, a cuMemMap each, one cuMemSetAccess over the range. The mapped part becomes a free block,
 * merged with free neighbours; the rest stays unmapped. PyTorch's map_block. GS_ERR_OOM when a
 * cuMemCreate finds no memory (the pages of this call are released again). */
static gs_status map_block(gs_heap *h, gs_block *b, uint64_t size)
{
    g_assert(b->state == GS_BLOCK_UNMAPPED && size > 0 && size <= b->size);
    gs_segment *s = b->seg;
    uint64_t pg = s->page;
    uint64_t begin = (b->addr - s->addr) / pg, end = (b->addr - s->addr + size + pg - 1) / pg;
    gs_status st = GS_OK;
    for (uint64_t i = begin; i < end && st == GS_OK; i++) {
        st = gs_dev_page_create(h->be, &h->calls, pg, &s->handles[i]);
        if (st != GS_OK) {
            s->handles[i] = 0;
            unwind_map(h, s, begin, begin, i);
        }
    }
    for (uint64_t i = begin; i < end && st == GS_OK; i++) {
        st = gs_dev_map(h->be, &h->calls, s->addr + i * pg, pg, s->handles[i]);
        if (st != GS_OK) unwind_map(h, s, begin, i, end);
    }
    if (st == GS_OK) {
        st = gs_dev_set_access(h->be, &h->calls, s->addr + begin * pg, (end - begin) * pg, pg);
        if (st != GS_OK) unwind_map(h, s, begin, end, end);
    }
    if (st != GS_OK) return st;

    uint64_t mapped = (end - begin) * pg;
    s->mapped_pages += end - begin;
    unmapped_remove(h, b);
    if (mapped < b->size) {
        unmapped_insert(h, block_carve(h, b, b->addr + mapped, b->size - mapped, b, b->next));
        b->size = mapped;
    }
    b->state = GS_BLOCK_FREE;
    try_merge(h, b, b->prev);
    try_merge(h, b, b->next);
    pool_insert(h, b);

    h->total_reserved += mapped;
    if (h->cb.on_reserve) h->cb.on_reserve(h->cb.ud, s, (int64_t)mapped);
    stat2_inc(h->st.reserved_bytes, h->pools[b->pool].is_small, (int64_t)mapped);
    h->st.num_device_alloc++;
    note_reserved_up(h);
    return GS_OK;
}

/* Grow pool/stream's expandable segment to hold a block of size. Mapping starts at the lowest
 * address that works, so segments stay one piece. PyTorch's try_allocate_expandable_block. */
static gs_status grow_expandable(gs_heap *h, unsigned pool, uint32_t stream, uint64_t size,
                                 gs_block **out)
{
    gs_block *c;
    gs_status st = find_expandable_block(h, pool, stream, size, &c);
    if (st != GS_OK) return st;
    if (c->state == GS_BLOCK_UNMAPPED) {
        st = map_block(h, c, MIN(c->size, size));
        if (st != GS_OK) return st;
    }
    /* c is free now and followed by unmapped space (and maybe more free blocks after it) */
    while (c->size < size) {
        gs_block *n = c->next;
        g_assert(n && n->state == GS_BLOCK_UNMAPPED);
        st = map_block(h, n, MIN(size - c->size, n->size));
        if (st != GS_OK) return st;
        c = n; /* n absorbed c */
    }
    pool_remove(h, c);
    *out = c;
    return GS_OK;
}

/* Unmap the whole pages inside free block b of an expandable segment; the partial pages at
 * either end stay as free blocks. PyTorch's unmap_block. If a call fails, the pages already
 * unmapped are accounted and the failure is returned. */
static gs_status unmap_block(gs_heap *h, gs_block *b)
{
    gs_segment *s = b->seg;
    uint64_t pg = s->page;
    uint64_t begin = (b->addr - s->addr + pg - 1) / pg, end = (b->addr + b->size - s->addr) / pg;
    if (begin >= end) return GS_OK;
    gs_status st = GS_OK;
    uint64_t i = begin;
    while (i < end) {
        st = gs_dev_unmap(h->be, &h->calls, s->addr + i * pg, pg);
        if (st != GS_OK) break;
        st = gs_dev_page_release(h->be, &h->calls, s->handles[i], s->page);
        s->handles[i] = 0;
        s->mapped_pages--;
        i++;
        if (st != GS_OK) break;
    }
    if (i == begin) return st;
    end = i;

    uint64_t ua = s->addr + begin * pg, un = (end - begin) * pg;
    pool_remove(h, b);
    if (ua > b->addr) pool_insert(h, block_carve(h, b, b->addr, ua - b->addr, b->prev, b));
    if (b->addr + b->size > ua + un)
        pool_insert(h, block_carve(h, b, ua + un, b->addr + b->size - (ua + un), b, b->next));
    b->addr = ua;
    b->size = un;
    b->state = GS_BLOCK_UNMAPPED;
    try_merge(h, b, b->prev);
    try_merge(h, b, b->next);
    unmapped_insert(h, b);

    h->total_reserved -= un;
    if (h->cb.on_reserve) h->cb.on_reserve(h->cb.ud, s, -(int64_t)un);
    stat2_dec(h->st.reserved_bytes, h->pools[b->pool].is_small, (int64_t)un);
    h->st.num_device_free++;
    return st;
}

/* Free the reservation of an expandable segment that is one unmapped block. */
static gs_status release_expandable_segment(gs_heap *h, gs_block *b)
{
    gs_segment *s = b->seg;
    g_assert(b->state == GS_BLOCK_UNMAPPED && b->addr == s->addr && b->size == s->size);
    gs_status st = gs_dev_va_release(h->be, &h->calls, s->addr, s->size);
    if (st != GS_OK) return st;
    unmapped_remove(h, b);
    segment_unlink(h, s);
    g_free(s->handles);
    g_free(s);
    block_delete(h, b);
    return GS_OK;
}

/* Grow the pool by what the request needs. PyTorch's alloc_block: a limit check against the
 * segment size a cudaMalloc would take (also with expandable segments), then a new segment, or
 * pages mapped into the pool's expandable segment for the rounded size. GS_ERR_OOM when the
 * limit or the device refuses. */
static gs_status alloc_block(gs_heap *h, unsigned pool, uint32_t stream, uint64_t size,
                             uint64_t seg_size, bool is_retry, gs_block **out)
{
    if (is_retry) h->st.num_alloc_retries++;
    if (h->limit && h->total_reserved + seg_size > h->limit) return GS_ERR_OOM;
    if (h->pools[pool].page) return grow_expandable(h, pool, stream, size, out);
    return malloc_segment(h, pool, stream, seg_size, out);
}

static inline uint64_t expandable_size(const gs_block *b)
{
    return b->size + (b->next && b->next->state == GS_BLOCK_UNMAPPED ? b->next->size : 0);
}

/* Best fit from the pool's index, subject to the policy. PyTorch's get_free_block. */
static gs_block *get_free_block(gs_heap *h, unsigned pool, uint32_t stream, uint64_t size)
{
    gs_pool *p = &h->pools[pool];
    if (h->gc_active) p->get_free_calls++;
    gs_block **link = index_lower_bound_link(&p->blocks, stream, size);
    gs_block *b = link ? *link : NULL;
    if (!b || b->stream != stream) return NULL;
    if (b->seg->expandable) {
        /* A free block followed by unmapped space counts as the size it can grow to, so a
         * larger block that cannot grow is preferred over consuming the growable end. */
        gs_block *n = index_next(&p->blocks, b);
        while (b->seg->expandable && n && n->stream == stream &&
               expandable_size(n) < expandable_size(b)) {
            b = n;
            n = index_next(&p->blocks, b);
            link = NULL;
        }
    }
    if (!h->P->fits(h->cfg, b, size)) return NULL;
    if (link) index_unlink(&p->blocks, link, b);
    else pool_remove(h, b);
    return b;
}

/* ---- merge and free ---- */

/* Absorb neighbour src into dst if both are free, or both unmapped. Returns the bytes absorbed
 * (0: no merge). */
static uint64_t try_merge(gs_heap *h, gs_block *dst, gs_block *src)
{
    if (!src || src->state != dst->state ||
        (src->state != GS_BLOCK_FREE && src->state != GS_BLOCK_UNMAPPED))
        return 0;
    if (dst->prev == src) {
        dst->addr = src->addr;
        dst->prev = src->prev;
        if (dst->prev) dst->prev->next = dst;
        else dst->seg->head = dst;
    } else {
        dst->next = src->next;
        if (dst->next) dst->next->prev = dst;
    }
    uint64_t n = src->size;
    dst->size += n;
    if (src->state == GS_BLOCK_FREE) pool_remove(h, src);
    else unmapped_remove(h, src);
    block_delete(h, src);
    return n;
}

/* The completion of a free: merge with free neighbours and return to the index.
 * PyTorch's free_block. */
static void free_block(gs_heap *h, gs_block *b)
{
    uint64_t orig_size = b->size, requested = b->requested;
    bool small = pool_small(h, b);
    int64_t split_blocks = 0, split_bytes = 0;
    gs_block *cands[2] = {b->prev, b->next};
    b->state = GS_BLOCK_FREE; /* not yet in the index; try_merge only looks at neighbours */
    for (int i = 0; i < 2; i++) {
        uint64_t n = try_merge(h, b, cands[i]);
        if (n > 0) {
            split_blocks -= 1;
            split_bytes -= (int64_t)n;
        }
    }
    b->requested = 0;
    pool_insert(h, b);
    if (gs_block_is_split(b)) {
        split_blocks += 1;
        split_bytes += (int64_t)b->size;
    }
    /* PyTorch keeps expandable blocks out of inactive_split: their whole pages can always be
     * released. */
    if (b->seg->expandable) split_blocks = split_bytes = 0;
    if (split_blocks > 0) stat2_inc(h->st.inactive_split, small, split_blocks);
    else if (split_blocks < 0) stat2_dec(h->st.inactive_split, small, -split_blocks);
    if (split_bytes > 0) stat2_inc(h->st.inactive_split_bytes, small, split_bytes);
    else if (split_bytes < 0) stat2_dec(h->st.inactive_split_bytes, small, -split_bytes);
    stat2_dec(h->st.active, small, 1);
    stat2_dec(h->st.active_bytes, small, (int64_t)orig_size);
    stat2_dec(h->st.requested_bytes, small, (int64_t)requested);
}

/* The program's free. PyTorch's free(): allocation counts drop now, activity at completion. */
static void free_request(gs_heap *h, gs_block *b)
{
    g_return_if_fail(b->state == GS_BLOCK_ALLOCATED);
    bool small = pool_small(h, b);
    stat2_dec(h->st.allocation, small, 1);
    stat2_dec(h->st.allocated_bytes, small, (int64_t)b->size);
    if (b->size >= h->oversize) gs_stat_dec(&h->st.oversize_allocations, 1);
}

void gs_heap_free(gs_heap *h, gs_block *b)
{
    free_request(h, b);
    free_block(h, b);
}

void gs_heap_free_request(gs_heap *h, gs_block *b, gs_block **owner)
{
    free_request(h, b);
    b->state = GS_BLOCK_PENDING;
    b->owner = owner;
    b->right = h->pending;
    b->left = NULL;
    if (h->pending) h->pending->left = b;
    h->pending = b;
}

static void pending_unlink(gs_heap *h, gs_block *b)
{
    if (b->left) b->left->right = b->right;
    else h->pending = b->right;
    if (b->right) b->right->left = b->left;
    b->left = b->right = NULL;
    b->owner = NULL;
}

void gs_heap_free_complete(gs_heap *h, gs_block *b)
{
    g_return_if_fail(b->state == GS_BLOCK_PENDING);
    pending_unlink(h, b);
    free_block(h, b);
}

/* PyTorch's synchronize_and_free_events: the device is synchronised, so every pending free
 * completes now. Owners learn it through *owner = NULL. */
static void drain_pending(gs_heap *h)
{
    h->st.num_sync_all_streams++;
    while (h->pending) {
        gs_block *b = h->pending;
        if (b->owner) *b->owner = NULL;
        pending_unlink(h, b);
        free_block(h, b);
    }
}

/* PyTorch's release_blocks for one pool: cudaFree whole free segments; unmap the free blocks
 * of expandable segments afterwards (unmapping changes the index being walked), freeing each
 * reservation left with nothing mapped. */
static gs_status release_pool(gs_heap *h, unsigned pool)
{
    gs_tree *t = &h->pools[pool].blocks;
    GPtrArray *to_unmap = NULL;
    gs_status st = GS_OK;
    for (gs_block *b = index_lower_bound(t, 0, 0, 0), *next; b && st == GS_OK; b = next) {
        next = index_next(t, b);
        if (b->seg->expandable) {
            if (!to_unmap) to_unmap = g_ptr_array_new();
            g_ptr_array_add(to_unmap, b);
        } else if (!gs_block_is_split(b)) {
            st = gs_heap_release_block(h, b);
        }
    }
    /* Unmapping merges only unmapped neighbours and creates new free blocks, so the free blocks
     * gathered here all stay valid until their turn. */
    for (guint i = 0; to_unmap && i < to_unmap->len && st == GS_OK; i++) {
        gs_block *b = to_unmap->pdata[i];
        st = unmap_block(h, b);
        if (st == GS_OK && b->state == GS_BLOCK_UNMAPPED && !gs_block_is_split(b))
            st = release_expandable_segment(h, b);
    }
    if (to_unmap) g_ptr_array_free(to_unmap, TRUE);
    return st;
}

gs_status gs_heap_release_cached(gs_heap *h)
{
    drain_pending(h);
    for (unsigned i = 0; i < h->npools; i++) {
        gs_status st = release_pool(h, i);
        if (st != GS_OK) return st;
    }
    return GS_OK;
}

gs_status gs_heap_empty_cache(gs_heap *h)
{
    return gs_heap_release_cached(h);
}

/* Record the state that external_frag needs, once per new peak of reserved bytes (after the
 * malloc that raised it, so the new segment is seen serving its request). */
static void note_peak_reserved(gs_heap *h)
{
    uint64_t largest = 0, total = 0;
    for (unsigned i = 0; i < h->npools; i++) {
        for (gs_block *b = index_lower_bound(&h->pools[i].blocks, 0, 0, 0); b;
             b = index_next(&h->pools[i].blocks, b)) {
            total += b->size;
            if (b->size > largest) largest = b->size;
        }
    }
    h->st.largest_free_at_peak_reserved = largest;
    h->st.total_free_at_peak_reserved = total;
    h->peak_reserved_dirty = false;
}

/* Hand out (part of) a block found in the index or fresh from the device.
 * PyTorch's alloc_found_block. */
static gs_block *alloc_found_block(gs_heap *h, gs_block *b, uint64_t size, uint64_t orig)
{
    bool small = pool_small(h, b);
    bool already_split = gs_block_is_split(b);
    bool track_split = !b->seg->expandable; /* inactive_split leaves expandable blocks out */
    if (h->P->should_split(h->cfg, b, size)) {
        /* The allocation takes the low end; the remainder keeps the high end and goes back. */
        gs_block *rem = b;
        b = block_carve(h, rem, rem->addr, size, rem->prev, rem);
        rem->addr += size;
        rem->size -= size;
        pool_insert(h, rem);
        if (!track_split) {
        } else if (already_split) {
            stat2_dec(h->st.inactive_split_bytes, small, (int64_t)size);
        } else {
            stat2_inc(h->st.inactive_split_bytes, small, (int64_t)rem->size);
            stat2_inc(h->st.inactive_split, small, 1);
        }
    } else if (already_split && track_split) {
        stat2_dec(h->st.inactive_split_bytes, small, (int64_t)b->size);
        stat2_dec(h->st.inactive_split, small, 1);
    }
    b->state = GS_BLOCK_ALLOCATED;
    b->requested = orig;
    stat2_inc(h->st.allocation, small, 1);
    stat2_inc(h->st.allocated_bytes, small, (int64_t)b->size);
    stat2_inc(h->st.active, small, 1);
    stat2_inc(h->st.active_bytes, small, (int64_t)b->size);
    stat2_inc(h->st.requested_bytes, small, (int64_t)orig);
    if (b->size >= h->oversize) gs_stat_inc(&h->st.oversize_allocations, 1);
    const gs_stat *a = &h->st.allocated_bytes[GS_STAT_ALL];
    if (a->current == a->peak)
        h->st.requested_at_peak_allocated = h->st.requested_bytes[GS_STAT_ALL].current;
    return b;
}

gs_status gs_heap_malloc(gs_heap *h, uint64_t orig, uint32_t stream, gs_block **out)
{
    const gs_policy_ops *P = h->P;
    if (G_UNLIKELY(orig > GS_MAX_REQUEST)) {
        h->st.num_ooms++;
        return GS_ERR_OOM;
    }
    uint64_t size = P->round_size(h->cfg, orig);
    unsigned pool = P->pool_of(h->cfg, size);
    gs_block *b = get_free_block(h, pool, stream, size);
    if (!b) {
        /* The out-of-memory ladder, in PyTorch's order: garbage collection, grow, release some
         * and grow, release everything and grow again (the counted retry), fail. */
        uint64_t seg_size = P->segment_size(h->cfg, size);
        gs_status st = GS_OK;
        if (h->gc_active) {
            st = P->collect(h, h->cfg);
            if (st != GS_OK) return st;
        }
        st = alloc_block(h, pool, stream, size, seg_size, false, &b);
        if (st == GS_ERR_OOM && P->release_some) {
            gs_status rst = GS_OK;
            bool again = P->release_some(h, h->cfg, pool, stream, size, &rst);
            if (rst != GS_OK) return rst;
            if (again) st = alloc_block(h, pool, stream, size, seg_size, false, &b);
        }
        if (st == GS_ERR_OOM) {
            gs_status rst = gs_heap_release_cached(h);
            if (rst != GS_OK) return rst;
            st = alloc_block(h, pool, stream, size, seg_size, true, &b);
        }
        /* Other allocators on the device may hold what this one needs in their caches: only
         * worth asking when the device refused, not this heap's own limit. */
        if (st == GS_ERR_OOM && h->cb.reclaim &&
            !(h->limit && h->total_reserved + seg_size > h->limit)) {
            gs_status rst = GS_OK;
            bool again = h->cb.reclaim(h->cb.ud, h, seg_size, &rst);
            if (rst != GS_OK) return rst;
            if (again) {
                h->st.num_reclaim_retries++;
                st = alloc_block(h, pool, stream, size, seg_size, false, &b);
            }
        }
        if (st == GS_ERR_OOM) {
            h->st.num_ooms++;
            return GS_ERR_OOM;
        }
        if (st != GS_OK) return st;
    }
    *out = alloc_found_block(h, b, size, orig);
    if (h->peak_reserved_dirty) note_peak_reserved(h);
    return GS_OK;
}

void gs_heap_free_all(gs_heap *h)
{
    if (!h) return;
    /* Return every segment to the device, whatever its blocks' state: the program is gone. */
    while (h->segments) {
        gs_segment *s = h->segments;
        if (s->expandable) {
            for (uint64_t i = 0; i < s->size / s->page; i++) {
                if (!s->handles[i]) continue;
                (void)gs_dev_unmap(h->be, &h->calls, s->addr + i * s->page, s->page);
                (void)gs_dev_page_release(h->be, &h->calls, s->handles[i], s->page);
            }
            (void)gs_dev_va_release(h->be, &h->calls, s->addr, s->size);
            g_free(s->handles);
        } else {
            (void)gs_dev_free(h->be, &h->calls, s->addr, s->size);
        }
        segment_unlink(h, s);
        g_free(s);
    }
    g_ptr_array_free(h->slabs, TRUE);
    g_free(h);
}

/* ---- accessors for policies and reports ---- */

const gs_stats *gs_heap_stats(const gs_heap *h) { return &h->st; }
const gs_devcalls *gs_heap_devcalls(const gs_heap *h) { return &h->calls; }
const gs_policy *gs_heap_policy(const gs_heap *h) { return h->policy; }
uint64_t gs_heap_limit(const gs_heap *h) { return h->limit; }
uint64_t gs_heap_reserved(const gs_heap *h) { return h->total_reserved; }
void gs_heap_set_tag(gs_heap *h, uint32_t tag) { h->tag = tag; }
const gs_segment *gs_heap_segments(const gs_heap *h) { return h->segments; }

gs_block *gs_pool_lower_bound(const gs_heap *h, unsigned pool, uint32_t stream, uint64_t size)
{
    return index_lower_bound(&h->pools[pool].blocks, stream, size, 0);
}
gs_block *gs_pool_first(const gs_heap *h, unsigned pool)
{
    return index_lower_bound(&h->pools[pool].blocks, 0, 0, 0);
}
gs_block *gs_pool_last(const gs_heap *h, unsigned pool)
{
    gs_block *n = h->pools[pool].blocks.root;
    while (n && n->right) n = n->right;
    return n;
}
gs_block *gs_pool_next(const gs_heap *h, const gs_block *b)
{
    return index_next(&h->pools[b->pool].blocks, b);
}
gs_block *gs_pool_prev(const gs_heap *h, const gs_block *b)
{
    return index_prev(&h->pools[b->pool].blocks, b);
}
size_t gs_pool_count(const gs_heap *h, unsigned pool) { return h->pools[pool].blocks.count; }
uint64_t gs_block_age(const gs_heap *h, const gs_block *b)
{
    return h->pools[b->pool].get_free_calls - b->gc_base;
}

/* ------------------------------------------------------------------------------------------
 * The invariant check
 * ------------------------------------------------------------------------------------------ */

typedef struct {
    int n;
    char *first;
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

/* Walk a treap in order, checking order, heap property, and that it holds only blocks in state
 * (free, or unmapped) with the key that state implies; returns the node count. */
static size_t check_tree(check_ctx *c, const gs_heap *h, unsigned pool, const gs_block *n,
                         const gs_block **last, uint8_t state)
{
    if (!n) return 0;
    size_t k = check_tree(c, h, pool, n->left, last, state);
    INSIST(c, n->state == state, "index of pool %u holds a block in state %d, not %d (%#" G_GINT64_MODIFIER "x)", pool, n->state, state, n->addr);
    INSIST(c, n->skey == (((uint64_t)n->stream << 48) | (state == GS_BLOCK_FREE ? n->size : 0)),
           "block %#" G_GINT64_MODIFIER "x: stale index key", n->addr);
    INSIST(c, n->pool == pool, "block %#" G_GINT64_MODIFIER "x is in the index of pool %u but belongs to pool %u", n->addr, pool, n->pool);
    if (*last) INSIST(c, key_of(*last) < key_of(n), "index of pool %u out of order", pool);
    if (n->left) INSIST(c, n->left->prio <= n->prio, "treap heap property broken");
    if (n->right) INSIST(c, n->right->prio <= n->prio, "treap heap property broken");
    *last = n;
    return k + 1 + check_tree(c, h, pool, n->right, last, state);
}

int gs_heap_check(const gs_heap *h, char **why)
{
    check_ctx c = {0, NULL};
    gs_stats re;
    memset(&re, 0, sizeof re);
    size_t free_blocks[GS_MAX_POOLS] = {0}, unmapped_blocks[GS_MAX_POOLS] = {0};
    size_t nseg = 0;
    uint64_t reserved = 0;

    for (const gs_segment *s = h->segments; s; s = s->next) {
        nseg++;
        bool small = h->pools[s->pool].is_small;
        int t = small ? GS_STAT_SMALL : GS_STAT_LARGE;
        if (!s->expandable) {
            /* expandable segments count by their mapped bytes, below, and not as segments */
            reserved += s->size;
            re.segment[GS_STAT_ALL].current++;
            re.segment[t].current++;
            re.reserved_bytes[GS_STAT_ALL].current += (int64_t)s->size;
            re.reserved_bytes[t].current += (int64_t)s->size;
            if (s->size >= h->oversize) re.oversize_segments.current++;
        } else {
            INSIST(&c, s->page == h->pools[s->pool].page && s->page && s->size % s->page == 0,
                   "expandable segment %#" G_GINT64_MODIFIER "x: page size", s->addr);
        }
        INSIST(&c, s->head && s->head->prev == NULL, "segment %#" G_GINT64_MODIFIER "x: head block has a prev", s->addr);
        uint64_t at = s->addr, mapped = 0;
        bool split = !s->expandable && s->head && s->head->next != NULL;
        for (const gs_block *b = s->head; b; b = b->next) {
            INSIST(&c, b->seg == s, "block %#" G_GINT64_MODIFIER "x points to the wrong segment", b->addr);
            INSIST(&c, b->addr == at, "segment %#" G_GINT64_MODIFIER "x: gap or overlap at %#" G_GINT64_MODIFIER "x (block starts at %#" G_GINT64_MODIFIER "x)", s->addr, at, b->addr);
            INSIST(&c, b->size > 0, "block %#" G_GINT64_MODIFIER "x has size 0", b->addr);
            INSIST(&c, b->pool == s->pool && b->stream == s->stream, "block %#" G_GINT64_MODIFIER "x: pool/stream differ from its segment", b->addr);
            if (b->next) INSIST(&c, b->next->prev == b, "block %#" G_GINT64_MODIFIER "x: next->prev is not the block", b->addr);
            if (s->expandable) {
                /* Pages are mapped exactly under the blocks that are not unmapped. */
                bool um = b->state == GS_BLOCK_UNMAPPED;
                if (um) INSIST(&c, (b->addr - s->addr) % s->page == 0 && b->size % s->page == 0,
                               "unmapped block %#" G_GINT64_MODIFIER "x is not page-aligned", b->addr);
                else mapped += b->size;
                for (uint64_t a = (b->addr - s->addr) / s->page * s->page; a < b->addr + b->size - s->addr; a += s->page)
                    if (um) INSIST(&c, s->handles[a / s->page] == 0, "segment %#" G_GINT64_MODIFIER "x: page %" G_GUINT64_FORMAT " under an unmapped block has a handle", s->addr, a / s->page);
                    else INSIST(&c, s->handles[a / s->page] != 0, "segment %#" G_GINT64_MODIFIER "x: page %" G_GUINT64_FORMAT " under a mapped block has no handle", s->addr, a / s->page);
            } else {
                INSIST(&c, b->state != GS_BLOCK_UNMAPPED, "block %#" G_GINT64_MODIFIER "x: unmapped in a cudaMalloc segment", b->addr);
            }
            if (b->state == GS_BLOCK_UNMAPPED) {
                unmapped_blocks[b->pool]++;
                INSIST(&c, !(b->next && b->next->state == GS_BLOCK_UNMAPPED), "unmapped blocks should have coalesced at %#" G_GINT64_MODIFIER "x", b->next ? b->next->addr : 0);
            } else if (b->state == GS_BLOCK_FREE) {
                free_blocks[b->pool]++;
                INSIST(&c, !(b->next && b->next->state == GS_BLOCK_FREE), "blocks should have coalesced at %#" G_GINT64_MODIFIER "x", b->next ? b->next->addr : 0);
                if (split) {
                    re.inactive_split[GS_STAT_ALL].current++;
                    re.inactive_split[t].current++;
                    re.inactive_split_bytes[GS_STAT_ALL].current += (int64_t)b->size;
                    re.inactive_split_bytes[t].current += (int64_t)b->size;
                }
            } else {
                /* Allocated and pending blocks are both "active" in PyTorch's terms. */
                re.active[GS_STAT_ALL].current++;
                re.active[t].current++;
                re.active_bytes[GS_STAT_ALL].current += (int64_t)b->size;
                re.active_bytes[t].current += (int64_t)b->size;
                re.requested_bytes[GS_STAT_ALL].current += (int64_t)b->requested;
                re.requested_bytes[t].current += (int64_t)b->requested;
                if (b->state == GS_BLOCK_ALLOCATED) {
                    re.allocation[GS_STAT_ALL].current++;
                    re.allocation[t].current++;
                    re.allocated_bytes[GS_STAT_ALL].current += (int64_t)b->size;
                    re.allocated_bytes[t].current += (int64_t)b->size;
                    if (b->size >= h->oversize) re.oversize_allocations.current++;
                }
            }
            at += b->size;
        }
        INSIST(&c, at == s->addr + s->size, "segment %#" G_GINT64_MODIFIER "x: blocks cover %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " bytes", s->addr, at - s->addr, s->size);
        if (s->expandable) {
            INSIST(&c, mapped == s->mapped_pages * s->page, "expandable segment %#" G_GINT64_MODIFIER "x: blocks map %" G_GUINT64_FORMAT " bytes, pages say %" G_GUINT64_FORMAT, s->addr, mapped, s->mapped_pages * s->page);
            reserved += mapped;
            re.reserved_bytes[GS_STAT_ALL].current += (int64_t)mapped;
            re.reserved_bytes[t].current += (int64_t)mapped;
        }
    }
    INSIST(&c, nseg == h->nsegments, "segment list holds %zu segments, count says %zu", nseg, h->nsegments);
    INSIST(&c, reserved == h->total_reserved, "segments hold %" G_GUINT64_FORMAT " bytes, reserved says %" G_GUINT64_FORMAT, reserved, h->total_reserved);

    for (unsigned i = 0; i < h->npools; i++) {
        const gs_block *last = NULL;
        size_t n = check_tree(&c, h, i, h->pools[i].blocks.root, &last, GS_BLOCK_FREE);
        INSIST(&c, n == h->pools[i].blocks.count, "index of pool %u holds %zu blocks, count says %zu", i, n, h->pools[i].blocks.count);
        INSIST(&c, n == free_blocks[i], "index of pool %u holds %zu blocks, segments have %zu free", i, n, free_blocks[i]);
        last = NULL;
        n = check_tree(&c, h, i, h->pools[i].unmapped.root, &last, GS_BLOCK_UNMAPPED);
        INSIST(&c, n == h->pools[i].unmapped.count, "unmapped index of pool %u holds %zu blocks, count says %zu", i, n, h->pools[i].unmapped.count);
        INSIST(&c, n == unmapped_blocks[i], "unmapped index of pool %u holds %zu blocks, segments have %zu", i, n, unmapped_blocks[i]);
    }
    for (const gs_block *b = h->pending; b; b = b->right)
        INSIST(&c, b->state == GS_BLOCK_PENDING, "pending list holds a block that is not pending");

#define CHECK_ARRAY(name)                                                                    \
    for (int t = 0; t < GS_STAT_TYPES; t++)                                                  \
        INSIST(&c, re.name[t].current == h->st.name[t].current,                              \
               "stat " #name "[%d].current is %" G_GINT64_FORMAT ", recount gives %" G_GINT64_FORMAT, t, \
               h->st.name[t].current, re.name[t].current);
    GS_STAT_ARRAYS(CHECK_ARRAY)
#undef CHECK_ARRAY
    INSIST(&c, re.oversize_allocations.current == h->st.oversize_allocations.current, "stat oversize_allocations differs from recount");
    INSIST(&c, re.oversize_segments.current == h->st.oversize_segments.current, "stat oversize_segments differs from recount");

    if (why) *why = c.first;
    else g_free(c.first);
    return c.n;
}
