/* occupancy.c - the taken address ranges over time slots (occupancy.h).
 *
 * The slots are the leaves of a segment tree (node 1 the root, node v's children 2v and 2v+1,
 * leaves at [leaves, 2 * leaves)). A range taken over [lo, hi) goes into `at` of the window's
 * canonical nodes (the O(log slots) nodes that tile it) and into `below` of those nodes and of
 * every node above them. Every range that meets a query window [lo, hi) in time is then in
 * `below` of one of its canonical nodes (taken at or under it) or in `at` of a node on the
 * paths from leaf lo and leaf hi - 1 to the root outside the window (taken over a larger window
 * holding one of those slots); nothing else is, so those few unions are all a query reads.
 *
 * Each union is a treap of disjoint ranges ordered by address, touching ranges merged, its
 * nodes drawn from one pool shared by every union: a union that only grows needs insertion,
 * the first range ending above an address, and the nodes that a merge frees back.
 */
#include "occupancy.h"

/* A taken range [lo, hi), as a node of its union's treap. */
typedef struct {
    uint64_t lo, hi;
    uint32_t l, r;
} rnode;

struct gs_occupancy {
    rnode *nd; /* nd[0] is the empty tree */
    size_t cap, used;
    uint32_t spare; /* freed nodes, chained through .l (0: none) */
    size_t leaves;
    uint32_t *at;    /* per tree node: ranges taken over a window it is canonical for */
    uint32_t *below; /* per tree node: ranges taken at it or any node under it */
    uint32_t *probe; /* the unions a query reads (at most 4 per tree level) */
};

/* A treap's priority, from the node's index: a fixed mix of the bits (lowbias32), so the
 * layout is deterministic and no field is spent on it. Reused indices keep their priority,
 * which is still independent of the range the node holds. */
