/* heap.c - the allocator proper: the heap, malloc and free, split and merge, the out-of-memory
 * ladder and the release of cached memory. See core.h for the vocabulary.
 *
 * The order of operations in gs_heap_malloc/free mirrors PyTorch's DeviceCachingAllocator
 * (malloc, alloc_block, get_free_block, alloc_found_block, free, free_block, try_merge_blocks,
 * release_cached_blocks), because statistics such as num_alloc_retries and inactive_split only
 * come out equal to PyTorch's when every step happens in the same order. Expandable segments,
 * which grow and shrink a pool by pages instead of segments, are in expandable.c; the
 * free-block index in index.c; the block and segment primitives in segment.c; the statistics'
 * derivation and sums, and the accessors, in stats.c.
 */
#include "core-int.h"

/* ---- the heap ---- */

gs_heap *gs_heap_new(const gs_policy *policy, gs_backend *be, const gs_heap_config *cfg)
{
    g_return_val_if_fail(policy && be, NULL);
    gs_heap *h = g_new0(gs_heap, 1);
    h->policy = policy;
    h->P = policy->ops;
    h->cfg = policy->cfg;
    h->be = be;
    h->limit = cfg ? cfg->limit : 0;
    h->limit_refused = UINT64_MAX;
    h->device_total = cfg ? cfg->device_total : 0;
    if (cfg) h->cb = *cfg;
    /* the policy's own bounds, fractions of the device (PyTorch's memory fraction): the device
     * is asked its size only for a policy that has one */
    bool own_limit = !h->limit && h->P->limit && h->P->limit(policy->cfg, 0);
    bool rejects = h->P->reject_above && h->P->reject_above(policy->cfg, 0);
    if (own_limit || rejects) {
        uint64_t total = h->device_total, fr = 0;
        if (!total) (void)gs_dev_mem_info(be, NULL, &fr, &total);
        if (own_limit) h->limit = h->P->limit(policy->cfg, total);
        if (rejects) h->reject_above = h->P->reject_above(policy->cfg, total);
    }
    h->oversize = h->P->oversize ? h->P->oversize(h->cfg) : UINT64_MAX;
    h->st.max_split_size = gs_policy_max_split_size(policy);
    h->gc_active = h->limit > 0 && h->P->collect != NULL;
    h->gc_ages = h->gc_active;
    h->keeps_cache = h->P->keeps_cache && h->P->keeps_cache(h->cfg);
    h->has_rule = h->P->fit_rule && h->P->fit_rule(h->cfg, &h->rule);
    h->npools = h->P->npools;
    g_assert(h->npools >= 1 && h->npools <= GS_MAX_POOLS);
    bool vmm = false;
    for (unsigned i = 0; i < h->npools; i++) {
        h->pools[i].type = h->P->pools[i].is_small ? GS_STAT_SMALL : GS_STAT_LARGE;
        h->pools[i].page = h->P->expandable_page ? h->P->expandable_page(h->cfg, i) : 0;
        h->pools[i].stitch = h->pools[i].page && h->P->stitch &&
                             h->P->stitch(h->cfg, i, &h->pools[i].sc);
        vmm |= h->pools[i].page != 0;
    }
    /* Each private pool's copies of the policy's pools, ready for when one is made. */
    for (unsigned i = h->npools; i < GS_MAX_POOLS_ALL; i++) {
        const gs_pool *base = &h->pools[gs_pool_kind(i)];
        if (gs_pool_kind(i) >= h->npools) continue;
        h->pools[i].type = base->type;
        h->pools[i].page = base->page;
        h->pools[i].stitch = base->stitch;
        h->pools[i].sc = base->sc;
    }
    h->pool_hi = h->npools;
    bool by_addr = h->P->addr_order && h->P->addr_order(h->cfg);
    for (unsigned i = 0; i < GS_MAX_POOLS_ALL; i++) h->pools[i].blocks.by_addr = by_addr;
    h->plain = h->has_rule && !h->gc_ages && !h->P->pick && !vmm && !by_addr;
    if (vmm && !gs_dev_has_vmm(be)) {
        g_free(h);
        return NULL;
    }
    if (vmm && !h->device_total) {
        uint64_t fr = 0;
        (void)gs_dev_mem_info(be, NULL, &fr, &h->device_total);
    }
    h->slabs = g_ptr_array_new_with_free_func(free); /* posix_memalign'd */
    for (unsigned i = 0; i < GS_ROUND_MEMO; i++) h->memo[i].orig = GS_ROUND_MEMO_EMPTY;
    h->filled_ops = h->now_ops = UINT64_MAX;
    return h;
}

