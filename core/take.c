/* take.c - a policy's pick that takes its block out of the index itself
 * (gs_policy_ops.pick_takes): the lower bound found and unlinked in one descent, as the core's
 * own best fit does (find_free_block), where a pick that only finds its block costs a second
 * descent when the core removes it. TLSF's good fit and the cudaMallocAsync model's
 * same-stream fit are lower bounds, and make most of their mallocs' index work. */
#include "core-int.h"

gs_block *gs_pool_take_lower_bound(gs_heap *h, unsigned pool, uint32_t stream, uint64_t size)
{
    gs_pool *p = &h->pools[pool];
    gs_fpos at;
    gs_block *b = findex_lower_bound_in(&p->blocks, stream, size, &at);
    if (b) findex_unlink(&p->blocks, &at, b);
    return b;
}

void gs_pool_take(gs_heap *h, gs_block *b)
{
    pool_remove(h, b);
}
