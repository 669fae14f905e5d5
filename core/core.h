/* core.h - the allocator engine shared by every policy.
 *
 * The core owns blocks and segments, the free-block index, splitting and coalescing, the
 * statistics and the out-of-memory ladder. A policy (core/policy.h) decides the rest: size
 * rounding, which pool a request goes to, how large a new segment is, whether a cached block may
 * serve a request, whether to split, and what to release under pressure. A backend
 * (backends/backend.h) is the device. The structure follows PyTorch's DeviceCachingAllocator
 * (c10/cuda/CUDACachingAllocator.cpp) closely, because reproducing what real PyTorch did, to the
 * segment and the retry, is the point; see docs/pytorch-allocator.md.
 *
 * Vocabulary:
 *   segment  one device allocation (a cudaMalloc), tiled exactly by blocks in address order;
 *            or, for an expandable segment, one virtual reservation whose pages are mapped
 *            and unmapped as the pool grows and shrinks (PyTorch's expandable_segments:True);
 *   block    a piece of a segment: allocated (live request), pending (freed by the program,
 *            awaiting a deferred completion), free (cached, in the pool's index) or unmapped
 *            (address space of an expandable segment with no memory behind it);
 *   pool     a set of segments with its own free-block index (PyTorch: small and large);
 *   stream   free blocks are reused only by requests on the stream that allocated them.
 *
 * Nothing here is global: every call takes the heap. Not thread-safe; callers serialise.
 */
#ifndef GS_CORE_H
#define GS_CORE_H

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

G_BEGIN_DECLS

typedef struct gs_heap gs_heap;
typedef struct gs_block gs_block;
typedef struct gs_segment gs_segment;
typedef struct gs_policy gs_policy;

/* The core's input limits. The free-block index packs a block's stream and size into one
 * 64-bit key half (stream << 48 | size), so streams must stay below 2^16 and sizes below 2^48;
 * pools are numbered in a byte.
 *   GS_MAX_POOLS    pools a policy may declare (gs_policy_ops.npools).
 *   GS_MAX_REQUEST  requests above this (64 TiB, beyond any device) fail as OOMs at once,
 *                   before any rounding could overflow: PyTorch likewise refuses "more than
 *                   1EB" up front. Rounded (at most doubled), a request still fits the key.
 *   GS_MAX_STREAMS  stream indices must be below this. Not screened here: a stream at or above
 *                   it aborts on an assertion when a segment is made for it, so callers check
 *                   where streams come in (a trace's reader). */
#define GS_MAX_POOLS 4
/* Private pools (PyTorch's PrivatePool: a CUDA graph's pool, a torch.cuda.MemPool) that may
 * exist at once in one heap. Private pool k (1 .. GS_MAX_PRIVATE_POOLS) has its own copy of
 * each of the policy's pools: heap pool k * GS_MAX_POOLS + p is the policy's pool p of private
 * pool k (gs_pool_kind, gs_pool_private), so the heap's pools number at most GS_MAX_POOLS_ALL
 * and still fit a byte. */
#define GS_MAX_PRIVATE_POOLS 15
#define GS_MAX_POOLS_ALL (GS_MAX_POOLS * (1 + GS_MAX_PRIVATE_POOLS))
#define GS_MAX_REQUEST (UINT64_C(1) << 46)
#define GS_MAX_STREAMS (UINT32_C(1) << 16)

typedef enum {
    GS_BLOCK_FREE = 0,  /* cached: in its pool's index */
    GS_BLOCK_ALLOCATED, /* serving a live request */
    GS_BLOCK_PENDING,   /* freed by the program, completion deferred (cross-stream use) */
    GS_BLOCK_UNMAPPED,  /* expandable segments only: no pages mapped; in the unmapped index */
} gs_block_state;