size_t gs_heap_free_all(gs_heap *h)
{
    if (!h) return 0;
    /* Return every segment to the device, whatever its blocks' state: the program is gone. A
     * failure is counted for the caller to report, never silently dropped. */
    size_t failed = 0;
    while (h->segments) {
        gs_segment *s = h->segments;
        if (s->expandable) failed += gs_expandable_destroy(h, s);
        else failed += gs_dev_free(h->be, &h->calls, s->addr, s->size) != GS_OK;
        gs_segment_unlink(h, s);
        g_free(s);
    }
    for (unsigned i = 0; i < h->pool_hi; i++) gs_findex_free(&h->pools[i].blocks);
    failed += gs_expandable_release_orphans(h);
    g_ptr_array_free(h->slabs, TRUE);
    g_free(h->spare);
    g_free(h->dcalls);
    g_free(h);
    return failed;
}

/* ---- segments ---- */
/* Grow by one cudaMalloc'd segment of seg_size for pool/stream. */
static gs_status malloc_segment(gs_heap *h, unsigned pool, uint32_t stream, uint64_t seg_size,
                                gs_block **out)
{
    g_assert(stream < GS_MAX_STREAMS); /* every block comes from a segment of its stream */
    uint64_t addr;
    gs_status st = gs_dev_malloc(h->be, &h->calls, seg_size, &addr);
    if (st != GS_OK) return st;

    gs_segment *s = g_new0(gs_segment, 1);
    gs_block *b = block_new(h);
    s->addr = b->addr = addr;
    s->size = b->size = seg_size;
    s->stream = stream;
    b->stream = (uint16_t)stream;
    s->pool = b->pool = (uint8_t)pool;
    s->tag = h->tag;
    s->head = b;
    b->seg = s;
    b->type = h->pools[pool].type;
    gs_segment_link(h, s);
    if (h->cb.on_reserve) h->cb.on_reserve(h->cb.ud, s, s->addr, (int64_t)seg_size);

    int t = h->pools[pool].type;
    h->total_reserved += seg_size;
    stat2_inc(h->st.segment, t, 1);
    stat2_inc(h->st.reserved_bytes, t, (int64_t)seg_size);
    if (seg_size >= h->oversize) gs_stat_inc(&h->st.oversize_segments, 1);
    h->st.num_device_alloc++;
    note_reserved_up(h);
    *out = b;
    return GS_OK;
}

/* ---- malloc ---- */

/* Grow the pool by what the request needs. PyTorch's alloc_block: a limit check against the
 * segment size a cudaMalloc would take (also with expandable segments), then a new segment, or
 * pages mapped into the pool's expandable segment for the rounded size. GS_ERR_OOM when the
 * limit or the device refuses. */
static gs_status alloc_block(gs_heap *h, unsigned pool, uint32_t stream, uint64_t size,
                             uint64_t seg_size, bool is_retry, gs_block **out)
{
    if (is_retry) h->st.num_alloc_retries++;
    /* a stitched pool may need no new memory at all: it checks the limit against what it
     * creates */
    if (h->pools[pool].stitch) return gs_stitch_grow(h, pool, stream, size, out);
    if (over_limit(h, h->total_reserved + seg_size)) return GS_ERR_OOM;
    if (h->pools[pool].page) return gs_expandable_grow(h, pool, stream, size, false, out);
    return malloc_segment(h, pool, stream, seg_size, out);
}

/* The policy's fits and should_split: its gs_fit_rule where it gave one (policy.h), else the
 * hooks. */
static inline bool heap_fits(const gs_heap *h, const gs_block *b, uint64_t size, const bool plain)
{
    if (!plain && G_UNLIKELY(!h->has_rule)) return h->P->fits(h->cfg, b, size);
    const gs_fit_rule *r = &h->rule;
    return size < r->oversize ? b->size < r->oversize : b->size < size + r->oversize_waste;
}

static inline bool heap_should_split(const gs_heap *h, const gs_block *b, uint64_t size,
                                     const bool plain)
{
    if (!plain && G_UNLIKELY(!h->has_rule)) return h->P->should_split(h->cfg, b, size);
    unsigned k = gs_pool_kind(b->pool);
    return size < h->rule.split[k].below && b->size - size >= h->rule.split[k].min_rest;
}

static inline uint64_t expandable_size(const gs_block *b)
{
    return b->size + (b->next && b->next->state == GS_BLOCK_UNMAPPED ? b->next->size : 0);
}

/* A free block followed by unmapped space counts as the size it can grow to, so a larger
 * block that cannot grow is preferred over consuming the growable end: the block to take
 * instead of b, the best fit found (b itself when it cannot grow). Only a block that can grow is
 * passed over: the blocks after b are at least b's size, so when b cannot grow none of them
 * counts as smaller, and the next block is not looked up (a descent). Out of line: inlined, its
 * loop made the compiler spill registers on every malloc (about 12 instructions), expandable
 * or not. */
