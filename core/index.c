/* index.c - the free-block index: an intrusive treap per pool, ordered by (stream, size, addr),
 * and the policies' view of it (gs_pool_*, core.h).
 *
 * Intrusive (the links live in the block) so inserting and removing never allocate; a treap
 * because it is the shortest balanced tree to get right: expected O(log n) for insert, remove
 * and lower bound. Priorities come from a hash of the address, so a replay is deterministic.
 * Successor and predecessor are found by a descent from the root (no parent links to keep).
 *
 * The same treap, keyed (stream, addr), indexes a pool's unmapped blocks (PyTorch's
 * pool.unmapped): their key's size half is 0.
 *
 * Here: insertion and removal (the rotations), and the policies' view. The key and the
 * descents (lower bound, next, prev, and the search before a removal) are static inline in
 * core-int.h, since a malloc runs one or more of them.
 */
#include "core-int.h"

static uint32_t prio_of(uint64_t addr)
{
    /* splitmix64 finaliser: neighbouring addresses get unrelated priorities */
    uint64_t z = addr + UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return (uint32_t)(z ^ (z >> 31));
}

/* Insert b, whose skey the caller has set. */
void gs_index_insert(gs_tree *p, gs_block *b)
{
    /* Top-down, in one pass: walk down while the nodes outrank b, then b takes that place and
     * the subtree found there is split by b's key into b's left and right subtrees. */
    g_assert(b->size < (UINT64_C(1) << GS_KEY_SIZE_BITS) && b->stream < GS_MAX_STREAMS);
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
void gs_index_unlink(gs_tree *p, gs_block **link, gs_block *b)
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

/* ---- the policies' view (core.h) ---- */

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

/* The largest free block of a pool: the last block of each stream in the index (one descent per
 * stream that has free blocks, not a walk over them). */
static uint64_t pool_largest(const gs_tree *t)
{
    uint64_t largest = 0;
    for (gs_block *b = index_lower_bound(t, 0, 0, 0); b;) {
        /* the first block of the next stream, and the last one of b's before it */
        gs_block *nx = b->stream + 1 < GS_MAX_STREAMS ? index_lower_bound(t, b->stream + 1, 0, 0)
                                                      : NULL;
        gs_block *last = nx ? index_prev(t, nx) : NULL;
        if (!nx) for (last = t->root; last->right;) last = last->right;
        if (last->size > largest) largest = last->size;
        b = nx;
    }
    return largest;
}

uint64_t gs_heap_free_bytes(const gs_heap *h, uint64_t *largest)
{
    uint64_t total = 0, big = 0;
    for (unsigned i = 0; i < h->npools; i++) {
        total += h->pools[i].free_bytes;
        if (largest && h->pools[i].blocks.count) big = MAX(big, pool_largest(&h->pools[i].blocks));
    }
    if (largest) *largest = big;
    return total;
}
