/* addr_index.c - a second order of a pool's free blocks, by address per stream, kept only for
 * the policies that ask for it (gs_policy_ops.addr_order): RMM's arenas take the
 * lowest-addressed free block that holds a request, which the (stream, size, address) index
 * answers only by walking every larger block of the stream (thousands, on a real trace).
 *
 * Each stream's free blocks (gs_fstream.by_addr) form a treap by address whose nodes keep the
 * largest size below them (gs_block.amax), so the first fit is one descent: go left while the
 * left subtree holds a block large enough, else take the node if it is, else go right. The
 * links live in the blocks' second cache line, which the size-class index does not read; the
 * priorities are the size-class treaps' hash of the address, so a replay stays deterministic.
 * findex_insert and findex_unlink (core-int.h) call in here behind one branch on the stream's
 * addr_order (the findex's by_addr, copied into the stream's first line): every other policy
 * pays that branch and nothing else.
 *
 * Recursive: the depth is that of a treap (about 2 log2 n expected), and these policies are the
 * only callers.
 */
#include "core-int.h"

static inline uint64_t amax_of(const gs_block *n) { return n ? n->amax : 0; }

static inline void fix(gs_block *n)
{
    uint64_t m = MAX(amax_of(n->aleft), amax_of(n->aright));
    n->amax = MAX(m, n->size);
}

/* Split the treap under n by address: the blocks below addr into *l, the rest into *r. */
static void split(gs_block *n, uint64_t addr, gs_block **l, gs_block **r)
{
    if (!n) {
        *l = *r = NULL;
        return;
    }
    if (n->addr < addr) {
        split(n->aright, addr, &n->aright, r);
        *l = n;
    } else {
        split(n->aleft, addr, l, &n->aleft);
        *r = n;
    }
    fix(n);
}

/* Insert b (priority prio) under n; returns the new root. As treap_insert: b goes below every
 * node that outranks it, or ties. */
static gs_block *insert(gs_block *n, gs_block *b, uint32_t prio)
{
    if (!n || prio_of(n->addr) < prio) {
        split(n, b->addr, &b->aleft, &b->aright);
        fix(b);
        return b;
    }
    if (b->addr < n->addr) n->aleft = insert(n->aleft, b, prio);
    else n->aright = insert(n->aright, b, prio);
    if (b->size > n->amax) n->amax = b->size;
    return n;
}

/* Join two treaps, every address of l below every one of r. */
static gs_block *join(gs_block *l, gs_block *r)
{
    if (!l) return r;
    if (!r) return l;
    if (prio_of(l->addr) >= prio_of(r->addr)) {
        l->aright = join(l->aright, r);
        fix(l);
        return l;
    }
    r->aleft = join(l, r->aleft);
    fix(r);
    return r;
}

static gs_block *remove_from(gs_block *n, const gs_block *b)
{
    if (n == b) return join(b->aleft, b->aright);
    if (b->addr < n->addr) n->aleft = remove_from(n->aleft, b);
    else n->aright = remove_from(n->aright, b);
    /* the largest below n is another block's unless b was it: then the children's are read */
    if (b->size >= n->amax) fix(n);
    return n;
}

void gs_addr_insert(gs_fstream *s, gs_block *b)
{
    s->by_addr = insert(s->by_addr, b, prio_of(b->addr));
}

void gs_addr_remove(gs_fstream *s, gs_block *b)
{
    s->by_addr = remove_from(s->by_addr, b);
}

gs_block *gs_pool_first_fit(const gs_heap *h, unsigned pool, uint32_t stream, uint64_t size)
{
    const gs_findex *x = &h->pools[pool].blocks;
    g_return_val_if_fail(x->by_addr, NULL);
    const gs_fstream *s = stream < x->ns ? x->s[stream] : NULL;
    gs_block *n = s ? s->by_addr : NULL;
    if (!n || n->amax < size) return NULL;
    for (;;) {
        if (n->aleft && n->aleft->amax >= size) n = n->aleft;
        else if (n->size >= size) return n;
        else n = n->aright; /* amax >= size: the block is on the right */
    }
}
