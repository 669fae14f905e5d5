/* core-int.h - the core's private header: struct gs_heap, the free-block index's types, and the
 * functions one file of core/ calls in another, grouped by the file that defines them.
 *
 * Only the core's own sources include it (core/meson.build defines GS_CORE_COMPILATION for
 * them alone); the rest of the program sees the core through core.h and policy.h. The helpers
 * that cross files on the hot path (index descents, block structs, statistics) are static
 * inline here, so the split into files adds no call where a replay spends its time.
 *
 *   index.c       the free-block indexes (size classes, each a list or a treap, per pool and
 *                 stream; a treap for unmapped blocks) and the policies' view of them
 *   heap.c        blocks, segments, malloc and free, the out-of-memory ladder, release
 *   expandable.c  expandable segments: reserve, map, unmap, release
 *   stitch.c      stitched expandable segments: growth by moving free physical handles
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

/* For the few helpers the hot path must not pay a call for, whatever the compiler's estimate. */
#if defined(__GNUC__)
#define GS_HOT static inline __attribute__((always_inline))
#else
#define GS_HOT static inline
#endif
/* For functions the hot path calls only on a rare branch: the compiler keeps the call's set-up
 * off the common path (a plain call there made it spill registers on every malloc). */
#if defined(__GNUC__)
#define GS_COLD __attribute__((cold))
#else
#define GS_COLD
#endif

/* ------------------------------------------------------------------------------------------
 * The free-block index's types (index.c)
 * ------------------------------------------------------------------------------------------ */

/* A treap, intrusive in the blocks: a pool's unmapped blocks, by (stream, addr). */
typedef struct {
    gs_block *root;
    size_t count;
} gs_tree;

/* A pool's free blocks, in PyTorch's order (stream, size, addr), as two-level segregated size
 * classes (TLSF's) per stream, each class a sorted list or a treap by (size, addr):
 *   class    sizes [GS_SL + sl, GS_SL + sl + 1) << (row - 1) for row >= 1 (GS_SL = 64
 *            classes per power of two); row 0 holds the sizes below GS_SL, one class each.
 *            Classes ascend with size, so a lower bound is the lower bound within the
 *            request's own class, else the smallest block of the next class that holds
 *            blocks, which two bitmaps give at once (no descent through other sizes);
 *   stream   its rows (allocated when first used), and the largest size it holds, brought up
 *            to date when asked for (the largest moves on most updates where a pool grows by
 *            mapping pages: an update only marks the stream);
 *   pool     its streams by index, and a tournament tree over the streams' largest sizes,
 *            whose root is the pool's.
 * A class is a sorted list until a walk along it (an insertion's, a lower bound's) would pass
 * more than GS_CLASS_WALK blocks; then a treap until it is empty again. Most classes hold a few
 * blocks, or many of one size where a freed block's place is near the list's head (the lowest
 * addresses are reused first): a short walk costs fewer instructions and far fewer mispredicted
 * branches than a treap's descent, and removing a known block from a list is a splice. The
 * treap keeps a class of thousands (10^6 live blocks) logarithmic, and no walk is longer than
 * GS_CLASS_WALK. */
#define GS_SL_BITS 6
#define GS_SL (1u << GS_SL_BITS)
#define GS_FL (48 - GS_SL_BITS + 1) /* rows for every size below 2^48 (GS_KEY_SIZE_BITS) */
#define GS_CLASS_WALK 64 /* the longest walk along a class's list; a longer one makes a treap */

typedef struct {
    uint64_t bits;          /* classes that hold blocks */
    uint64_t tree;          /* classes kept as a treap; the others are sorted lists */
    gs_block *cls[GS_SL];   /* each class's list head, or its treap's root */
} gs_frow;

typedef struct {
    uint64_t rows_bits;     /* rows that hold blocks (none: the stream holds none) */
    uint64_t largest;       /* the largest block's size (0 when empty), unless dirty */
    bool dirty;             /* largest may be out of date: the stream is on its pool's list */
    bool addr_order;        /* its findex's by_addr, copied here: tested with dirty's line */
    gs_frow *rows[GS_FL];   /* NULL until the row is first used */
    /* When the findex is by_addr, its blocks in address order (addr_index.c): */
    gs_block *by_addr;      /* the list's first block, or the treap's root (atree) */
    gs_block *afinger;      /* list: a block of the list (NULL: its head), where an insertion
                             * starts to look for its place: the last removal's neighbour */
    uint32_t naddr;         /* its blocks */
    bool atree;             /* a treap, not a list */
} gs_fstream;