struct gs_block {
    /* First, in one 64-byte cache line (block structs are 64-byte aligned), everything a
     * descent of the free-block index, a merge with a neighbour and an index update read; the
     * second line holds what only an allocation and its free touch. */
    _Alignas(64) uint64_t skey; /* while in an index: its key's high half (stream << 48 | size;
                                 * stream << 48 for an unmapped block) */
    uint64_t addr;
    gs_block *left, *right; /* index links while FREE; pending-list links while PENDING */
    uint64_t size;
    gs_block *prev, *next;  /* address-order neighbours within the segment */
    uint16_t stream;        /* below GS_MAX_STREAMS: checked where a segment is made */
    uint8_t pool;           /* the heap's pool: gs_pool_kind gives the policy's */
    uint8_t state;          /* gs_block_state */
    uint8_t fl, sl;         /* while FREE: its size class in the index (row, class) */
    uint8_t type;           /* its pool's stat type (GS_STAT_SMALL or GS_STAT_LARGE) */
    bool expandable;        /* seg->expandable, kept at hand */
    /* second line */
    uint64_t requested;     /* the live request's un-rounded size (0 when not allocated) */
    gs_segment *seg;
    gs_block **owner;       /* while PENDING: cleared to NULL when the core completes the free */
    uint64_t gc_base;       /* pool's get_free_block count when the block entered the index,
                             * while the heap collects garbage (gs_block_age) */
    /* While FREE in a pool kept in address order too (gs_policy_ops.addr_order; addr_index.c):
     * its place in its stream's address order. While the stream holds few free blocks, a list
     * (aleft, aright: the blocks below and above); else a treap (children, parent, and the
     * largest size under this node). In the second line, which only those policies' index
     * updates touch. */
    gs_block *aleft, *aright;
    gs_block *aparent;
    uint64_t amax;
};

_Static_assert(offsetof(gs_block, expandable) + 1 <= 64,
               "what the index and a merge read fits the block's first cache line");
_Static_assert(sizeof(gs_block) == 128, "a block struct is two cache lines");
_Static_assert(GS_MAX_POOLS_ALL - 1 <= UINT8_MAX,
               "a pool index fits gs_block.pool and gs_segment.pool (uint8_t)");
_Static_assert(GS_BLOCK_UNMAPPED <= UINT8_MAX, "a gs_block_state fits gs_block.state (uint8_t)");
_Static_assert(GS_MAX_STREAMS - 1 <= UINT16_MAX, "a stream index fits gs_block.stream (uint16_t)");

struct gs_segment {
    uint64_t addr, size;        /* expandable: the whole reservation, mapped or not */
    gs_block *head;             /* lowest-address block */
    gs_segment *prev, *next;    /* the heap's list of live segments, newest first */
    uint32_t stream;
    uint8_t pool;
    bool expandable;
    uint32_t tag;               /* the heap's tag when the segment was made (gs_heap_set_tag) */
    uint32_t whole_at;          /* addr_order pools: 1 + its free block's place in the pool's
                                 * whole blocks (gs_pool_whole_blocks), while that block is
                                 * free and the whole segment; else 0 */
    /* Expandable segments: the reservation is size / page slots of page bytes, each backed by
     * one physical handle while mapped (0 when not). */
    uint64_t page;
    uint64_t *handles;          /* nhandles of them, grown as pages are mapped higher up: */
    uint64_t nhandles;          /* the slots at or above nhandles hold no handle */
    uint64_t mapped_pages;
    /* Stitched segments (core/stitch.c) map handles of several pages: a handle's slots all
     * hold its value, and hpages[i] is its page count at its first slot i (0 elsewhere);
     * nhandles entries, grown with handles. NULL for every other segment. */
    uint32_t *hpages;
};

/* ---- Statistics, with PyTorch's exact meanings (torch.cuda.memory_stats()) ---- */

typedef struct {
    int64_t current, peak, allocated, freed; /* allocated/freed: cumulative increases/decreases */
} gs_stat;

/* PyTorch's Stat::increase and Stat::decrease: the peak follows current up, never down. */
static inline void gs_stat_inc(gs_stat *s, int64_t v)
{
    s->current += v;
    s->allocated += v;
    if (s->current > s->peak) s->peak = s->current;
}

static inline void gs_stat_dec(gs_stat *s, int64_t v)
{
    s->current -= v;
    s->freed += v;
}

typedef enum { GS_STAT_ALL = 0, GS_STAT_SMALL, GS_STAT_LARGE, GS_STAT_TYPES } gs_stat_type;

/* Each X(name) is a gs_stat[GS_STAT_TYPES] array: all, small_pool, large_pool. */
#define GS_STAT_ARRAYS(X)                                                                   \
    X(allocation) X(segment) X(active) X(inactive_split) X(allocated_bytes) X(reserved_bytes) \
    X(active_bytes) X(inactive_split_bytes) X(requested_bytes)