static G_GNUC_NO_INLINE gs_block *growable_pass(gs_pool *p, gs_block *b)
{
    while (b->expandable && expandable_size(b) > b->size) {
        gs_block *n = findex_next_in(&p->blocks, b);
        if (!n || expandable_size(n) >= expandable_size(b)) break;
        b = n;
    }
    return b;
}

/* Best fit from the pool's index, subject to the policy. PyTorch's get_free_block. Inlined
 * into gs_heap_malloc (a call there saved and restored six registers: about 14 instructions a
 * malloc); the ladder's calls go through get_free_block. */
GS_HOT gs_block *find_free_block(gs_heap *h, unsigned pool, uint32_t stream, uint64_t size,
                                 const bool plain)
{
    gs_pool *p = &h->pools[pool];
    if (!plain && h->gc_ages) p->get_free_calls++;
    gs_fpos at;
    gs_block *b = findex_lower_bound_in(&p->blocks, stream, size, &at);
    if (!b) return NULL;
    gs_block *found = b;
    if (!plain && G_UNLIKELY(b->expandable) && expandable_size(b) > b->size) b = growable_pass(p, b);
    bool found_at = b == found;
    if (!heap_fits(h, b, size, plain)) return NULL;
    if (found_at) findex_unlink_as(&p->blocks, &at, b, plain);
    else pool_remove(h, b);
    return b;
}

static G_GNUC_NO_INLINE gs_block *get_free_block(gs_heap *h, unsigned pool, uint32_t stream,
                                                 uint64_t size)
{
    return find_free_block(h, pool, stream, size, false);
}

/* Record the state that external_frag needs, once per new peak of reserved bytes (after the
 * malloc that raised it, so the new segment is seen serving its request): from the running
 * totals, without a walk over the free blocks. */
static G_GNUC_NO_INLINE void note_peak_reserved(gs_heap *h)
{
    h->st.total_free_at_peak_reserved = gs_heap_free_bytes(h, &h->st.largest_free_at_peak_reserved);
    h->peak_reserved_dirty = false;
}

/* An allocation while frees are pending: active (allocation + pending) may reach a peak that
 * allocation's does not show. */
static G_GNUC_NO_INLINE void note_active_peak(gs_heap *h, int type)
{
    int64_t n = stat_all(h->st.allocation) + h->pend_n[GS_STAT_ALL];
    int64_t bytes = stat_all(h->st.allocated_bytes) + h->pend_bytes[GS_STAT_ALL];
    h->active_peak_n[GS_STAT_ALL] = MAX(h->active_peak_n[GS_STAT_ALL], n);
    h->active_peak_bytes[GS_STAT_ALL] = MAX(h->active_peak_bytes[GS_STAT_ALL], bytes);
    n = h->st.allocation[type].current + h->pend_n[type];
    bytes = h->st.allocated_bytes[type].current + h->pend_bytes[type];
    h->active_peak_n[type] = MAX(h->active_peak_n[type], n);
    h->active_peak_bytes[type] = MAX(h->active_peak_bytes[type], bytes);
}

/* A free is pending (+1, its bytes) or no longer (-1, -bytes). */
static void pending_count(gs_heap *h, const gs_block *b, int64_t n)
{
    h->pend_n[GS_STAT_ALL] += n;
    h->pend_n[b->type] += n;
    h->pend_bytes[GS_STAT_ALL] += n * (int64_t)b->size;
    h->pend_bytes[b->type] += n * (int64_t)b->size;
}

/* Hand out (part of) a block found in the index or fresh from the device.
 * PyTorch's alloc_found_block. */
GS_HOT gs_block *alloc_found_block(gs_heap *h, gs_block *b, uint64_t size, uint64_t orig,
                                   const bool plain)
{
    int t = b->type;
    bool already_split = gs_block_is_split(b);
    bool track_split = plain || !b->expandable; /* inactive_split leaves expandable blocks out */
    if (heap_should_split(h, b, size, plain)) {
        /* The allocation takes the low end; the remainder keeps the high end and goes back. */
        gs_block *rem = b;
        b = block_carve(h, rem, rem->addr, size, rem->prev, rem);
        rem->addr += size;
        rem->size -= size;
        pool_insert_as(h, rem, plain);
        if (!track_split) {
        } else if (already_split) {
            stat2_dec(h->st.inactive_split_bytes, t, (int64_t)size);
        } else {
            stat2_inc(h->st.inactive_split_bytes, t, (int64_t)rem->size);
            stat2_inc(h->st.inactive_split, t, 1);
        }
    } else if (already_split && track_split) {
        stat2_dec(h->st.inactive_split_bytes, t, (int64_t)b->size);
        stat2_dec(h->st.inactive_split, t, 1);
    }
    b->state = GS_BLOCK_ALLOCATED;
    b->requested = orig;
    stat2_inc(h->st.allocation, t, 1);
    bool at_peak = stat2_inc(h->st.allocated_bytes, t, (int64_t)b->size);
    stat2_inc(h->st.requested_bytes, t, (int64_t)orig);
    if (G_UNLIKELY(h->pend_n[GS_STAT_ALL])) note_active_peak(h, t);
    if (b->size >= h->oversize) gs_stat_inc(&h->st.oversize_allocations, 1);
    if (at_peak) h->st.requested_at_peak_allocated = stat_all(h->st.requested_bytes);
    return b;
}

