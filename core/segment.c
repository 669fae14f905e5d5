/* segment.c - the block and segment primitives the heap is made of (core-int.h): block structs
 * from slabs, the segment list, and the release of a whole-segment block to the device
 * (cudaFree). Off the per-request path, apart from the slab refill the spare stack calls.
 */
#include <stdlib.h>

#include "core-int.h"

/* ---- block structs ---- */

/* The spare stack ran dry: a new slab's blocks go onto it (block_take, core-int.h). */
void gs_block_slab_refill(gs_heap *h)
{
    void *mem = NULL;
    if (posix_memalign(&mem, _Alignof(gs_block), SLAB_BLOCKS * sizeof(gs_block)) != 0)
        g_error("failed to allocate %zu bytes (%d block structs)", /* as g_new would */
                SLAB_BLOCKS * sizeof(gs_block), SLAB_BLOCKS);
    gs_block *slab = mem;
    g_ptr_array_add(h->slabs, slab);
    while (h->spare_cap - h->nspare < SLAB_BLOCKS) gs_block_spare_grow(h);
    for (int i = SLAB_BLOCKS; i-- > 0;) h->spare[h->nspare++] = &slab[i];
}

/* Room for more spare block pointers. */
void gs_block_spare_grow(gs_heap *h)
{
    h->spare_cap = h->spare_cap ? 2 * h->spare_cap : SLAB_BLOCKS;
    h->spare = g_renew(gs_block *, h->spare, h->spare_cap);
}

/* ---- segments ---- */

void gs_segment_unlink(gs_heap *h, gs_segment *s)
{
    if (s->prev) s->prev->next = s->next;
    else h->segments = s->next;
    if (s->next) s->next->prev = s->prev;
    h->nsegments--;
}

void gs_segment_link(gs_heap *h, gs_segment *s)
{
    /* Every block lies within its segment, so a segment the index can key bounds every free
     * block's size: checked here, once, not at each insertion. */
    if (G_UNLIKELY(s->size >> GS_KEY_SIZE_BITS)) gs_segment_too_large(s);
    s->next = h->segments;
    if (h->segments) h->segments->prev = s;
    h->segments = s;
    h->nsegments++;
}

/* Free (cudaFree) a free block that is a whole segment. PyTorch's release_block. */
gs_status gs_heap_release_block(gs_heap *h, gs_block *b)
{
    h->nops++;
    g_return_val_if_fail(b->state == GS_BLOCK_FREE && !gs_block_is_split(b) && !b->expandable,
                         GS_ERR_INVALID);
    gs_status st = gs_dev_free(h->be, &h->calls, b->addr, b->size);
    if (st != GS_OK) return st; /* the segment stays cached; the heap is unchanged */
    if (h->cb.on_reserve) h->cb.on_reserve(h->cb.ud, b->seg, b->addr, -(int64_t)b->size);
    int t = b->type;
    h->st.num_device_free++;
    h->total_reserved -= b->size;
    pool_remove(h, b);
    stat2_dec(h->st.segment, t, 1);
    stat2_dec(h->st.reserved_bytes, t, (int64_t)b->size);
    if (b->size >= h->oversize) stat_dec_cur(&h->st.oversize_segments, 1);
    gs_segment_unlink(h, b->seg);
    g_free(b->seg);
    block_delete(h, b);
    return GS_OK;
}
