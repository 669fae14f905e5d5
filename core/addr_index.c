/* addr_index.c - a second order of a pool's free blocks, by address per stream, kept only for
 * the policies that ask for it (gs_policy_ops.addr_order): RMM's arenas take the
 * lowest-addressed free block that holds a request, which the (stream, size, address) index
 * answers only by walking every larger block of the stream (thousands, on a real trace).
 *
 * Each stream's free blocks (gs_fstream.by_addr) are in one of two forms, by their number:
 *   list   (at most GS_ADDR_TREE_AT blocks) a doubly linked list by address (aleft, aright).
 *          Most streams hold a few free blocks, and a list costs a few stores per update where
 *          a treap costs a split or a join (a descent, and a fix of amax on the way back). The
 *          first fit walks from the lowest address; a miss is known first, from the size-class
 *          index's bitmaps (may_hold), so a growth does not walk the list. An insertion looks
 *          for its place from a finger (gs_fstream.afinger): the neighbour of the last removal,
 *          or the last insertion. A malloc takes a block out and puts its remainder back at the
 *          same place, and a free's merges take out the neighbours the merged block replaces,
 *          so the finger is nearly always at the place already. The finger is always a block
 *          of the list (a removal moves it off the block it removes), so it needs no check.
 *   treap  (more blocks) by address, each node with the largest size below it (amax) and its
 *          parent, so the first fit is one descent: go left while the left subtree holds a
 *          block large enough, else take the node if it is, else go right. An insertion goes to
 *          a leaf and rotates up; a removal rotates the block down to a leaf and fixes amax
 *          upwards, stopping where it no longer changes: no recursion, no search from the root.
 *          The priorities are the size-class treaps' hash of the address, so the shape, like
 *          the first fit itself, is a function of the blocks alone.
 * A list becomes a treap when it passes GS_ADDR_TREE_AT blocks (built in one pass over it) and
 * a treap a list when it falls below GS_ADDR_LIST_AT: the gap keeps a stream at the border from
 * converting on every event. Either way the first fit is the same block (the lowest address
 * that holds the request), so the form changes the replay's speed, never its result. Why 128:
 * a treap's update (a descent fixing amax, rotations) costs more than a list's walk of a few
 * dozen blocks; at 64/16 resnet50's rmm-arena replay took 588 instructions an event, at 32/8
 * 666, at 128/32 (and 256/64) 442 (bench/ir_per_event.sh: no bundled trace's stream passes
 * 128, the scaling benchmark's do).
 *
 * The pool also keeps its free blocks that are whole segments (gs_findex.whole, each block's
 * segment knowing its place: O(1) removal), so that a policy giving its empty segments back
 * (rmm-arena's grow, at every growth) reads them at once instead of walking every free block.
 * A block is whole when it has no neighbour in its segment; it cannot gain or lose one while in
 * the index (a neighbour is carved or merged only from a block taken out), so the test at
 * insertion holds until the removal.
 *
 * The links live in the blocks' second cache line, which the size-class index does not read.
 * findex_insert and findex_unlink (core-int.h) call in here behind one branch on the stream's
 * addr_order (the findex's by_addr, copied into the stream's first line): every other policy
 * pays that branch and nothing else.
 */
#include <stdlib.h>

#include "core-int.h"

/* ---- the whole segments ---- */

static void whole_add(gs_findex *x, gs_block *b)
{
    if (x->nwhole == x->whole_cap) {
        x->whole_cap = x->whole_cap ? 2 * x->whole_cap : 16;
        x->whole = g_renew(gs_block *, x->whole, x->whole_cap);
    }
    x->whole[x->nwhole++] = b;
    b->seg->whole_at = x->nwhole;
}

static void whole_del(gs_findex *x, gs_block *b)
{
    uint32_t i = b->seg->whole_at - 1;
    g_assert(i < x->nwhole && x->whole[i] == b);
    gs_block *last = x->whole[--x->nwhole];
    x->whole[i] = last;
    last->seg->whole_at = i + 1;
    b->seg->whole_at = 0;
}

/* ---- the treap ---- */

static inline uint64_t amax_of(const gs_block *n) { return n ? n->amax : 0; }

