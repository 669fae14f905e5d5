/* core-int.h - the core's private header: struct gs_heap, the free-block index's types, and the
 * functions one file of core/ calls in another, grouped by the file that defines them.
 *
 * Only the core's own sources include it (core/meson.build defines GS_CORE_COMPILATION for
 * them alone); the rest of the program sees the core through core.h and policy.h. The helpers
 * that cross files on the hot path (index descents, block structs, statistics) are static
 * inline here, so the split into files adds no call where a replay spends its time.
 *
 *   index.c       the free-block index (a treap per pool) and the policies' view of it
 *   heap.c        blocks, segments, malloc and free, the out-of-memory ladder, release
 *   expandable.c  expandable segments: reserve, map, unmap, release
 *   check.c       gs_heap_check
 */
#ifndef GS_CORE_INT_H
#define GS_CORE_INT_H

#ifndef GS_CORE_COMPILATION
#error "core-int.h is private to core/: include core.h (and policy.h) instead"
#endif

#include <stddef.h>
#include <string.h>

#include "core.h"
#include "policy.h"

/* ------------------------------------------------------------------------------------------
 * The free-block index's types (index.c)
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
 * not instructions, are what a descent costs. The high half, a block's skey, is
 * stream << GS_KEY_SIZE_BITS | size: sizes stay below 2^48 (256 TiB), streams below 2^16
 * (GS_MAX_STREAMS; checked where blocks enter the index). */
typedef unsigned __int128 gs_key;
#define GS_KEY_SIZE_BITS 48

_Static_assert(sizeof(gs_key) == 2 * sizeof(uint64_t), "gs_key is (skey, addr) in 128 bits");
_Static_assert((uint64_t)(GS_MAX_STREAMS - 1) <= UINT64_MAX >> GS_KEY_SIZE_BITS,
               "a stream index fits the skey's high 16 bits");
_Static_assert(2 * GS_MAX_REQUEST < UINT64_C(1) << GS_KEY_SIZE_BITS,
               "a request, rounded up (at most doubled), fits the skey's low 48 bits");

/* A free block's skey; an unmapped block's is skey_of(stream, 0), its order (stream, addr). */
static inline uint64_t skey_of(uint32_t stream, uint64_t size)
{
    return ((uint64_t)stream << GS_KEY_SIZE_BITS) | size;
}

static inline gs_key make_key(uint32_t stream, uint64_t size, uint64_t addr)
{
    return ((gs_key)skey_of(stream, size) << 64) | addr;
}

/* A block's key, from the high half cached when it entered the index (its size and address
 * never change while it is there). */
static inline gs_key key_of(const gs_block *b) { return ((gs_key)b->skey << 64) | b->addr; }

/* ------------------------------------------------------------------------------------------
 * The heap (heap.c)
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
    /* Pages of expandable segments already unmapped whose cuMemRelease failed: pairs (handle,
     * size), released again at teardown (NULL until one fails). */
    GArray *orphans;
};

/* ------------------------------------------------------------------------------------------
 * Functions of one file called in another, by defining file
 * ------------------------------------------------------------------------------------------ */

/* "index.c": the treap, for a pool's free blocks or its unmapped ones */
void gs_index_insert(gs_tree *p, gs_block *b);                  /* b->skey set by the caller */
void gs_index_unlink(gs_tree *p, gs_block **link, gs_block *b); /* b, reached through *link */

/* "heap.c" */
void gs_block_slab_refill(gs_heap *h);
uint64_t gs_block_try_merge(gs_heap *h, gs_block *dst, gs_block *src);
void gs_segment_link(gs_heap *h, gs_segment *s);
void gs_segment_unlink(gs_heap *h, gs_segment *s);

/* "expandable.c" */
gs_status gs_expandable_grow(gs_heap *h, unsigned pool, uint32_t stream, uint64_t size,
                             gs_block **out);
gs_status gs_expandable_unmap(gs_heap *h, gs_block *b);
gs_status gs_expandable_release(gs_heap *h, gs_block *b);
size_t gs_expandable_destroy(gs_heap *h, gs_segment *s);
size_t gs_expandable_release_orphans(gs_heap *h);

/* ------------------------------------------------------------------------------------------
 * Inline, for the hot path: on most events a malloc descends the index, and a split or a merge
 * makes or drops a block.
 * ------------------------------------------------------------------------------------------ */

/* ---- index descents (the treap is index.c's) ---- */

static inline void index_remove(gs_tree *p, gs_block *b)
{
    gs_block **link = &p->root;
    gs_key k = key_of(b);
    while (*link != b) link = k < key_of(*link) ? &(*link)->left : &(*link)->right;
    gs_index_unlink(p, link, b);
}

/* The lower bound of (stream, size, 0) and the link that points to it, in one descent. */
static inline gs_block **index_lower_bound_link(gs_tree *p, uint32_t stream, uint64_t size)
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

static inline gs_block *index_lower_bound(const gs_tree *p, uint32_t stream, uint64_t size,
                                          uint64_t addr)
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

static inline gs_block *index_next(const gs_tree *p, const gs_block *b)
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

static inline gs_block *index_prev(const gs_tree *p, const gs_block *b)
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

/* ---- statistics ---- */

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

/* Reserved bytes went up: at a new peak, gs_heap_malloc records the free state once the
 * request is served (note_peak_reserved, heap.c). */
static inline void note_reserved_up(gs_heap *h)
{
    if (h->st.reserved_bytes[GS_STAT_ALL].current == h->st.reserved_bytes[GS_STAT_ALL].peak)
        h->peak_reserved_dirty = true;
}

/* ---- block structs ---- */

static inline gs_block *block_new(gs_heap *h)
{
    if (!h->spare) gs_block_slab_refill(h);
    gs_block *b = h->spare;
    h->spare = b->right;
    memset(b, 0, sizeof *b);
    return b;
}

static inline void block_delete(gs_heap *h, gs_block *b)
{
    b->right = h->spare;
    h->spare = b;
}

/* A new block [addr, addr+size) in like's segment (same stream and pool), linked between before
 * and after (either may be NULL). The caller puts it in an index. */
static inline gs_block *block_carve(gs_heap *h, const gs_block *like, uint64_t addr,
                                    uint64_t size, gs_block *before, gs_block *after)
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

/* ---- the pools' two indexes ---- */

/* Insert a free block into its pool's index; its GC age starts now. */
static inline void pool_insert(gs_heap *h, gs_block *b)
{
    gs_pool *p = &h->pools[b->pool];
    b->state = GS_BLOCK_FREE;
    b->gc_base = p->get_free_calls;
    b->skey = skey_of(b->stream, b->size);
    gs_index_insert(&p->blocks, b);
}

static inline void pool_remove(gs_heap *h, gs_block *b)
{
    index_remove(&h->pools[b->pool].blocks, b);
}

static inline void unmapped_insert(gs_heap *h, gs_block *b)
{
    b->state = GS_BLOCK_UNMAPPED;
    b->skey = skey_of(b->stream, 0);
    gs_index_insert(&h->pools[b->pool].unmapped, b);
}

static inline void unmapped_remove(gs_heap *h, gs_block *b)
{
    index_remove(&h->pools[b->pool].unmapped, b);
}

#endif