/* A policy's own choice of free block (gs_policy_ops.pick), out of the index. */
static gs_block *pick_free_block(gs_heap *h, unsigned pool, uint32_t stream, uint64_t size)
{
    gs_block *b = h->P->pick(h, h->cfg, pool, stream, size);
    if (b) {
        g_assert(b->state == GS_BLOCK_FREE && b->pool == pool && b->size >= size);
        if (!h->P->pick_takes) pool_remove(h, b);
    }
    return b;
}

gs_status gs_heap_grow_segment(gs_heap *h, unsigned pool, uint32_t stream, uint64_t bytes)
{
    if (over_limit(h, h->total_reserved + bytes)) return GS_ERR_OOM;
    gs_block *b = NULL;
    gs_status st = malloc_segment(h, pool, stream, bytes, &b);
    if (st == GS_OK) pool_insert(h, b);
    return st;
}

gs_status gs_heap_grow_pages(gs_heap *h, unsigned pool, uint32_t stream, uint64_t bytes)
{
    g_assert(h->pools[pool].page);
    gs_block *b = NULL;
    gs_status st = gs_expandable_grow(h, pool, stream, bytes, true, &b);
    if (st == GS_OK) pool_insert(h, b);
    return st;
}

gs_status gs_heap_grow_stitched(gs_heap *h, unsigned pool, uint32_t stream, uint64_t bytes)
{
    g_assert(h->pools[pool].stitch);
    gs_block *b = NULL;
    gs_status st = gs_stitch_grow(h, pool, stream, bytes, &b);
    if (st == GS_OK) pool_insert(h, b);
    return st;
}

/* A growth is about to collect garbage where a limit is set: the least limit under which
 * that would do nothing counts in gs_heap_limit_asked. */
static inline void note_gc_asked(gs_heap *h)
{
    /* a check of that limit against the heap's; past it the collection acts, and what it frees
     * depends on its threshold, a fraction of the limit: the policy says for which limits it
     * frees the same (policy.h, limit_unread), or else the limit is read as a number */
    if (h->P->limit_unread) (void)over_limit(h, h->P->limit_unread(h->cfg, h->total_reserved));
    else if (h->gc_active) limit_read_exactly(h);
}

/* The ladder for a policy that grows its own way (gs_policy_ops.grow): the same steps as
 * grow_pool's, each a growth by the policy followed by a new search of the index (as BFC's
 * Extend then FindChunkPtr), the full release skipped when the policy keeps its cache. */
static gs_status grow_by_policy(gs_heap *h, unsigned pool, uint32_t stream, uint64_t size,
                                gs_block **out)
{
    const gs_policy_ops *P = h->P;
#define GROW_AND_FIND(attempt)                                                              \
    do {                                                                                    \
        st = P->grow(h, h->cfg, pool, stream, size, (attempt));                             \
        if (st == GS_OK) {                                                                  \
            *out = P->pick ? pick_free_block(h, pool, stream, size)                         \
                           : get_free_block(h, pool, stream, size);                         \
            if (!*out) st = GS_ERR_OOM;                                                     \
        }                                                                                   \
        if (st != GS_OK && st != GS_ERR_OOM) return st;                                     \
    } while (0)
    gs_status st = GS_OK;
    note_gc_asked(h);
    if (h->gc_active) {
        st = P->collect(h, h->cfg);
        if (st != GS_OK) return st;
    }
    GROW_AND_FIND(0);
    if (st == GS_ERR_OOM && P->release_some) {
        gs_status rst = GS_OK;
        bool again = P->release_some(h, h->cfg, pool, stream, size, &rst);
        if (rst != GS_OK) return rst;
        if (again) GROW_AND_FIND(1);
    }
    if (st == GS_ERR_OOM && !h->keeps_cache && !h->nroutes) { /* as grow_pool's */
        gs_status rst = gs_heap_release_cached(h);
        if (rst != GS_OK) return rst;
        h->st.num_alloc_retries++;
        /* completing pending frees may have made a block that serves the request */
        *out = P->pick ? pick_free_block(h, pool, stream, size)
                       : get_free_block(h, pool, stream, size);
        if (*out) return GS_OK;
        GROW_AND_FIND(2);
    }
    if (st == GS_ERR_OOM && h->cb.reclaim) {
        gs_status rst = GS_OK;
        bool again = h->cb.reclaim(h->cb.ud, h, size, &rst);
        if (rst != GS_OK) return rst;
        if (again) {
            h->st.num_reclaim_retries++;
            GROW_AND_FIND(3);
        }
    }
#undef GROW_AND_FIND
    if (st == GS_ERR_OOM) h->st.num_ooms++;
    return st;
}

