/* expandable.c - expandable segments (PyTorch's expandable_segments:True): per pool and stream,
 * one virtual reservation whose pages are mapped as the pool grows and unmapped as it releases
 * its cache, so a pool stays one piece of address space instead of many cudaMalloc segments.
 *
 * Follows find_expandable_block, map_block, try_allocate_expandable_block, unmap_block and
 * release_blocks of PyTorch's CUDACachingAllocator.cpp (docs/pytorch-allocator.md §2).
 * The address space not backed by pages is held by unmapped blocks, kept in a second index per
 * pool (core-int.h); heap.c calls in here to grow, to release and at teardown.
 */
#include "core-int.h"

static inline bool allocatable(const gs_block *b)
{
    return b && (b->state == GS_BLOCK_FREE || b->state == GS_BLOCK_UNMAPPED);
}

/* Reserve a new expandable segment for pool/stream: address space for 9/8 of the device, so
 * pages unmapped early in the range can be replaced at its end. One unmapped block covers it. */
gs_status gs_expandable_new_segment(gs_heap *h, unsigned pool, uint32_t stream, gs_block **out)
{
    g_assert(stream < GS_MAX_STREAMS); /* every block comes from a segment of its stream */
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
    if (h->pools[pool].stitch) s->hpages = g_new0(uint32_t, 1); /* marks it; grown with handles */
    gs_block *b = block_new(h);
    b->addr = va;
    b->size = s->size;
    b->stream = (uint16_t)stream;
    b->pool = (uint8_t)pool;
    b->seg = s;
    b->type = h->pools[pool].type;
    b->expandable = true;
    s->head = b;
    gs_segment_link(h, s);
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
    return gs_expandable_new_segment(h, pool, stream, out);
}

/* Release an unmapped page's handle. One the device does not take back is kept, and released
 * again at teardown (gs_expandable_release_orphans), where a second failure is counted: a page
 * is never forgotten while it holds device memory. */
static void keep_orphan(gs_heap *h, uint64_t handle, uint64_t size)
{
    if (!h->orphans) h->orphans = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    uint64_t o[2] = {handle, size};
    g_array_append_vals(h->orphans, o, 2);
}

gs_status gs_expandable_release_page(gs_heap *h, uint64_t handle, uint64_t size)
{
    gs_status st = gs_dev_page_release(h->be, &h->calls, handle, size);
    if (st != GS_OK) keep_orphan(h, handle, size);
    return st;
}

size_t gs_expandable_release_orphans(gs_heap *h)
{
    size_t failed = 0;
    for (guint i = 0; h->orphans && i + 1 < h->orphans->len; i += 2)
        failed += gs_dev_page_release(h->be, &h->calls, g_array_index(h->orphans, uint64_t, i),
                                      g_array_index(h->orphans, uint64_t, i + 1)) != GS_OK;
    if (h->orphans) g_array_free(h->orphans, TRUE);
    h->orphans = NULL;
    return failed;
}

/* Room for n calls in the heap's batch. */
static gs_dev_call *batch_room(gs_heap *h, size_t n)
{
    if (n > h->dcalls_cap) {
        h->dcalls_cap = MAX(n, 2 * h->dcalls_cap);
        h->dcalls = g_renew(gs_dev_call, h->dcalls, h->dcalls_cap);
    }
    return h->dcalls;
}

/* A call of kind k for each page of slots [from, to) of s, in order, as one batch: the status
 * of the first that fails (GS_OK if none), and in *made the calls made (gs_dev_batch). The
 * slots' handles are read, or written by a cuMemCreate, in place: the table must hold them. */
static gs_status page_calls(gs_heap *h, gs_segment *s, gs_call_kind k, uint64_t from,
                            uint64_t to, size_t *made)
{
    gs_dev_call *c = batch_room(h, to - from);
    for (uint64_t i = from; i < to; i++)
        c[i - from] = (gs_dev_call){k, s->addr + i * s->page, s->page, &s->handles[i]};
    return gs_dev_batch(h->be, &h->calls, c, to - from, made);
}

/* Release the handles of slots [from, to) and clear them. Every call is made whatever the
 * others return (a handle the device keeps becomes an orphan: gs_expandable_release_page);
 * the first failure's status is returned. */
static gs_status release_pages(gs_heap *h, gs_segment *s, uint64_t from, uint64_t to)
{
    gs_status first = GS_OK;
    for (uint64_t i = from; i < to;) {
        size_t made;
        gs_status u = page_calls(h, s, GS_CALL_PAGE_RELEASE, i, to, &made);
        i += made;
        if (u == GS_OK) continue;
        keep_orphan(h, s->handles[i - 1], s->page);
        if (first == GS_OK) first = u;
    }
    if (to > from) memset(&s->handles[from], 0, (to - from) * sizeof *s->handles);
    return first;
}