typedef struct {
#define GS_STAT_FIELD(n) gs_stat n[GS_STAT_TYPES];
    GS_STAT_ARRAYS(GS_STAT_FIELD)
#undef GS_STAT_FIELD
    gs_stat oversize_allocations; /* no pool breakdown, as in PyTorch */
    gs_stat oversize_segments;
    uint64_t num_alloc_retries;   /* the counted alloc attempt after a full cache flush */
    uint64_t num_ooms;
    uint64_t num_sync_all_streams;
    uint64_t num_device_alloc;
    uint64_t num_device_free;
    /* Not PyTorch's: the retries after other allocators on the device released their cache
     * for this one (gs_heap_config.reclaim; gpusim replay --clients cooperative). */
    uint64_t num_reclaim_retries;
    /* PyTorch 2.12's: the requests refused before any device call because the growth would
     * pass the policy's bound (gs_policy_ops.reject_above); each is counted in num_ooms too. */
    uint64_t num_oom_rejections;
    int64_t max_split_size;       /* the policy's oversize threshold; -1 when unlimited */
    /* Metrics of docs/metrics.md that need the state at a moment: */
    int64_t requested_at_peak_allocated; /* Q when A reached its peak (internal_frag) */
    uint64_t largest_free_at_peak_reserved;
    uint64_t total_free_at_peak_reserved; /* cached free bytes when R reached its peak */
} gs_stats;

/* ---- The heap: one allocator instance ---- */

typedef struct {
    /* Bytes the allocator may reserve (PyTorch's memory fraction times the device total);
     * 0 means no limit was set, which, as in PyTorch, also disables garbage collection. */
    uint64_t limit;
    /* The device's total memory (totalGlobalMem): an expandable segment reserves 9/8 of it in
     * address space, as PyTorch does. 0: ask the backend (cudaMemGetInfo's total). */
    uint64_t device_total;
    /* Optional: several allocators on one device. Both are NULL for a lone allocator, and the
     * heap then behaves exactly as without them. ud is passed back to each. */
    void *ud;
    /* Called at the end of the out-of-memory ladder, when the device (not the heap's own
     * limit) refused bytes even after this heap released its cache: ask the other allocators
     * to release theirs. Returns whether anything was released; if so the heap tries once
     * more (counted in num_reclaim_retries) before it fails. *st: a device error, or GS_OK. */
    bool (*reclaim)(void *ud, gs_heap *h, uint64_t bytes, gs_status *st);
    /* Called whenever a segment's reserved bytes change, once per device operation: +size when
     * a cudaMalloc'd segment is made, -size before it is freed, +/-bytes as a run of pages of
     * an expandable segment is mapped or unmapped (PyTorch's map_block and unmap_block), addr
     * the first byte of what changed. Lets a caller attribute one heap's reserved memory (by
     * gs_segment.tag), or record each operation (the memory_viz export). */
    void (*on_reserve)(void *ud, const gs_segment *s, uint64_t addr, int64_t bytes);
} gs_heap_config;

/* The heap borrows policy and backend; both must outlive it. NULL when the policy needs the
 * driver's virtual-memory calls (expandable segments) and the backend has none. */
gs_heap *gs_heap_new(const gs_policy *policy, gs_backend *be, const gs_heap_config *cfg);
/* Releases every cached segment and frees host memory. Allocated blocks' segments are
 * returned to the device too (the program is gone). Returns how many of those device calls
 * failed (memory left on the device, for the caller to report); every segment is let go of
 * whatever they return. NULL h: 0. */
size_t gs_heap_free_all(gs_heap *h);

/* Allocate size bytes on a stream. GS_OK and *out; GS_ERR_OOM after the whole ladder failed
 * (num_ooms counted); GS_ERR_DEVICE etc. for a device failure that is not an OOM (the heap
 * stays consistent). size 0 is served like PyTorch: rounded up to the minimum block. */
gs_status gs_heap_malloc(gs_heap *h, uint64_t size, uint32_t stream, gs_block **out);
/* Free a live block; its memory is reusable at once. */
void gs_heap_free(gs_heap *h, gs_block *b);
/* Free whose completion is deferred (the block was used on another stream). The block stays
 * unusable until gs_heap_free_complete, or until the core drains all pending frees (a full cache
 * release synchronises the device, as PyTorch's synchronize_and_free_events does); in that case
 * *owner is set to NULL so the caller knows not to complete it. owner may be NULL. */