/* No cached block serves the request: grow the pool, climbing the out-of-memory ladder in
 * PyTorch's order (garbage collection, grow, release some and grow, release everything and
 * grow again: the counted retry), then ask the other allocators on the device, then fail
 * (counted in num_ooms). GS_OK and *out a block of at least size out of the index. */
static G_GNUC_NO_INLINE gs_status grow_pool(gs_heap *h, unsigned pool, uint32_t stream,
                                            uint64_t size, gs_block **out)
{
    const gs_policy_ops *P = h->P;
    if (P->grow) return grow_by_policy(h, pool, stream, size, out);
    uint64_t seg_size = P->segment_size(h->cfg, size);
    gs_status st = GS_OK;
    note_gc_asked(h);
    if (h->gc_active) {
        st = P->collect(h, h->cfg);
        if (st != GS_OK) return st;
    }
    if (h->reject_above && h->total_reserved + seg_size > h->reject_above) {
        /* refused before the device is asked: no release of the cache, no retry */
        h->st.num_oom_rejections++;
        h->st.num_ooms++;
        return GS_ERR_OOM;
    }
    st = alloc_block(h, pool, stream, size, seg_size, false, out);
    if (st == GS_ERR_OOM && P->release_some) {
        gs_status rst = GS_OK;
        bool again = P->release_some(h, h->cfg, pool, stream, size, &rst);
        if (rst != GS_OK) return rst;
        if (again) st = alloc_block(h, pool, stream, size, seg_size, false, out);
    }
    /* PyTorch skips the full flush, and so the counted retry, while a capture is underway. A
     * stitched pool skips it too for a request that no release could serve: one whose rounded
     * size with the bytes still allocated passes the limit (blocks whose frees wait for other
     * streams are not among them, so the flush would add nothing it could use). PyTorch
     * releases its whole cache for such a request, which a program that catches the OOM (a
     * library trying workspaces) then builds again; stitch keeps it (docs/stitch.md, "A request
     * no release can serve"). */
    if (st == GS_ERR_OOM && h->pools[pool].stitch &&
        over_limit(h, (uint64_t)stat_all(h->st.allocated_bytes) + size)) {
        h->st.num_ooms++;
        if (!h->nroutes) h->flush_owed = true; /* (none is owed inside a capture) */
        return st;
    }
    if (st == GS_ERR_OOM && !h->nroutes) {
        gs_status rst = gs_heap_release_cached(h);
        if (rst != GS_OK) return rst;
        st = alloc_block(h, pool, stream, size, seg_size, true, out);
    }
    /* Other allocators on the device may hold what this one needs in their caches: only
     * worth asking when the device refused, not this heap's own limit. */
    if (st == GS_ERR_OOM && h->cb.reclaim && !over_limit(h, h->total_reserved + seg_size)) {
        gs_status rst = GS_OK;
        bool again = h->cb.reclaim(h->cb.ud, h, seg_size, &rst);
        if (rst != GS_OK) return rst;
        if (again) {
            h->st.num_reclaim_retries++;
            st = alloc_block(h, pool, stream, size, seg_size, false, out);
        }
    }
    if (st == GS_ERR_OOM) h->st.num_ooms++;
    return st;
}

/* The pool of a request while routes are open: the first open route whose filter takes the
 * stream (PyTorch's get_pool walks captures_underway in order). */
static G_GNUC_NO_INLINE unsigned route_pool(const gs_heap *h, uint32_t stream, unsigned pool)
{
    for (unsigned i = 0; i < h->nroutes; i++) {
        const gs_route *r = &h->routes[i];
        if (r->all_streams || r->stream == stream) return r->k * GS_MAX_POOLS + pool;
    }
    return pool;
}