/* Give back the handles of slots [from, to) after the map's call failed with st: unmap those of
 * [from, mapped_to) first. Every call is made whatever the others return; the status is st,
 * unless st was an OOM and one of these calls failed: the device failing is then what gets
 * reported, not an OOM the policy would go on to handle (PyTorch's map() throws when a
 * cuMemRelease fails while it gives back the pages of a cuMemCreate that ran out of memory). */
static gs_status unwind_map(gs_heap *h, gs_segment *s, uint64_t from, uint64_t mapped_to,
                            uint64_t to, gs_status st)
{
    gs_status first = GS_OK;
    for (uint64_t i = from; i < mapped_to;) {
        size_t made;
        gs_status u = page_calls(h, s, GS_CALL_UNMAP, i, mapped_to, &made);
        if (first == GS_OK) first = u;
        i += made;
    }
    uint64_t held = from; /* the handles made: [from, held) */
    while (held < to && seg_handle(s, held)) held++;
    gs_status u = release_pages(h, s, from, held);
    if (first == GS_OK) first = u;
    return st == GS_ERR_OOM && first != GS_OK ? first : st;
}

/* Back slots [begin, end) of s with pages: one cuMemCreate per page, a cuMemMap each, one
 * cuMemSetAccess over the range. On failure every page of this call is released again and the
 * failing call's status returned (GS_ERR_OOM when a cuMemCreate finds no memory; a device error
 * instead when giving the pages back failed too: unwind_map). */
static gs_status map_pages(gs_heap *h, gs_segment *s, uint64_t begin, uint64_t end)
{
    uint64_t pg = s->page;
    size_t made;
    (void)seg_handle_at(s, end - 1); /* the table holds every slot the batches write */
    gs_status st = page_calls(h, s, GS_CALL_PAGE_CREATE, begin, end, &made);
    if (st != GS_OK) {
        uint64_t failed = begin + made - 1;
        s->handles[failed] = 0;
        return unwind_map(h, s, begin, begin, failed, st);
    }
    st = page_calls(h, s, GS_CALL_MAP, begin, end, &made);
    if (st != GS_OK) return unwind_map(h, s, begin, begin + made - 1, end, st);
    st = gs_dev_set_access(h->be, &h->calls, s->addr + begin * pg, (end - begin) * pg, pg);
    if (st != GS_OK) st = unwind_map(h, s, begin, end, end, st);
    return st;
}

gs_block *gs_expandable_settle(gs_heap *h, gs_block *u, uint64_t bytes)
{
    unmapped_remove(h, u);
    if (bytes < u->size)
        unmapped_insert(h, block_carve(h, u, u->addr + bytes, u->size - bytes, u, u->next));
    u->size = bytes;
    u->state = GS_BLOCK_FREE;
    gs_block_try_merge(h, u, u->prev);
    gs_block_try_merge(h, u, u->next);
    pool_insert(h, u);
    return u;
}

/* Map whole pages at the start of unmapped block b to cover size bytes. The mapped part becomes
 * a free block, merged with free neighbours; the rest stays unmapped. PyTorch's map_block.
 * On failure (map_pages) the heap is unchanged. */
static gs_status map_block(gs_heap *h, gs_block *b, uint64_t size)
{
    g_assert(b->state == GS_BLOCK_UNMAPPED && size > 0 && size <= b->size);
    gs_segment *s = b->seg;
    uint64_t pg = s->page;
    uint64_t begin = (b->addr - s->addr) / pg, end = (b->addr - s->addr + size + pg - 1) / pg;
    gs_status st = map_pages(h, s, begin, end);
    if (st != GS_OK) return st;

    uint64_t mapped = (end - begin) * pg;
    s->mapped_pages += end - begin;
    b = gs_expandable_settle(h, b, mapped);

    h->total_reserved += mapped;
    if (h->cb.on_reserve) h->cb.on_reserve(h->cb.ud, s, s->addr + begin * pg, (int64_t)mapped);
    stat2_inc(h->st.reserved_bytes, b->type, (int64_t)mapped);
    h->st.num_device_alloc++;
    note_reserved_up(h);
    return GS_OK;
}

/* Grow pool/stream's expandable segment to hold a block of size, and take that block out of the
 * index. Mapping starts at the lowest address that works, so segments stay one piece. PyTorch's
 * try_allocate_expandable_block. check_limit: GS_ERR_OOM, nothing mapped, when the pages it
 * would map take the heap past its limit (PyTorch checks a segment's size before, its caller's
 * job; a pool that grows by what it lacks checks what it maps). */