GS_HOT void fix(gs_block *n)
{
    uint64_t m = MAX(amax_of(n->aleft), amax_of(n->aright));
    n->amax = MAX(m, n->size);
}

/* Put c in place of old as the child of p (the root when p is NULL). */
static inline void replace_child(gs_fstream *s, gs_block *p, const gs_block *old, gs_block *c)
{
    if (!p) s->by_addr = c;
    else if (p->aleft == old) p->aleft = c;
    else p->aright = c;
    if (c) c->aparent = p;
}

/* Rotate c above its parent p: c's subtree is then p's old one (so it takes p's amax) and p's
 * is recomputed. */
static void rotate_up(gs_fstream *s, gs_block *c)
{
    gs_block *p = c->aparent;
    if (p->aleft == c) {
        p->aleft = c->aright;
        if (p->aleft) p->aleft->aparent = p;
        c->aright = p;
    } else {
        p->aright = c->aleft;
        if (p->aright) p->aright->aparent = p;
        c->aleft = p;
    }
    replace_child(s, p->aparent, p, c);
    p->aparent = c;
    c->amax = p->amax;
    fix(p);
}

static void tree_insert(gs_fstream *s, gs_block *b)
{
    gs_block *p = NULL, **link = &s->by_addr;
    while (*link) {
        p = *link;
        if (b->size > p->amax) p->amax = b->size;
        link = b->addr < p->addr ? &p->aleft : &p->aright;
    }
    b->aleft = b->aright = NULL;
    b->aparent = p;
    b->amax = b->size;
    *link = b;
    uint32_t prio = prio_of(b->addr);
    while (b->aparent && prio_of(b->aparent->addr) < prio) rotate_up(s, b);
}

static void tree_remove(gs_fstream *s, gs_block *b)
{
    /* down to at most one child: the child of higher priority comes up (treap_unlink's rule) */
    while (b->aleft && b->aright)
        rotate_up(s, prio_of(b->aleft->addr) > prio_of(b->aright->addr) ? b->aleft : b->aright);
    gs_block *p = b->aparent;
    replace_child(s, p, b, b->aleft ? b->aleft : b->aright);
    /* Every amax above counted b; once one is unchanged without it, so are those above. */
    for (; p; p = p->aparent) {
        uint64_t old = p->amax;
        fix(p);
        if (p->amax == old) break;
    }
}

/* The list (by_addr, naddr blocks) as a treap, in one pass: a Cartesian tree built along the
 * right spine, each node's amax fixed as it leaves the spine (its subtree is then complete). */
static void list_to_tree(gs_fstream *s)
{
    gs_block *spine[GS_ADDR_TREE_AT + 2];
    unsigned k = 0;
    gs_block *b = s->by_addr;
    g_assert(s->naddr <= G_N_ELEMENTS(spine));
    while (b) {
        gs_block *next = b->aright;
        uint32_t prio = prio_of(b->addr);
        gs_block *last = NULL;
        while (k && prio_of(spine[k - 1]->addr) < prio) {
            last = spine[--k];
            fix(last);
        }
        b->aleft = last;
        if (last) last->aparent = b;
        b->aright = NULL;
        b->aparent = k ? spine[k - 1] : NULL;
        if (k) spine[k - 1]->aright = b;
        spine[k++] = b;
        b = next;
    }
    s->by_addr = k ? spine[0] : NULL;
    while (k) fix(spine[--k]); /* the spine's deepest first */
    s->atree = true;
}

/* The treap as a list, in address order. */
static void tree_to_list(gs_fstream *s)
{
    gs_block *v[GS_ADDR_LIST_AT];
    unsigned n = 0;
    gs_block *b = s->by_addr;
    if (b)
        while (b->aleft) b = b->aleft;
    while (b) { /* in order, through the parent links */
        g_assert(n < G_N_ELEMENTS(v));
        v[n++] = b;
        if (b->aright) {
            b = b->aright;
            while (b->aleft) b = b->aleft;
        } else {
            while (b->aparent && b->aparent->aright == b) b = b->aparent;
            b = b->aparent;
        }
    }
    for (unsigned i = 0; i < n; i++) {
        v[i]->aleft = i ? v[i - 1] : NULL;
        v[i]->aright = i + 1 < n ? v[i + 1] : NULL;
    }
    s->by_addr = n ? v[0] : NULL;
    s->afinger = NULL;
    s->atree = false;
}