GS_HOT gs_status malloc_as(gs_heap *h, uint64_t orig, uint32_t stream, gs_block **out,
                          const bool plain)
{
    if (G_UNLIKELY(orig > GS_MAX_REQUEST)) {
        h->st.num_ooms++;
        return GS_ERR_OOM;
    }
    gs_round_memo *m = &h->memo[(orig * UINT64_C(0x9e3779b97f4a7c15)) >> 56];
    if (G_UNLIKELY(m->orig != orig)) {
        m->orig = orig;
        m->size = h->P->round_size(h->cfg, orig);
        m->pool = h->P->pool_of(h->cfg, m->size);
    }
    uint64_t size = m->size;
    unsigned pool = m->pool;
    if (G_UNLIKELY(h->nroutes)) pool = route_pool(h, stream, pool);
    gs_block *b = plain || G_LIKELY(!h->P->pick) ? find_free_block(h, pool, stream, size, plain)
                                                 : pick_free_block(h, pool, stream, size);
    if (!b) {
        gs_status st = grow_pool(h, pool, stream, size, &b);
        if (st != GS_OK) return st;
    }
    *out = alloc_found_block(h, b, size, orig, plain);
    if (h->peak_reserved_dirty) note_peak_reserved(h);
    return GS_OK;
}

gs_status gs_heap_malloc(gs_heap *h, uint64_t orig, uint32_t stream, gs_block **out)
{
    h->nops++;
    if (G_LIKELY(h->plain)) return malloc_as(h, orig, stream, out, true);
    return malloc_as(h, orig, stream, out, false);
}

/* ---- merge and free ---- */

/* Takes src, dst's neighbour (before or after it), out of the segment's list and gives its
 * bytes to dst. The caller removes src from its index and deletes it. */
static inline void absorb(gs_block *dst, gs_block *src, bool before)
{
    if (before) {
        dst->addr = src->addr;
        dst->prev = src->prev;
        if (dst->prev) dst->prev->next = dst;
        else dst->seg->head = dst;
    } else {
        dst->next = src->next;
        if (dst->next) dst->next->prev = dst;
    }
    dst->size += src->size;
}

/* Absorb neighbour src into dst if both are free, or both unmapped. Returns the bytes absorbed
 * (0: no merge). */
uint64_t gs_block_try_merge(gs_heap *h, gs_block *dst, gs_block *src)
{
    if (!src || src->state != dst->state ||
        (src->state != GS_BLOCK_FREE && src->state != GS_BLOCK_UNMAPPED))
        return 0;
    uint64_t n = src->size;
    absorb(dst, src, dst->prev == src);
    if (src->state == GS_BLOCK_FREE) pool_remove(h, src);
    else unmapped_remove(h, src);
    block_delete(h, src);
    return n;
}

/* Absorb src, b's free neighbour (before or after it), into b: the hot path's
 * gs_block_try_merge for free blocks. */
GS_HOT void merge_free(gs_heap *h, gs_block *b, gs_block *src, bool before, const bool plain)
{
    absorb(b, src, before);
    pool_remove_as(h, src, plain);
    block_delete(h, src);
}

/* The completion of a free: merge with free neighbours and return to the index.
 * PyTorch's free_block. Inline, with free_request, so a program's free is one call (they were
 * two calls of gs_heap_free, each saving and restoring registers: about 35 instructions). */
GS_HOT void free_block_as(gs_heap *h, gs_block *b, const bool plain)
{
    uint64_t requested = b->requested;
    int t = b->type;
    int64_t split_blocks = 0, split_bytes = 0;
    gs_block *prev = b->prev, *next = b->next;
    if (prev && prev->state == GS_BLOCK_FREE) {
        split_blocks -= 1;
        split_bytes -= (int64_t)prev->size;
        merge_free(h, b, prev, true, plain);
    }
    if (next && next->state == GS_BLOCK_FREE) {
        split_blocks -= 1;
        split_bytes -= (int64_t)next->size;
        merge_free(h, b, next, false, plain);
    }
    b->requested = 0;
    pool_insert_as(h, b, plain);
    if (gs_block_is_split(b)) {
        split_blocks += 1;
        split_bytes += (int64_t)b->size;
    }
    /* PyTorch keeps expandable blocks out of inactive_split: their whole pages can always be
     * released. */
    if (plain || !b->expandable) {
        if (split_blocks > 0) stat2_inc(h->st.inactive_split, t, split_blocks);
        else if (split_blocks < 0) stat2_dec(h->st.inactive_split, t, -split_blocks);
        if (split_bytes > 0) stat2_inc(h->st.inactive_split_bytes, t, split_bytes);
        else if (split_bytes < 0) stat2_dec(h->st.inactive_split_bytes, t, -split_bytes);
    }
    /* active and active_bytes: derived (gs_heap_stats) */
    stat2_dec(h->st.requested_bytes, t, (int64_t)requested);
}

/* The program's free. PyTorch's free(): allocation counts drop now, activity at completion. */
GS_HOT void free_request(gs_heap *h, gs_block *b)
{
    g_return_if_fail(b->state == GS_BLOCK_ALLOCATED);
    stat2_dec(h->st.allocation, b->type, 1);
    stat2_dec(h->st.allocated_bytes, b->type, (int64_t)b->size);
    if (b->size >= h->oversize) stat_dec_cur(&h->st.oversize_allocations, 1);
}