void gs_heap_free_request(gs_heap *h, gs_block *b, gs_block **owner);
void gs_heap_free_complete(gs_heap *h, gs_block *b);
/* torch.cuda.empty_cache(): complete pending frees, release every fully free segment. */
gs_status gs_heap_empty_cache(gs_heap *h);

/* The statistics as of this call: some figures (every freed, active and active_bytes) are
 * derived when it is made, so call it again after the heap changes rather than keep the
 * pointer to read later. */
const gs_stats *gs_heap_stats(const gs_heap *h);
/* The same statistics with only each gs_stat's current and peak brought up to date (and the
 * counters, which always are): allocated and freed may be stale. For callers that read only
 * those, often (deriving every figure can cost more than an event). */
const gs_stats *gs_heap_stats_now(const gs_heap *h);
/* The peaks of the sums over several heaps of every gs_stat's current (a device's over its
 * allocators, a run's over its devices), taken after each event. An event changes one heap, so
 * only that heap is compared, stat by stat, with a threshold: the peak less the other heaps'
 * currents (thr, for heap at). A peak rises exactly when that heap's current passes its
 * threshold. When the changed heap is another one (events come in runs: a device's, a
 * client's), the other heaps' currents are a running sum, not summed again: with more than two
 * heaps, each heap's currents as last seen (last) and their sum (sum), moved by the one heap
 * left (a loop over the heaps at every change of heap made 20,000 one-event devices cost
 * minutes). Of the sums, only the peaks are kept. */
typedef struct {
    gs_stats peaks;  /* each gs_stat's peak and the figures at peaks; the rest stays 0 */
    gs_stats thr;    /* each gs_stat's current: the threshold for heap at */
    size_t at;       /* SIZE_MAX: none (the next call sums every heap) */
    /* the lower thresholds of allocation and active, of allocated_bytes and active_bytes,
     * by type: one compare for each pair while no free is pending */
    int64_t lo_n[GS_STAT_TYPES], lo_bytes[GS_STAT_TYPES];
    /* more than two heaps (private to core/stats.c): for n heaps, each one's currents as last
     * seen, their sum, and each one's largest free block as last seen in a tree of maxima (the
     * cached free figures at a peak of reserved bytes) */
    size_t n;
    int64_t *last, *sum;
    uint64_t *largest;
    uint64_t heaps_read; /* heaps whose figures the calls read, all told (tests count them) */
} gs_stats_sums;

void gs_stats_sums_init(gs_stats_sums *s);
/* Frees what gs_stats_sums_after took for more than two heaps. */
void gs_stats_sums_clear(gs_stats_sums *s);
/* After an event that changed heaps[k] and no other of heaps[0..n) (or none): raise each peak
 * to the sum of the heaps' currents (as gs_heap_stats_now gives them); at a new peak of
 * allocated bytes note the requested bytes, at one of reserved bytes the cached free bytes and
 * the largest free block, over every heap (requested_at_peak_allocated and the free figures of
 * gs_stats, which a heap notes for its own peaks). */
void gs_stats_sums_after(gs_stats_sums *s, gs_heap *const *heaps, size_t n, size_t k);
/* gs_stats_sums_after for an event that only freed in heaps[k] (gs_heap_free,
 * gs_heap_free_request or gs_heap_free_complete, or nothing): a free lowers the counts of
 * allocations and their bytes, moves them to the pending ones (active stays), and merges free
 * blocks, so the only currents it can raise are the inactive split ones, and only those are
 * compared (a third of the check; several clients' replays are half frees). */
void gs_stats_sums_after_free(gs_stats_sums *s, gs_heap *const *heaps, size_t n, size_t k);
/* Heaps other than the next call's k changed (a heap released its cache for another, live
 * blocks were freed between passes): the next call sums every heap. */
static inline void gs_stats_sums_dirty(gs_stats_sums *s) { s->at = SIZE_MAX; }
/* Statistics charged by hand (several clients on one heap: who made what), with the core's
 * Stat semantics: v (negative: -v taken) on a's entry of type and on its total. */
void gs_stat_charge(gs_stat a[GS_STAT_TYPES], int type, int64_t v);
/* GS_STAT_SMALL or GS_STAT_LARGE: the type of h's pool (a gs_block's or gs_segment's pool). */
int gs_heap_pool_stat_type(const gs_heap *h, unsigned pool);
/* Segment s's change of bytes reserved (gs_heap_config.on_reserve's), charged to st: its
 * reserved bytes, and its segments (a segment made or freed; not an expandable one's pages). */