typedef struct {
    gs_fstream **s;         /* by stream index; NULL until the stream has had a free block */
    uint32_t ns;            /* length of s and tmax / 2: a power of two, or 0 */
    uint64_t *tmax;         /* tournament: tmax[ns + i] is stream i's largest, tmax[1] the pool's
                             * (up to date once the dirty streams are refreshed) */
    uint32_t *dirty;        /* the streams whose largest may be out of date */
    uint32_t ndirty, dirty_cap;
    bool by_addr;           /* also kept in address order (gs_policy_ops.addr_order) */
    /* by_addr: the free blocks that are whole segments, in no order (seg->whole_at - 1 is each
     * one's place) */
    gs_block **whole;
    uint32_t nwhole, whole_cap;
} gs_findex;

typedef struct {
    gs_findex blocks;        /* free blocks by (stream, size, addr) */
    gs_tree unmapped;        /* unmapped blocks of expandable segments by (stream, addr) */
    uint64_t get_free_calls; /* PyTorch's get_free_blocks_call_count (GC ages) */
    uint64_t page;           /* expandable segments' handle size; 0: grows by cudaMalloc */
    bool stitch;             /* its expandable segments are stitched (stitch.c) */
    gs_stitch_conf sc;       /* stitched: how it grows (policy.h) */
    uint8_t type;            /* its stat type: GS_STAT_SMALL or GS_STAT_LARGE */
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

/* Blocks come from slabs (64-byte aligned, so each block's first line is one cache line): a split
 * or merge happens on most events, and malloc/free per block would dominate the replay time. */
#define SLAB_BLOCKS 256

/* The policy's rounding and pool choice for recent request sizes, direct-mapped by a hash of
 * the size: both hooks are pure functions of the size (policy.h: a hook keeps no state), and a
 * program asks for the same few dozen sizes again and again. An entry whose orig is
 * GS_ROUND_MEMO_EMPTY (no request is that large) holds nothing. */
#define GS_ROUND_MEMO 256
#define GS_ROUND_MEMO_EMPTY UINT64_MAX
typedef struct {
    uint64_t orig, size;
    unsigned pool;
} gs_round_memo;

/* A private pool (PyTorch's PrivatePool), by its slot k: heap pools k * GS_MAX_POOLS + p. */
typedef struct {
    uint32_t id;    /* the caller's id; 0: the slot is free */
    int32_t uses;   /* PyTorch's use_count */
    bool freeable;  /* no use left: released by gs_heap_release_cached */
} gs_ppool;

/* An open route (PyTorch's captures_underway entry): requests on stream, or on every stream,
 * go to private pool slot k. */
typedef struct {
    uint8_t k;
    bool all_streams;
    uint32_t stream;
} gs_route;
#define GS_MAX_ROUTES 16

struct gs_heap {
    const gs_policy *policy;
    const gs_policy_ops *P;
    const void *cfg;
    gs_backend *be;
    uint64_t limit;
    uint64_t reject_above;   /* gs_policy_ops.reject_above's bound; 0: none */
    uint64_t device_total;   /* sizes expandable reservations */
    uint64_t oversize;       /* the policy's oversize threshold, cached */
    bool gc_active;          /* limit set and the policy collects garbage */
    bool gc_ages;            /* blocks' GC ages kept: gc_active, or asked (gs_heap_keep_gc_ages) */
    bool keeps_cache;        /* the policy's keeps_cache, asked once */
    bool has_rule;           /* the policy's fit_rule gave rule: applied inline (heap.c) */
    bool plain;              /* has_rule, no GC, no pick, no expandable pool, no address order:
                              * malloc and free take a path compiled without those branches */
    gs_fit_rule rule;
    gs_pool pools[GS_MAX_POOLS_ALL]; /* the policy's pools, then each private pool's copies */
    unsigned npools;         /* the policy's */
    unsigned pool_hi;        /* pools at or above this are empty (no private pool above) */
    unsigned nroutes;        /* open routes: 0 on the hot path */
    gs_route routes[GS_MAX_ROUTES];
    gs_ppool priv[GS_MAX_PRIVATE_POOLS + 1]; /* by slot; [0] unused (the ordinary pools) */
    gs_segment *segments;    /* live segments, newest first */
    size_t nsegments;
    gs_block *pending;       /* frees awaiting completion, linked through ->right */
    /* Recycled block structs, a stack of pointers (not a list through the blocks: taking one
     * then reads no cold block) of nspare of cap entries. */
    gs_block **spare;
    size_t nspare, spare_cap;
    GPtrArray *slabs;
    uint64_t total_reserved; /* PyTorch's total_allocated_memory */
    /* The most reserved bytes a limit check has asked for, limit or none (an expandable pool
     * checks the size of a segment, then maps only the pages it lacks): with the reserved
     * bytes' peak, the smallest limit that would have refused nothing so far. */
    uint64_t limit_asked;
    /* Under a limit, the limits that would have decided every check so far as this one did
     * (gs_heap_same_limits): those in [limit_kept, limit_refused). A check that passed asked for
     * at most limit_kept; the least one refused asked for limit_refused. */
    uint64_t limit_kept, limit_refused;
    bool peak_reserved_dirty;
    uint32_t tag;            /* stamped on new segments */
    gs_heap_config cb;       /* ud, reclaim, on_reserve (several allocators on one device) */
    bool moving; /* stitch is moving a handle: its unmap is no release (gs_heap_moving) */
    /* stitch served or failed a request at the limit without the ladder's release of the cache
     * (another stream's handles, a request no release could serve): the next capture's start
     * releases it instead (gs_heap_pool_begin), as a capture cannot */
    bool flush_owed;
    gs_stats st;             /* freed and active figures stale until gs_heap_stats */
    /* Calls that may change the statistics (the public malloc, free and release entry points),
     * and their number when gs_heap_stats last filled in the derived figures. */
    uint64_t nops, filled_ops;
    uint64_t now_ops;        /* nops when gs_heap_stats_now (or gs_heap_stats) last filled in */
    /* Frees requested and not yet completed (gs_heap_free_request), by stat type: count and
     * bytes (active = allocation + these), and the highest active figures reached while some
     * were pending (active's peak is the larger of allocation's and these). */
    int64_t pend_n[GS_STAT_TYPES], pend_bytes[GS_STAT_TYPES];
    int64_t active_peak_n[GS_STAT_TYPES], active_peak_bytes[GS_STAT_TYPES];
    gs_devcalls calls;
    gs_round_memo memo[GS_ROUND_MEMO];
    /* Pages of expandable segments already unmapped whose cuMemRelease failed: pairs (handle,
     * size), released again at teardown (NULL until one fails). */
    GArray *orphans;
    /* The driver calls of one batch (gs_dev_batch): an expandable segment's pages are created,
     * mapped, unmapped and released in batches, built here. */
    gs_dev_call *dcalls;
    size_t dcalls_cap;
    uint64_t policy_state[GS_POLICY_STATE_WORDS]; /* gs_heap_policy_state */
};

/* ------------------------------------------------------------------------------------------
 * Functions of one file called in another, by defining file
 * ------------------------------------------------------------------------------------------ */

/* "index.c": treaps (a size class's, or the unmapped blocks'), and the size-class index's
 * cold paths */
G_GNUC_NORETURN void gs_segment_too_large(const gs_segment *s);
gs_fstream *gs_findex_stream_new(gs_findex *x, uint32_t stream);
gs_frow *gs_findex_row_new(gs_fstream *s, unsigned fl);
void gs_findex_mark(gs_findex *x, gs_fstream *s, uint32_t stream);
void gs_findex_refresh(gs_findex *x);
gs_block *gs_findex_first_from(const gs_findex *x, uint32_t stream);  /* first of a stream >= */
gs_block *gs_findex_after_class(const gs_findex *x, const gs_block *b);
gs_block *gs_findex_prev(const gs_findex *x, const gs_block *b);
void gs_findex_free(gs_findex *x); /* frees what x holds; x is left empty, its by_addr kept */

/* "addr_index.c": a findex's address order, for the policies that ask for it */
GS_COLD void gs_addr_insert(gs_findex *x, gs_fstream *s, gs_block *b);
GS_COLD void gs_addr_remove(gs_findex *x, gs_fstream *s, gs_block *b);
/* A stream switches from list to treap above GS_ADDR_TREE_AT blocks, and back below
 * GS_ADDR_LIST_AT. */
#define GS_ADDR_TREE_AT 128
#define GS_ADDR_LIST_AT 32

/* "heap.c" */
void gs_block_slab_refill(gs_heap *h);
void gs_block_spare_grow(gs_heap *h);
uint64_t gs_block_try_merge(gs_heap *h, gs_block *dst, gs_block *src);
void gs_segment_link(gs_heap *h, gs_segment *s);
void gs_segment_unlink(gs_heap *h, gs_segment *s);

/* "expandable.c" */
gs_status gs_expandable_grow(gs_heap *h, unsigned pool, uint32_t stream, uint64_t size,
                             bool check_limit, gs_block **out);
gs_status gs_expandable_unmap(gs_heap *h, gs_block *b);
gs_status gs_expandable_release(gs_heap *h, gs_block *b);
size_t gs_expandable_destroy(gs_heap *h, gs_segment *s);
size_t gs_expandable_release_orphans(gs_heap *h);
gs_status gs_expandable_new_segment(gs_heap *h, unsigned pool, uint32_t stream, gs_block **out);
gs_status gs_expandable_release_page(gs_heap *h, uint64_t handle, uint64_t size);
/* The mapped pages at the start of unmapped block u ([u->addr, +bytes)) become a free block,
 * merged with its free neighbours and put into the index; the rest of u stays unmapped. Returns
 * the free block (map_block's end, and stitch's when it maps moved handles). */
gs_block *gs_expandable_settle(gs_heap *h, gs_block *u, uint64_t bytes);

/* "stitch.c" */
gs_status gs_stitch_grow(gs_heap *h, unsigned pool, uint32_t stream, uint64_t size,
                         gs_block **out);
gs_status gs_stitch_unmap(gs_heap *h, gs_block *b);

/* ------------------------------------------------------------------------------------------
 * Inline, for the hot path: on most events a malloc descends the index, and a split or a merge
 * makes or drops a block.
 * ------------------------------------------------------------------------------------------ */

/* ---- treaps (unlinking is index.c's) ---- */

/* A block's treap priority: a hash of its address (Fibonacci hashing), so neighbouring
 * addresses get unrelated priorities and a replay is deterministic. Computed where compared
 * (the address is read with the key anyway), not stored. */
static inline uint32_t prio_of(uint64_t addr)
{
    return (uint32_t)((addr * UINT64_C(0x9e3779b97f4a7c15)) >> 32);
}

/* Insert b, whose skey the caller has set, into the treap at *root. Top-down, in one pass: walk
 * down while the nodes outrank b, then b takes that place and the subtree found there is split
 * by b's key into b's left and right subtrees. */
GS_HOT void treap_insert(gs_block **root, gs_block *b)
{
    uint32_t prio = prio_of(b->addr);
    gs_key k = key_of(b);
    gs_block **link = root;
    while (*link && prio_of((*link)->addr) >= prio)
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
}

/* Remove b, reached through *link: rotate it down (the child with the higher priority comes
 * up) until it has at most one child, then splice it out. */
GS_HOT void treap_unlink(gs_block **link, gs_block *b)
{
    for (;;) {
        gs_block *l = b->left, *r = b->right;
        if (!l) { *link = r; break; }
        if (!r) { *link = l; break; }
        if (prio_of(l->addr) > prio_of(r->addr)) {
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
}

/* The link to b, a block of the treap at *root: a descent by b's key. */
static inline gs_block **treap_link(gs_block **root, const gs_block *b)
{
    gs_block **link = root;
    gs_key k = key_of(b);
    while (*link != b) link = k < key_of(*link) ? &(*link)->left : &(*link)->right;
    return link;
}

static inline void index_remove(gs_tree *p, gs_block *b)
{
    treap_unlink(treap_link(&p->root, b), b);
    p->count--;
}

/* The smallest block with key >= k under root, or NULL. */
static inline gs_block *treap_lower_bound(gs_block *n, gs_key k)
{
    gs_block *best = NULL;
    while (n) {
        bool left = k <= key_of(n);
        best = left ? n : best;
        n = left ? n->left : n->right;
    }
    return best;
}

/* The link to the smallest block with key >= k under *link, or NULL. */
static inline gs_block **treap_lower_bound_link(gs_block **link, gs_key k)
{
    gs_block **best = NULL;
    while (*link) {
        bool left = k <= key_of(*link);
        best = left ? link : best;
        link = left ? &(*link)->left : &(*link)->right;
    }
    return best;
}

/* The smallest block with key > k under n, or NULL; and the largest with key < k. */
static inline gs_block *treap_after(gs_block *n, gs_key k)
{
    gs_block *best = NULL;
    while (n) {
        bool left = k < key_of(n);
        best = left ? n : best;
        n = left ? n->left : n->right;
    }
    return best;
}

static inline gs_block *treap_before(gs_block *n, gs_key k)
{
    gs_block *best = NULL;
    while (n) {
        bool right = k > key_of(n);
        best = right ? n : best;
        n = right ? n->right : n->left;
    }
    return best;
}

static inline gs_block *treap_min(gs_block *n)
{
    while (n->left) n = n->left;
    return n;
}

static inline gs_block *treap_max(gs_block *n)
{
    while (n->right) n = n->right;
    return n;
}

static inline gs_block *index_lower_bound(const gs_tree *p, uint32_t stream, uint64_t size,
                                          uint64_t addr)
{
    return treap_lower_bound(p->root, make_key(stream, size, addr));
}

static inline gs_block *index_next(const gs_tree *p, const gs_block *b)
{
    return treap_after(p->root, key_of(b));
}

/* ---- a size class: a sorted list, or a treap ----
 *
 * A list runs through left (the next block, larger key; NULL at the tail) and right (the
 * previous block; the head's is the tail, so both ends are one load away). Its blocks are of
 * one stream, so the order (size, addr) is skey's, then addr's. */

static inline bool class_is_tree(const gs_frow *r, unsigned sl)
{
    return r->tree >> sl & 1;
}

static inline gs_block *class_min(const gs_frow *r, unsigned sl)
{
    return class_is_tree(r, sl) ? treap_min(r->cls[sl]) : r->cls[sl];
}

static inline gs_block *class_max(const gs_frow *r, unsigned sl)
{
    return class_is_tree(r, sl) ? treap_max(r->cls[sl]) : r->cls[sl]->right;
}

/* The block after b in its class, or NULL; and the one before. */
static inline gs_block *class_after(const gs_frow *r, unsigned sl, const gs_block *b)
{
    return class_is_tree(r, sl) ? treap_after(r->cls[sl], key_of(b)) : b->left;
}

static inline gs_block *class_before(const gs_frow *r, unsigned sl, const gs_block *b)
{
    if (class_is_tree(r, sl)) return treap_before(r->cls[sl], key_of(b));
    return b == r->cls[sl] ? NULL : b->right;
}

void gs_class_to_tree(gs_frow *r, unsigned sl);

/* The first block of the class with skey >= key (the class's blocks are of key's stream), and
 * in *link the treap's link to it; NULL if none. A list whose walk gets too long becomes a
 * treap first (a change of form: the policies' const view may cause it too). */
GS_HOT gs_block *class_lower_bound(gs_frow *r, unsigned sl, uint64_t key, gs_block ***link)
{
    if (G_LIKELY(!class_is_tree(r, sl))) {
        gs_block *b = r->cls[sl];
        for (unsigned i = 0; b && b->skey < key; i++, b = b->left)
            if (G_UNLIKELY(i == GS_CLASS_WALK)) goto tree;
        return b;
    tree:
        gs_class_to_tree(r, sl);
    }
    *link = treap_lower_bound_link(&r->cls[sl], (gs_key)key << 64);
    return *link ? **link : NULL;
}

/* Insert b (its skey set) into class sl of row r. */
GS_HOT void class_insert(gs_frow *r, unsigned sl, gs_block *b)
{
    if (G_UNLIKELY(class_is_tree(r, sl))) {
        treap_insert(&r->cls[sl], b);
        return;
    }
    gs_block *h = r->cls[sl];
    gs_key k = key_of(b);
    if (!h || k < key_of(h)) { /* the new head */
        b->left = h;
        b->right = h ? h->right : b;
        if (h) h->right = b;
        r->cls[sl] = b;
        return;
    }
    gs_block *p = h;
    for (unsigned i = 0; p->left && key_of(p->left) < k; i++, p = p->left) {
        if (G_UNLIKELY(i == GS_CLASS_WALK)) {
            gs_class_to_tree(r, sl);
            treap_insert(&r->cls[sl], b);
            return;
        }
    }
    gs_block *n = p->left;
    b->left = n;
    b->right = p;
    p->left = b;
    if (n) n->right = b;
    else h->right = b; /* the new tail */
}

/* Take b out of class sl of row r; link is the treap's link to it (unused for a list). */
GS_HOT void class_unlink(gs_frow *r, unsigned sl, gs_block **link, gs_block *b)
{
    if (G_UNLIKELY(class_is_tree(r, sl))) {
        treap_unlink(link, b);
        if (!r->cls[sl]) r->tree &= ~(UINT64_C(1) << sl); /* empty: a list again */
        return;
    }
    gs_block *h = r->cls[sl], *n = b->left, *p = b->right;
    if (b == h) {
        r->cls[sl] = n;
        if (n) n->right = p; /* p is the tail */
    } else {
        p->left = n;
        if (n) n->right = p;
        else h->right = p; /* the new tail */
    }
}

/* ---- the size-class index of free blocks ---- */

/* The class of a size: its row, and its class within the row in *sl. */
static inline unsigned size_class(uint64_t size, unsigned *sl)
{
    if (size < GS_SL) {
        *sl = (unsigned)size;
        return 0;
    }
    unsigned f = 63u - (unsigned)__builtin_clzll(size);
    *sl = (unsigned)(size >> (f - GS_SL_BITS)) & (GS_SL - 1);
    return f - GS_SL_BITS + 1;
}

/* Where a block is (or would be) in the index: its stream, row, class and the link to it. */
typedef struct {
    gs_fstream *s;
    gs_frow *r;
    unsigned fl, sl;
    gs_block **link; /* in a treap class; NULL in a list */
} gs_fpos;

/* The smallest block of stream's with size >= size (the best fit's candidate), with its
 * position, or NULL: a descent of the request's class, else the smallest block of the next
 * class that holds any. */
GS_HOT gs_block *findex_lower_bound_in(const gs_findex *x, uint32_t stream, uint64_t size,
                                              gs_fpos *at)
{
    gs_fstream *s = stream < x->ns ? x->s[stream] : NULL;
    if (!s || !s->rows_bits) return NULL;
    unsigned sl, fl = size_class(size, &sl);
    gs_frow *r = s->rows[fl];
    gs_block **link = NULL, *b = NULL;
    if (r && (r->bits >> sl & 1)) b = class_lower_bound(r, sl, skey_of(stream, size), &link);
    if (!b) {
        uint64_t above = r ? r->bits >> sl >> 1 : 0; /* the row's larger classes */
        if (above) {
            sl += 1 + (unsigned)__builtin_ctzll(above);
        } else {
            uint64_t rows = s->rows_bits >> fl >> 1;
            if (!rows) return NULL;
            fl += 1 + (unsigned)__builtin_ctzll(rows);
            r = s->rows[fl];
            sl = (unsigned)__builtin_ctzll(r->bits);
        }
        link = &r->cls[sl];
        if (G_UNLIKELY(class_is_tree(r, sl)))
            while ((*link)->left) link = &(*link)->left;
        b = *link;
    }
    at->s = s;
    at->r = r;
    at->fl = fl;
    at->sl = sl;
    at->link = link;
    return b;
}

/* The *_as forms take plain (gs_heap.plain) as a constant: gs_heap_malloc and gs_heap_free
 * inline them twice, once with true for the common case (the branches plain rules out compiled
 * away: 12% fewer conditional branches and 6% fewer instructions an event on gpt2 under pytorch)
 * and once with false; the plain names are the general path. */
GS_HOT void findex_insert_as(gs_findex *x, gs_block *b, const bool plain)
{
    uint32_t st = b->stream;
    gs_fstream *s = st < x->ns ? x->s[st] : NULL;
    if (G_UNLIKELY(!s)) s = gs_findex_stream_new(x, st); /* refuses st >= GS_MAX_STREAMS */
    unsigned sl, fl = size_class(b->size, &sl);
    b->fl = (uint8_t)fl;
    b->sl = (uint8_t)sl;
    gs_frow *r = s->rows[fl];
    if (G_UNLIKELY(!r)) r = gs_findex_row_new(s, fl);
    s->rows_bits |= UINT64_C(1) << fl;
    r->bits |= UINT64_C(1) << sl;
    class_insert(r, sl, b);
    if (!s->dirty && b->size > s->largest) gs_findex_mark(x, s, st);
    if (!plain && G_UNLIKELY(s->addr_order)) gs_addr_insert(x, s, b);
}

GS_HOT void findex_insert(gs_findex *x, gs_block *b) { findex_insert_as(x, b, false); }

/* Take out b, found at position at. */
GS_HOT void findex_unlink_as(gs_findex *x, const gs_fpos *at, gs_block *b, const bool plain)
{
    gs_fstream *s = at->s;
    class_unlink(at->r, at->sl, at->link, b);
    /* an emptied class, then an emptied row, leaves its bitmap: masks, not branches (whether a
     * class empties is as good as random) */
    at->r->bits &= ~((uint64_t)(at->r->cls[at->sl] == NULL) << at->sl);
    s->rows_bits &= ~((uint64_t)(at->r->bits == 0) << at->fl);
    if (!s->dirty && b->size == s->largest) gs_findex_mark(x, s, b->stream);
    if (!plain && G_UNLIKELY(s->addr_order)) gs_addr_remove(x, s, b);
}

GS_HOT void findex_unlink(gs_findex *x, const gs_fpos *at, gs_block *b)
{
    findex_unlink_as(x, at, b, false);
}

/* Take out b, a block of the index: a splice from its class's list, or a descent of its
 * class's treap. */
GS_HOT void findex_remove_as(gs_findex *x, gs_block *b, const bool plain)
{
    gs_fpos at;
    at.s = x->s[b->stream];
    at.fl = b->fl;
    at.sl = b->sl;
    at.r = at.s->rows[at.fl];
    at.link = G_UNLIKELY(class_is_tree(at.r, at.sl)) ? treap_link(&at.r->cls[at.sl], b) : NULL;
    findex_unlink_as(x, &at, b, plain);
}

GS_HOT void findex_remove(gs_findex *x, gs_block *b) { findex_remove_as(x, b, false); }

/* The block after b in the index if of b's stream (else NULL): its class's next, else the
 * first of a later class. The policies' view steps on to later streams (gs_pool_next). */
GS_HOT gs_block *findex_next_in(const gs_findex *x, const gs_block *b)
{
    gs_block *n = class_after(x->s[b->stream]->rows[b->fl], b->sl, b);
    return n ? n : gs_findex_after_class(x, b);
}

/* The pool's largest free block's size (0 when it has none). */
static inline uint64_t findex_largest(gs_findex *x)
{
    if (x->ndirty) gs_findex_refresh(x);
    return x->ns ? x->tmax[1] : 0;
}

/* ---- statistics ----
 *
 * The core keeps each type's (small, large) gs_stat as PyTorch changes it, and derives two kinds
 * of figure only when asked (gs_heap_stats, heap.c, once per change of the heap): the "all"
 * entries' current, allocated and freed, the sums of the two types' (the hot path keeps only
 * "all"'s peak), and active and active_bytes, which move with allocation and allocated_bytes
 * (up together at an allocation, down at the free) except while a deferred free is pending
 * (heap's pend_*). So a malloc and a free update three or four gs_stats each, not nine; and
 * every freed figure, which is allocated - current (stat2_dec). */

/* Apply to the pool's own type t and to "all", as PyTorch's for_each_selected_stat_type does.
 * "all" keeps only its peak here: its current and allocated are the sums of the two types',
 * filled in by gs_heap_stats (stat_all gives the current sum meanwhile). */
static inline int64_t stat_all(const gs_stat a[GS_STAT_TYPES])
{
    return a[GS_STAT_SMALL].current + a[GS_STAT_LARGE].current;
}

/* Returns whether "all" is at its peak now (PyTorch's requested_at_peak_allocated asks that of
 * allocated_bytes after each allocation: the sum is at hand here). */
static inline bool stat2_inc(gs_stat a[GS_STAT_TYPES], int t, int64_t v)
{
    gs_stat_inc(&a[t], v);
    int64_t all = stat_all(a);
    bool at_peak = all >= a[GS_STAT_ALL].peak;
    if (all > a[GS_STAT_ALL].peak) a[GS_STAT_ALL].peak = all;
    return at_peak;
}

/* A decrease moves only current: freed is allocated - current (both start at 0 and change only
 * by these), filled in by gs_heap_stats, which saves a load and a store at every free. */
static inline void stat_dec_cur(gs_stat *s, int64_t v)
{
    s->current -= v;
}

static inline void stat2_dec(gs_stat a[GS_STAT_TYPES], int t, int64_t v)
{
    stat_dec_cur(&a[t], v);
}


/* Reserved bytes went up: at a new peak, gs_heap_malloc records the free state once the
 * request is served (note_peak_reserved, heap.c). */
static inline void note_reserved_up(gs_heap *h)
{
    if (stat_all(h->st.reserved_bytes) == h->st.reserved_bytes[GS_STAT_ALL].peak)
        h->peak_reserved_dirty = true;
}

/* ---- expandable segments' handles ---- */

/* The handle of slot i of expandable segment s (0: none). */
static inline uint64_t seg_handle(const gs_segment *s, uint64_t i)
{
    return i < s->nhandles ? s->handles[i] : 0;
}

/* Slot i's entry of s's handle table, the table grown to hold it (zeros). The table starts
 * empty: a reservation spans 9/8 of the device, up to 45,000 slots of 2 MiB pages, and a trace
 * that releases its segments on every pass (empty_cache) would zero that much each time. */
static inline uint64_t *seg_handle_at(gs_segment *s, uint64_t i)
{
    if (G_UNLIKELY(i >= s->nhandles)) {
        uint64_t n = MAX(MAX(i + 1, 2 * s->nhandles), 64);
        n = MIN(n, s->size / s->page);
        s->handles = g_renew(uint64_t, s->handles, n);
        memset(s->handles + s->nhandles, 0, (n - s->nhandles) * sizeof *s->handles);
        s->nhandles = n;
    }
    return &s->handles[i];
}

/* ---- block structs ---- */

/* A block struct off the spare stack, as it was left. */
static inline gs_block *block_take(gs_heap *h)
{
    if (!h->nspare) gs_block_slab_refill(h);
    return h->spare[--h->nspare];
}

/* A zeroed block struct. */
static inline gs_block *block_new(gs_heap *h)
{
    gs_block *b = block_take(h);
    memset(b, 0, sizeof *b);
    return b;
}

static inline void block_delete(gs_heap *h, gs_block *b)
{
    if (G_UNLIKELY(h->nspare == h->spare_cap)) gs_block_spare_grow(h);
    h->spare[h->nspare++] = b;
}

/* A new block [addr, addr+size) in like's segment (same stream and pool), linked between before
 * and after (either may be NULL). The caller puts it in an index. */
static inline gs_block *block_carve(gs_heap *h, const gs_block *like, uint64_t addr,
                                    uint64_t size, gs_block *before, gs_block *after)
{
    gs_block *nb = block_take(h);
    /* every field a block outside the indexes is read for; the index sets its own at insertion
     * (skey, links, gc_base, class) */
    nb->addr = addr;
    nb->size = size;
    nb->stream = like->stream;
    nb->pool = like->pool;
    nb->seg = like->seg;
    nb->prev = before;
    nb->next = after;
    nb->requested = 0; /* owner is read only while PENDING, and set by the free request */
    nb->state = GS_BLOCK_FREE;
    nb->type = like->type;
    nb->expandable = like->expandable;
    if (before) before->next = nb;
    else nb->seg->head = nb;
    if (after) after->prev = nb;
    return nb;
}

/* ---- the limit ---- */

/* Would reserved bytes of total pass the heap's limit (none: never)? Every check of a growth
 * against the limit is made here: the answer is noted for gs_heap_same_limits, and what it
 * asked for, limit or none, for gs_heap_limit_asked (a replay capped below it may go
 * otherwise from here). */
static inline bool over_limit(gs_heap *h, uint64_t total)
{
    h->limit_asked = MAX(h->limit_asked, total);
    if (!h->limit) return false;
    if (total > h->limit) {
        h->limit_refused = MIN(h->limit_refused, total);
        return true;
    }
    h->limit_kept = MAX(h->limit_kept, total);
    return false;
}

/* The limit is read as a number (a fraction of it, the room left under it): from here on only
 * this very limit is known to decide as it did (gs_heap_same_limits). */
static inline void limit_read_exactly(gs_heap *h)
{
    if (h->limit) gs_heap_limit_decides(h, h->limit, h->limit + 1);
}

/* ---- the pools' two indexes ---- */

/* Insert a free block into its pool's index; its GC age starts now. */
GS_HOT void pool_insert_as(gs_heap *h, gs_block *b, const bool plain)
{
    gs_pool *p = &h->pools[b->pool];
    b->state = GS_BLOCK_FREE;
    if (!plain && h->gc_ages) b->gc_base = p->get_free_calls;
    b->skey = skey_of(b->stream, b->size);
    findex_insert_as(&p->blocks, b, plain);
}

GS_HOT void pool_insert(gs_heap *h, gs_block *b) { pool_insert_as(h, b, false); }

GS_HOT void pool_remove_as(gs_heap *h, gs_block *b, const bool plain)
{
    findex_remove_as(&h->pools[b->pool].blocks, b, plain);
}

GS_HOT void pool_remove(gs_heap *h, gs_block *b) { pool_remove_as(h, b, false); }

static inline void unmapped_insert(gs_heap *h, gs_block *b)
{
    b->state = GS_BLOCK_UNMAPPED;
    b->skey = skey_of(b->stream, 0);
    treap_insert(&h->pools[b->pool].unmapped.root, b);
    h->pools[b->pool].unmapped.count++;
}

static inline void unmapped_remove(gs_heap *h, gs_block *b)
{
    index_remove(&h->pools[b->pool].unmapped, b);
}

#endif