GS_HOT void free_block(gs_heap *h, gs_block *b) { free_block_as(h, b, false); }

void gs_heap_free(gs_heap *h, gs_block *b)
{
    h->nops++;
    free_request(h, b);
    if (G_LIKELY(h->plain)) free_block_as(h, b, true);
    else free_block_as(h, b, false);
}

void gs_heap_free_request(gs_heap *h, gs_block *b, gs_block **owner)
{
    h->nops++;
    free_request(h, b);
    pending_count(h, b, 1);
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
    h->nops++;
    g_return_if_fail(b->state == GS_BLOCK_PENDING);
    pending_unlink(h, b);
    pending_count(h, b, -1);
    free_block(h, b);
}

/* The oldest pending free (the list's last: frees are pushed at its head), or NULL. */
static gs_block *pending_oldest(const gs_heap *h)
{
    gs_block *b = h->pending;
    while (b && b->right) b = b->right;
    return b;
}

/* PyTorch's synchronize_and_free_events: the device is synchronised, so every pending free
 * completes now, of every pool (all) or of private pool k. Owners learn it through *owner =
 * NULL. PyTorch walks each stream's deque of events from its front, so the oldest free completes
 * first (they were completed newest first: a segment freed in three pieces merged at once, where
 * PyTorch counts a second inactive split block on the way); across streams its hash map's order
 * is no trace's, and the oldest first stands for it. */
static void drain_pending_where(gs_heap *h, bool all, unsigned k)
{
    h->st.num_sync_all_streams++; /* PyTorch counts a private pool's synchronisation too */
    for (gs_block *b = pending_oldest(h), *newer; b; b = newer) {
        newer = b->left;
        if (!all && gs_pool_private(b->pool) != k) continue;
        if (b->owner) *b->owner = NULL;
        pending_unlink(h, b);
        pending_count(h, b, -1);
        free_block(h, b);
    }
}

static void drain_pending(gs_heap *h)
{
    drain_pending_where(h, true, 0);
}

/* PyTorch's synchronize_and_free_events for one private pool: its pending frees complete. */
static void drain_pending_of(gs_heap *h, unsigned k)
{
    drain_pending_where(h, false, k);
}

/* ---- release ---- */

/* PyTorch's release_blocks for one pool: cudaFree whole free segments; unmap the free blocks
 * of expandable segments afterwards (unmapping changes the index being walked), freeing each
 * reservation left with nothing mapped. */