static uint32_t prio(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

static uint32_t node_new(gs_occupancy *o, uint64_t lo, uint64_t hi)
{
    uint32_t x = o->spare;
    if (x) {
        o->spare = o->nd[x].l;
    } else {
        if (o->used == o->cap) {
            o->cap *= 2;
            o->nd = g_renew(rnode, o->nd, o->cap);
        }
        x = (uint32_t)o->used++;
    }
    o->nd[x] = (rnode){.lo = lo, .hi = hi};
    return x;
}

/* Every node of t back to the pool. */
static void node_drop(gs_occupancy *o, uint32_t t)
{
    while (t) {
        node_drop(o, o->nd[t].r);
        uint32_t l = o->nd[t].l;
        o->nd[t].l = o->spare;
        o->spare = t;
        t = l;
    }
}

/* Every range of a before every range of b. */
static uint32_t merge(gs_occupancy *o, uint32_t a, uint32_t b)
{
    if (!a || !b) return a ? a : b;
    if (prio(a) > prio(b)) {
        o->nd[a].r = merge(o, o->nd[a].r, b);
        return a;
    }
    o->nd[b].l = merge(o, a, o->nd[b].l);
    return b;
}

/* t split into the ranges ending before x (*a) and the rest (*b). */
static void split_hi(gs_occupancy *o, uint32_t t, uint64_t x, uint32_t *a, uint32_t *b)
{
    if (!t) {
        *a = *b = 0;
    } else if (o->nd[t].hi < x) {
        split_hi(o, o->nd[t].r, x, &o->nd[t].r, b);
        *a = t;
    } else {
        split_hi(o, o->nd[t].l, x, a, &o->nd[t].l);
        *b = t;
    }
}

/* t split into the ranges starting at or before x (*a) and the rest (*b). */
static void split_lo(gs_occupancy *o, uint32_t t, uint64_t x, uint32_t *a, uint32_t *b)
{
    if (!t) {
        *a = *b = 0;
    } else if (o->nd[t].lo <= x) {
        split_lo(o, o->nd[t].r, x, &o->nd[t].r, b);
        *a = t;
    } else {
        split_lo(o, o->nd[t].l, x, a, &o->nd[t].l);
        *b = t;
    }
}

/* x (a range that touches none of t's) into t: down to where its priority puts it, and t's
 * subtree there split around it. */
static uint32_t insert(gs_occupancy *o, uint32_t t, uint32_t x)
{
    if (!t) return x;
    if (prio(x) > prio(t)) {
        split_hi(o, t, o->nd[x].lo, &o->nd[x].l, &o->nd[x].r);
        return x;
    }
    if (o->nd[x].lo < o->nd[t].lo) o->nd[t].l = insert(o, o->nd[t].l, x);
    else o->nd[t].r = insert(o, o->nd[t].r, x);
    return t;
}

/* The first range of t whose end is above y (>= y where touching counts); 0 if none. */
static uint32_t first_end_above(const gs_occupancy *o, uint32_t t, uint64_t y, bool touching)
{
    uint32_t c = 0;
    while (t) {
        if (o->nd[t].hi > y || (touching && o->nd[t].hi == y)) c = t, t = o->nd[t].l;
        else t = o->nd[t].r;
    }
    return c;
}

/* [lo, hi) into the union at *root, merged with the ranges it overlaps or touches; returns
 * whether the union held it already. Most additions near the root fall inside a range already
 * there, or widen one range without reaching the next: both are answered by descents, with no
 * split. */
static bool add(gs_occupancy *o, uint32_t *root, uint64_t lo, uint64_t hi)
{
    uint32_t c = first_end_above(o, *root, lo, true);
    if (c && o->nd[c].lo <= hi) {
        if (o->nd[c].lo <= lo && o->nd[c].hi >= hi) return true;
        uint64_t top = MAX(hi, o->nd[c].hi);
        uint32_t next = first_end_above(o, *root, o->nd[c].hi, false);
        if (!next || o->nd[next].lo > top) { /* widens c alone: its order holds */
            o->nd[c].lo = MIN(lo, o->nd[c].lo);
            o->nd[c].hi = top;
            return false;
        }
    }
    uint32_t x = node_new(o, lo, hi); /* before the splits: the pool may move */
    if (!c || o->nd[c].lo > hi) {     /* touches nothing: an insertion */
        *root = insert(o, *root, x);
        return false;
    }
    uint32_t a, rest, m, b;
    split_hi(o, *root, lo, &a, &rest); /* a: ranges ending below lo, not touching it */
    split_lo(o, rest, hi, &m, &b);     /* m: the ranges [lo, hi) overlaps or touches, c first */
    uint32_t t = m;
    while (o->nd[t].l) t = o->nd[t].l;
    o->nd[x].lo = MIN(lo, o->nd[t].lo);
    for (t = m; o->nd[t].r;) t = o->nd[t].r;
    o->nd[x].hi = MAX(hi, o->nd[t].hi);
    node_drop(o, m);
    *root = merge(o, merge(o, a, x), b);
    return false;
}

gs_occupancy *gs_occupancy_new(size_t slots)
{
    gs_occupancy *o = g_new0(gs_occupancy, 1);
    for (o->leaves = 1; o->leaves < slots; o->leaves *= 2) {
    }
    o->at = g_new0(uint32_t, 2 * o->leaves);
    o->below = g_new0(uint32_t, 2 * o->leaves);
    o->probe = g_new(uint32_t, 4 * 65);
    o->cap = 1024;
    o->used = 1;
    o->nd = g_new(rnode, o->cap);
    o->nd[0] = (rnode){0};
    return o;
}

void gs_occupancy_free(gs_occupancy *o)
{
    if (!o) return;
    g_free(o->nd);
    g_free(o->at);
    g_free(o->below);
    g_free(o->probe);
    g_free(o);
}

/* Whether tree node v, h levels above the leaves, covers only slots of [lo, hi). */
static bool inside(const gs_occupancy *o, size_t v, unsigned h, size_t lo, size_t hi)
{
    return (v << h) - o->leaves >= lo && ((v + 1) << h) - o->leaves <= hi;
}

/* The unions that hold every range meeting [lo, hi) (the header's comment); returns how many
 * are non-empty, in o->probe. */
static size_t gather(gs_occupancy *o, size_t lo, size_t hi)
{
    size_t n = 0;
    for (size_t l = lo + o->leaves, r = hi + o->leaves; l < r; l /= 2, r /= 2) {
        if (l & 1) {
            if (o->below[l]) o->probe[n++] = o->below[l];
            l++;
        }
        if (r & 1) {
            r--;
            if (o->below[r]) o->probe[n++] = o->below[r];
        }
    }
    unsigned h = 0;
    for (size_t a = lo + o->leaves, b = hi - 1 + o->leaves; a; a /= 2, b /= 2, h++) {
        if (o->at[a] && !inside(o, a, h, lo, hi)) o->probe[n++] = o->at[a];
        if (b != a && o->at[b] && !inside(o, b, h, lo, hi)) o->probe[n++] = o->at[b];
    }
    return n;
}

/* The lowest y such that [y, y + size) misses every union read: y starts at 0 and jumps to
 * the end of any range in its way, the unions visited in turn until each in a row has nothing
 * in the way. Every y passed over is taken in some union, so the first y that all pass is the
 * lowest. */
uint64_t gs_occupancy_lowest(gs_occupancy *o, size_t lo, size_t hi, uint64_t size)
{
    size_t n = gather(o, lo, hi);
    uint64_t y = 0;
    for (size_t i = 0, clear = 0; clear < n;) {
        uint32_t c = first_end_above(o, o->probe[i], y, false);
        if (c && o->nd[c].lo < y + size) {
            y = o->nd[c].hi; /* this union may have another range in the way: ask it again */
            clear = 0;
        } else {
            clear++;
            i = i + 1 == n ? 0 : i + 1;
        }
    }
    return y;
}

/* `below` of every canonical node and of every node above one; `at` of the canonical nodes.
 * below[v] holds below[child] (every range added to a node's is added to its parent's), so
 * once a path up from a canonical node meets a union that held the range already, every union
 * above holds it too: the walk up stops adding there. */
void gs_occupancy_take(gs_occupancy *o, size_t lo, size_t hi, uint64_t off, uint64_t size)
{
    if (size == 0) return;
    size_t L = o->leaves;
    unsigned h = 0;
    for (size_t l = lo + L, r = hi + L; l < r; l /= 2, r /= 2, h++) {
        size_t v[2], nv = 0;
        if (l & 1) v[nv++] = l++;
        if (r & 1) v[nv++] = --r;
        for (size_t i = 0; i < nv; i++) {
            add(o, &o->at[v[i]], off, off + size);
            /* the canonical nodes at either end of the window are on the paths, below: their
             * unions once, so that "held already" means held before this range came */
            if ((v[i] << h) - L != lo && ((v[i] + 1) << h) - L != hi)
                add(o, &o->below[v[i]], off, off + size);
        }
    }
    /* the paths from leaf lo and leaf hi - 1, from their canonical node (the highest node on
     * the path inside the window) up */
    bool held_a = false, held_b = false;
    h = 0;
    for (size_t a = lo + L, b = hi - 1 + L; a; a /= 2, b /= 2, h++) {
        if (a == b) held_a = held_b = held_a || held_b;
        if (!held_a && (a == 1 || !inside(o, a / 2, h + 1, lo, hi)))
            held_a = add(o, &o->below[a], off, off + size);
        if (b != a && !held_b && (b == 1 || !inside(o, b / 2, h + 1, lo, hi)))
            held_b = add(o, &o->below[b], off, off + size);
    }
}