/* ---- the list ---- */

static void list_insert(gs_fstream *s, gs_block *b)
{
    gs_block *before, *after, *f = s->afinger;
    if (f && f->addr < b->addr) {
        before = f;
        after = f->aright;
        while (after && after->addr < b->addr) {
            before = after;
            after = after->aright;
        }
    } else if (f) {
        after = f;
        before = f->aleft;
        while (before && before->addr > b->addr) {
            after = before;
            before = before->aleft;
        }
    } else {
        before = NULL;
        after = s->by_addr;
        while (after && after->addr < b->addr) {
            before = after;
            after = after->aright;
        }
    }
    b->aleft = before;
    b->aright = after;
    if (before) before->aright = b;
    else s->by_addr = b;
    if (after) after->aleft = b;
    s->afinger = b;
}

static void list_remove(gs_fstream *s, gs_block *b)
{
    if (b->aleft) b->aleft->aright = b->aright;
    else s->by_addr = b->aright;
    if (b->aright) b->aright->aleft = b->aleft;
    s->afinger = b->aleft;
}

/* ---- updates, from findex_insert and findex_unlink ---- */

void gs_addr_insert(gs_findex *x, gs_fstream *s, gs_block *b)
{
    if (!b->prev && !b->next) whole_add(x, b);
    s->naddr++;
    if (s->atree) {
        tree_insert(s, b);
        return;
    }
    list_insert(s, b);
    if (s->naddr > GS_ADDR_TREE_AT) list_to_tree(s);
}

void gs_addr_remove(gs_findex *x, gs_fstream *s, gs_block *b)
{
    if (!b->prev && !b->next) whole_del(x, b);
    s->naddr--;
    if (!s->atree) {
        list_remove(s, b);
        return;
    }
    tree_remove(s, b);
    if (s->naddr < GS_ADDR_LIST_AT) tree_to_list(s);
}

/* ---- the policies' view ---- */

/* Whether stream s holds a block of at least size bytes, from the size-class index: the
 * request's class's larger classes and rows by the bitmaps, its own class by its largest. */
static bool may_hold(const gs_fstream *s, uint64_t size)
{
    unsigned sl, fl = size_class(size, &sl);
    if (s->rows_bits >> fl >> 1) return true;
    const gs_frow *r = s->rows[fl];
    if (!r || !(r->bits >> sl)) return false;
    if (r->bits >> sl >> 1) return true;
    return class_max(r, sl)->size >= size;
}

gs_block *gs_pool_first_fit(const gs_heap *h, unsigned pool, uint32_t stream, uint64_t size)
{
    const gs_findex *x = &h->pools[pool].blocks;
    g_return_val_if_fail(x->by_addr, NULL);
    const gs_fstream *s = stream < x->ns ? x->s[stream] : NULL;
    gs_block *n = s ? s->by_addr : NULL;
    if (!n) return NULL;
    if (!s->atree) {
        if (!may_hold(s, size)) return NULL;
        while (n->size < size) n = n->aright; /* may_hold: one is there */
        return n;
    }
    if (n->amax < size) return NULL;
    for (;;) {
        if (n->aleft && n->aleft->amax >= size) n = n->aleft;
        else if (n->size >= size) return n;
        else n = n->aright; /* amax >= size: the block is on the right */
    }
}

static int by_key(const void *a, const void *b)
{
    gs_key ka = key_of(*(gs_block *const *)a), kb = key_of(*(gs_block *const *)b);
    return (ka > kb) - (ka < kb);
}

gs_block **gs_pool_whole_blocks(const gs_heap *h, unsigned pool, size_t *n)
{
    const gs_findex *x = &h->pools[pool].blocks;
    *n = 0;
    g_return_val_if_fail(x->by_addr, NULL);
    if (!x->nwhole) return NULL;
    gs_block **v = g_new(gs_block *, x->nwhole);
    memcpy(v, x->whole, x->nwhole * sizeof *v);
    qsort(v, x->nwhole, sizeof *v, by_key);
    *n = x->nwhole;
    return v;
}