static gs_status release_pool(gs_heap *h, unsigned pool)
{
    const gs_findex *x = &h->pools[pool].blocks;
    GPtrArray *to_unmap = NULL;
    gs_status st = GS_OK;
    for (gs_block *b = gs_findex_first_from(x, 0), *next; b && st == GS_OK; b = next) {
        next = gs_pool_next(h, b);
        if (b->expandable) {
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
        st = gs_expandable_unmap(h, b);
        if (st == GS_OK && b->state == GS_BLOCK_UNMAPPED && !gs_block_is_split(b))
            st = gs_expandable_release(h, b);
    }
    if (to_unmap) g_ptr_array_free(to_unmap, TRUE);
    return st;
}

/* Release private pool k's cached segments (it is freeable), and forget it once it holds no
 * segment (PyTorch erases the pool when its cudaMalloc_count reaches 0) and no route leads to
 * it: a pool released while still recorded to (a caller out of PyTorch's order) keeps its slot
 * until the end closes the routes, which would otherwise send requests to a pool no release
 * could ever empty. */
static void forget_private(gs_heap *h, unsigned k)
{
    for (const gs_segment *s = h->segments; s; s = s->next)
        if (gs_pool_private(s->pool) == k) return;
    for (unsigned i = 0; i < h->nroutes; i++)
        if (h->routes[i].k == k) return;
    for (unsigned p = 0; p < h->npools; p++) {
        gs_pool *q = &h->pools[k * GS_MAX_POOLS + p];
        gs_findex_free(&q->blocks);
        q->get_free_calls = 0;
    }
    h->priv[k] = (gs_ppool){0};
}

static gs_status release_private(gs_heap *h, unsigned k)
{
    for (unsigned p = 0; p < h->npools; p++) {
        gs_status st = release_pool(h, k * GS_MAX_POOLS + p);
        if (st != GS_OK) return st;
    }
    forget_private(h, k);
    return GS_OK;
}

gs_status gs_heap_release_cached(gs_heap *h)
{
    h->nops++;
    drain_pending(h);
    if (h->keeps_cache) return GS_OK; /* pending frees complete; no segment goes back */
    for (unsigned i = 0; i < h->npools; i++) {
        gs_status st = release_pool(h, i);
        if (st != GS_OK) return st;
    }
    /* Then the private pools no one uses any more; those in use keep their segments. */
    for (unsigned k = 1; k <= GS_MAX_PRIVATE_POOLS; k++) {
        if (!h->priv[k].id || !h->priv[k].freeable) continue;
        gs_status st = release_private(h, k);
        if (st != GS_OK) return st;
    }
    return GS_OK;
}

/* ---- private pools ---- */

static unsigned private_slot(const gs_heap *h, uint32_t id)
{
    for (unsigned k = 1; k <= GS_MAX_PRIVATE_POOLS; k++)
        if (h->priv[k].id == id) return k;
    return 0;
}

gs_status gs_heap_pool_begin(gs_heap *h, uint32_t id, bool all_streams, uint32_t stream)
{
    if (!id || h->nroutes == GS_MAX_ROUTES) return GS_ERR_INVALID;
    if (h->P->grow) return GS_OK; /* no private pools: see core.h */
    unsigned k = private_slot(h, id);
    if (k && h->priv[k].freeable) return GS_ERR_INVALID; /* PyTorch asserts a live pool */
    if (!k) {
        k = private_slot(h, 0);
        if (!k) return GS_ERR_INVALID;
        h->priv[k] = (gs_ppool){.id = id, .uses = 0};
        h->pool_hi = MAX(h->pool_hi, (k + 1) * GS_MAX_POOLS);
    }
    /* The pool is being recorded to already: the same stream (or every stream) is PyTorch's
     * "already recording to mempool_id"; another stream joins the recording, without a use (a
     * capture forked onto a side stream, whose requests PyTorch's filter also takes). */
    bool recording = false;
    for (unsigned i = 0; i < h->nroutes; i++) {
        if (h->routes[i].k != k) continue;
        if (all_streams || h->routes[i].all_streams || h->routes[i].stream == stream)
            return GS_ERR_INVALID;
        recording = true;
    }
    if (recording) {
        h->routes[h->nroutes++] = (gs_route){.k = (uint8_t)k, .stream = stream};
        return GS_OK;
    }
    if (h->flush_owed && !h->nroutes) {
        /* the release stitch skipped at the limit, before the capture (PyTorch begins
         * allocating to the pool before the stream's capture begins): inside it the ladder
         * cannot release, and the private pool's growths cannot take the ordinary pools'
         * memory; releasing here keeps a program that completed under PyTorch's ladder from
         * failing in its capture (docs/stitch.md, "A request no release can serve") */
        h->flush_owed = false;
        gs_status st = gs_heap_release_cached(h);
        if (st != GS_OK) return st;
    }
    h->priv[k].uses++;
    h->routes[h->nroutes++] = (gs_route){.k = (uint8_t)k, .all_streams = all_streams,
                                         .stream = stream};
    return GS_OK;
}

void gs_heap_pool_end(gs_heap *h, uint32_t id)
{
    if (h->P->grow) return;
    unsigned k = private_slot(h, id), kept = 0;
    if (!k) return;
    for (unsigned i = 0; i < h->nroutes; i++) /* the recording's every stream */
        if (h->routes[i].k != k) h->routes[kept++] = h->routes[i];
    h->nroutes = kept;
}

gs_status gs_heap_pool_release(gs_heap *h, uint32_t id, bool empty_now)
{
    if (h->P->grow) return id ? GS_OK : GS_ERR_INVALID;
    h->nops++;
    unsigned k = id ? private_slot(h, id) : 0;
    if (!k || h->priv[k].uses <= 0) return GS_ERR_INVALID;
    if (--h->priv[k].uses == 0) h->priv[k].freeable = true;
    /* a pool that holds nothing and that no route leads to is gone at once: captures that
     * allocated nothing would otherwise hold their slots until a flush, and a sixteenth
     * capture find none */
    if (h->priv[k].freeable && !empty_now) forget_private(h, k);
    if (!empty_now || !h->priv[k].freeable) return GS_OK;
    drain_pending_of(h, k);
    return release_private(h, k);
}

uint32_t gs_heap_pool_id(const gs_heap *h, unsigned k)
{
    return k >= 1 && k <= GS_MAX_PRIVATE_POOLS ? h->priv[k].id : 0;
}

int64_t gs_policy_max_split_size(const gs_policy *p)
{
    uint64_t o = p->ops->oversize ? p->ops->oversize(p->cfg) : UINT64_MAX;
    return o == UINT64_MAX ? -1 : (int64_t)o;
}

int gs_heap_pool_uses(const gs_heap *h, uint32_t id)
{
    unsigned k = id ? private_slot(h, id) : 0;
    return k ? h->priv[k].uses : 0;
}

unsigned gs_heap_route_of(const gs_heap *h, uint32_t stream)
{
    return gs_pool_private(route_pool(h, stream, 0));
}

gs_status gs_heap_empty_cache(gs_heap *h)
{
    return gs_heap_release_cached(h);
}