void gs_stats_charge_reserve(gs_stats *st, const gs_heap *h, const gs_segment *s, int64_t bytes);
/* The max_split_size memory_stats reports under policy p: its oversize threshold, -1 when it
 * has none (a heap's gs_stats.max_split_size before its first request). */
int64_t gs_policy_max_split_size(const gs_policy *p);
/* Every gs_stat of s, into out: each array's three types in gs_stats' order, then the two
 * oversize stats (for code that treats them alike: sums, resets). */
#define GS_ONE_STAT_ARRAY(name) +GS_STAT_TYPES
enum { GS_STATS_N = 0 GS_STAT_ARRAYS(GS_ONE_STAT_ARRAY) + 2 };
#undef GS_ONE_STAT_ARRAY
void gs_stats_each(gs_stats *s, gs_stat *out[GS_STATS_N]);
/* Several heaps on one device: add s's additive figures into d (every stat's current,
 * allocated and freed; the counters), leaving d's peaks and the figures at peaks alone: those
 * of a sum are gs_stats_sums_after's. */
void gs_stats_add(gs_stats *d, const gs_stats *s);
const gs_devcalls *gs_heap_devcalls(const gs_heap *h);
const gs_policy *gs_heap_policy(const gs_heap *h);
uint64_t gs_heap_limit(const gs_heap *h);
/* Whether h is moving memory (stitch: a free handle unmapped from one place to be mapped in
 * another), so that on_reserve's unmap is no release: the device frees counted (num_device_free)
 * are releases only. */
bool gs_heap_moving(const gs_heap *h);
/* Change the limit between events: a replay resumed under a cap from a checkpoint of an
 * uncapped one (sim/probe.h). The checks of growths against the limit read the new value, and
 * garbage collection acts under it where the heap kept the blocks' ages (made with a limit, or
 * gs_heap_keep_gc_ages before its first event); what else the heap derived from its limit
 * when it was made stays. So this is the heap made with that limit only for a policy blind to
 * it (gs_policy_ops.blind_to_limit) whose gs_heap_limit_asked never passed the new limit. */
void gs_heap_set_limit(gs_heap *h, uint64_t limit);
/* Before the first event: keep the blocks' garbage-collection ages as a heap with a limit
 * does, though this one has none yet (a replay that gs_heap_set_limit may cap later), where
 * the policy's collection reads the limit (gs_policy_ops.limit_unread). */
void gs_heap_keep_gc_ages(gs_heap *h);
/* The smallest limit under which no growth so far would have been refused: the reserved bytes'
 * peak, or more where a check asked for more than was then reserved (an expandable segment's
 * growth checks a whole segment's size) or where garbage collection would have acted
 * (gs_policy_ops.limit_unread). A replay under a cap at least this is, so far, the replay
 * without one. */
uint64_t gs_heap_limit_asked(const gs_heap *h);
/* Under a limit: the limits in [*lo, *hi) that would have decided every check against it so far
 * as this one did (*hi UINT64_MAX: every limit from *lo up). For a policy blind to the limit
 * (gs_policy_ops.blind_to_limit), a replay under any of them is, so far, this one, event for
 * event: whatif's search answers those capacities without replaying them. A policy that
 * reads the limit as a number (garbage collection's threshold once it acts, stitch's headroom)
 * narrows it to the limit alone. */
void gs_heap_same_limits(const gs_heap *h, uint64_t *lo, uint64_t *hi);
/* A policy that read the limit (its garbage collection's threshold) would have decided alike
 * under any limit in [lo, hi): folded into gs_heap_same_limits. */
void gs_heap_limit_decides(gs_heap *h, uint64_t lo, uint64_t hi);
uint64_t gs_heap_reserved(const gs_heap *h);
/* Segments made from now on carry tag (gs_segment.tag; 0 until set): the replay's shared
 * arrangement marks each with the client whose request made it. */
void gs_heap_set_tag(gs_heap *h, uint32_t tag);
const gs_segment *gs_heap_segments(const gs_heap *h); /* walk with ->next */
/* The bytes of the cached free blocks of every pool (not pending frees, not unmapped address
 * space), and the size of the largest of them in *largest (0 when there is none; largest may be
 * NULL). From running figures: no walk over the free blocks. */