gs_status gs_expandable_grow(gs_heap *h, unsigned pool, uint32_t stream, uint64_t size,
                             bool check_limit, gs_block **out)
{
    gs_block *c;
    gs_status st = find_expandable_block(h, pool, stream, size, &c);
    if (st != GS_OK) return st;
    if (check_limit && h->limit) { /* what the pages below will map, against the limit */
        uint64_t have = 0, map = 0, pg = c->seg->page;
        for (gs_block *x = c; have < size; x = x->next) {
            uint64_t part = MIN(size - have, x->size);
            if (x->state == GS_BLOCK_UNMAPPED) part = (part + pg - 1) / pg * pg, map += part;
            have += part;
        }
        if (over_limit(h, h->total_reserved + map)) return GS_ERR_OOM;
    }
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
gs_status gs_expandable_unmap(gs_heap *h, gs_block *b)
{
    gs_segment *s = b->seg;
    if (s->hpages) return gs_stitch_unmap(h, b);
    uint64_t pg = s->page;
    uint64_t begin = (b->addr - s->addr + pg - 1) / pg, end = (b->addr + b->size - s->addr) / pg;
    if (begin >= end) return GS_OK;
    /* Page by page, a cuMemUnmap then a cuMemRelease (PyTorch's unmapHandles), one batch,
     * stopping at the first failure: a page whose release failed is unmapped all the same (its
     * handle kept as an orphan), one whose unmap failed is left as it was. */
    gs_dev_call *c = batch_room(h, 2 * (end - begin));
    for (uint64_t i = begin; i < end; i++) {
        c[2 * (i - begin)] = (gs_dev_call){GS_CALL_UNMAP, s->addr + i * pg, pg, &s->handles[i]};
        c[2 * (i - begin) + 1] = (gs_dev_call){GS_CALL_PAGE_RELEASE, 0, pg, &s->handles[i]};
    }
    size_t made;
    gs_status st = gs_dev_batch(h->be, &h->calls, c, 2 * (end - begin), &made);
    uint64_t done = made / 2; /* pages unmapped: both calls made, or the release failed */
    if (st != GS_OK && made % 2 == 0) keep_orphan(h, s->handles[begin + done - 1], pg);
    if (done == 0) return st;
    end = begin + done;
    memset(&s->handles[begin], 0, done * sizeof *s->handles);
    s->mapped_pages -= done;

    uint64_t ua = s->addr + begin * pg, un = (end - begin) * pg;
    pool_remove(h, b);
    if (ua > b->addr) pool_insert(h, block_carve(h, b, b->addr, ua - b->addr, b->prev, b));
    if (b->addr + b->size > ua + un)
        pool_insert(h, block_carve(h, b, ua + un, b->addr + b->size - (ua + un), b, b->next));
    b->addr = ua;
    b->size = un;
    b->state = GS_BLOCK_UNMAPPED;
    gs_block_try_merge(h, b, b->prev);
    gs_block_try_merge(h, b, b->next);
    unmapped_insert(h, b);

    h->total_reserved -= un;
    if (h->cb.on_reserve) h->cb.on_reserve(h->cb.ud, s, ua, -(int64_t)un);
    stat2_dec(h->st.reserved_bytes, b->type, (int64_t)un);
    h->st.num_device_free++;
    return st;
}

/* Free the reservation of an expandable segment that is one unmapped block. */
gs_status gs_expandable_release(gs_heap *h, gs_block *b)
{
    gs_segment *s = b->seg;
    g_assert(b->state == GS_BLOCK_UNMAPPED && b->addr == s->addr && b->size == s->size);
    gs_status st = gs_dev_va_release(h->be, &h->calls, s->addr, s->size);
    if (st != GS_OK) return st;
    unmapped_remove(h, b);
    gs_segment_unlink(h, s);
    g_free(s->handles);
    g_free(s->hpages);
    g_free(s);
    block_delete(h, b);
    return GS_OK;
}

/* At teardown (gs_heap_free_all): unmap and release every page of s, whatever its blocks' state,
 * then its reservation; each call is made whatever the others returned (the program is gone).
 * Returns how many failed. The caller unlinks s. */
size_t gs_expandable_destroy(gs_heap *h, gs_segment *s)
{
    size_t failed = 0;
    for (uint64_t i = 0; i < s->nhandles; i++) {
        if (!s->handles[i] || (s->hpages && !s->hpages[i])) continue;
        /* a stitched segment's handle spans hpages[i] slots, mapped and released as one */
        uint64_t bytes = s->hpages ? s->hpages[i] * s->page : s->page;
        failed += gs_dev_unmap(h->be, &h->calls, s->addr + i * s->page, bytes) != GS_OK;
        failed += gs_dev_page_release(h->be, &h->calls, s->handles[i], bytes) != GS_OK;
    }
    failed += gs_dev_va_release(h->be, &h->calls, s->addr, s->size) != GS_OK;
    g_free(s->handles);
    g_free(s->hpages);
    return failed;
}