uint64_t gs_heap_free_bytes(const gs_heap *h, uint64_t *largest);

/* Verify every invariant: blocks tile each segment exactly and are linked both ways; no two
 * adjacent free blocks are left unmerged; each index holds exactly the free blocks of its pool,
 * in order, with the heap property; the statistics equal a recount. Returns the number of
 * violations; the first is described in *why (g_free it) when why is non-NULL. */
int gs_heap_check(const gs_heap *h, char **why);

/* ---- For policies: the free-block index and the release primitives ---- */

/* Smallest free block in pool with (stream, size, addr) >= (stream, size, 0), or NULL. The
 * result may be on a later stream: callers check ->stream. */
gs_block *gs_pool_lower_bound(const gs_heap *h, unsigned pool, uint32_t stream, uint64_t size);
gs_block *gs_pool_first(const gs_heap *h, unsigned pool);
gs_block *gs_pool_last(const gs_heap *h, unsigned pool);
gs_block *gs_pool_next(const gs_heap *h, const gs_block *b);
gs_block *gs_pool_prev(const gs_heap *h, const gs_block *b);
size_t gs_pool_count(const gs_heap *h, unsigned pool); /* a walk: for tests and checks */
/* The lowest-addressed free block of stream in pool with at least size bytes, or NULL: an
 * address-ordered first fit (RMM's arenas), from the address order (a short list's walk, or a
 * treap's descent). Only for a policy that sets
 * gs_policy_ops.addr_order (the core then keeps the address order; core/addr_index.c). */
gs_block *gs_pool_first_fit(const gs_heap *h, unsigned pool, uint32_t stream, uint64_t size);
/* The free blocks of pool that are whole segments (!gs_block_is_split), of every stream, in the
 * index's order (stream, size, addr), as a new array of *n entries for the caller to g_free
 * (NULL when none). Kept as blocks come and go, so asking costs nothing when there are none.
 * Only for a policy that sets gs_policy_ops.addr_order (core/addr_index.c). */
gs_block **gs_pool_whole_blocks(const gs_heap *h, unsigned pool, size_t *n);
/* For a pick that takes its block (gs_policy_ops.pick_takes): the smallest free block of stream
 * (not a later one) in pool with at least size bytes, taken out of the index in the same
 * descent, or NULL; and a block found otherwise (gs_pool_lower_bound, ...) taken out. */
gs_block *gs_pool_take_lower_bound(gs_heap *h, unsigned pool, uint32_t stream, uint64_t size);
void gs_pool_take(gs_heap *h, gs_block *b);
/* get_free_block calls made on the pool (counted only while the policy's GC is active); a
 * block's age is this count minus the count when it entered the index (0 while the GC is not
 * active: the heap has no limit or the policy collects no garbage). */
uint64_t gs_block_age(const gs_heap *h, const gs_block *b);
/* A heap pool's policy pool (the index into gs_policy_ops.pools), and its private pool (0: the
 * ordinary pools). Policies compare gs_pool_kind(b->pool), never b->pool, with their pools. */
static inline unsigned gs_pool_kind(unsigned pool) { return pool % GS_MAX_POOLS; }
static inline unsigned gs_pool_private(unsigned pool) { return pool / GS_MAX_POOLS; }
static inline bool gs_block_is_split(const gs_block *b) { return b->prev || b->next; }
static inline bool gs_block_is_expandable(const gs_block *b) { return b->seg->expandable; }
/* Return a free block that is a whole segment to the device (cudaFree). Not for blocks of
 * expandable segments: those shrink only through gs_heap_release_cached. */
gs_status gs_heap_release_block(gs_heap *h, gs_block *b);
/* PyTorch's release_cached_blocks: drain pending frees, then, pool by pool, release every free
 * block that is a whole segment, and unmap the whole pages inside every free block of an
 * expandable segment (a reservation left with nothing mapped is freed). Stops at the first
 * device error. */
gs_status gs_heap_release_cached(gs_heap *h);

/* ---- Private pools (PyTorch's CUDA graph pools and torch.cuda.MemPool) ----
 *
 * A private pool is named by the caller's id (non-zero). While a route to it is open, requests
 * on its stream (or on every stream) are served from its own pools, which ordinary requests
 * never use; a block returns to the pool it came from whenever it is freed. PyTorch's rules
 * (docs/pytorch-allocator.md §3): beginAllocateToPool creates the pool or adds a use; the
 * routes are tried in the order they were opened; endAllocateToPool closes the
 * route; releasePool drops a use, and at none the pool is freeable: its cached segments are
 * released by the next gs_heap_release_cached (empty_cache, or an OOM's full flush), and the
 * pool is gone once it holds no segment. Until then its segments stay, whatever empty_cache
 * does. While any route is open the out-of-memory ladder has no full flush (PyTorch skips it
 * during a capture).
 *
 * A policy that grows its own way (gs_policy_ops.grow: an arena, regions, an upstream pool: the
 * families other than PyTorch's, CuPy's and stitch) has no private pools, as the allocators it
 * models have none: the three calls below accept every valid id and do nothing, and routed
 * requests are served like any other. (Otherwise each private pool would carve an arena of its
 * own: a 0.9-of-the-device preallocation could never serve a graph's pool.) */

/* Open a route: requests on stream (every stream when all_streams) go to private pool id,
 * which is made if it does not exist (one use) or gains a use. While id has open routes (it is
 * being recorded to), another stream joins the recording, without a use (a capture forked onto
 * a side stream); the same stream, or every stream, is refused (PyTorch's "already recording").
 * GS_ERR_INVALID also when id is 0 or GS_MAX_PRIVATE_POOLS pools exist already, or 16 routes
 * are open. */
gs_status gs_heap_pool_begin(gs_heap *h, uint32_t id, bool all_streams, uint32_t stream);
/* Close pool id's routes, every stream of its recording (none open: nothing happens). */
void gs_heap_pool_end(gs_heap *h, uint32_t id);
/* Drop a use of pool id; at none it is freeable, and gone at once if it holds no segment and
 * no route leads to it (its id unknown from then). empty_now: then release its cached segments
 * at once (torch.cuda.MemPool's destructor: releasePool and emptyCache(id)). Unknown id, or no
 * use left: GS_ERR_INVALID. */
gs_status gs_heap_pool_release(gs_heap *h, uint32_t id, bool empty_now);
/* The id of private pool k (1 .. GS_MAX_PRIVATE_POOLS; gs_pool_private of a block's pool),
 * 0 when k holds none. */
uint32_t gs_heap_pool_id(const gs_heap *h, unsigned k);
/* Pool id's uses (PyTorch's getPoolUseCount): 0 for a pool unknown or gone. */
int gs_heap_pool_uses(const gs_heap *h, uint32_t id);
/* The private pool (its k, as gs_pool_private) that a request on stream would go to now: the
 * first open route that takes the stream; 0 for the ordinary pools. Read-only, for reports (an
 * OOM names the pool its request went to). */
unsigned gs_heap_route_of(const gs_heap *h, uint32_t stream);

/* ---- For policies that grow their own way (gs_policy_ops.grow) ---- */

/* cudaMalloc a segment of bytes for pool on stream, its one block free in the index. GS_ERR_OOM
 * when the heap's limit or the device refuses (nothing changed). */
gs_status gs_heap_grow_segment(gs_heap *h, unsigned pool, uint32_t stream, uint64_t bytes);
/* For a pool with an expandable_page: map pages at the end of stream's virtual range (after a
 * free block there, which the new pages extend) until a free block holds bytes, left in the
 * index. GS_ERR_OOM when the heap's limit (checked against bytes in whole pages) or the device
 * refuses. */
gs_status gs_heap_grow_pages(gs_heap *h, unsigned pool, uint32_t stream, uint64_t bytes);
/* For a pool the policy stitches (gs_policy_ops.stitch): a free block of bytes on stream, made
 * as a stitched pool grows (core/stitch.c: free whole handles of the stream moved behind the
 * stream's range first, only what is still missing created), left in the index. GS_ERR_OOM as
 * gs_heap_grow_pages. */
gs_status gs_heap_grow_stitched(gs_heap *h, unsigned pool, uint32_t stream, uint64_t bytes);
/* The policy's words in this heap (GS_POLICY_STATE_WORDS of them, zero at gs_heap_new): where a
 * policy's hooks keep what they must remember between calls. */
#define GS_POLICY_STATE_WORDS 4
uint64_t *gs_heap_policy_state(gs_heap *h);
/* The device's total memory: the heap config's device_total, else the backend's. */
uint64_t gs_heap_device_total(gs_heap *h);

G_END_DECLS

#endif
