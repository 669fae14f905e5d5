/* addrtree.c - entries keyed by address with the largest weight below each node (addrtree.h).
 *
 * The nodes live in one array (index 0 the empty tree, freed nodes chained for reuse), each
 * with its entry, the largest weight in its subtree (maxw) and its children. Insertion is a
 * descent that raises maxw on the way down and splits the subtree where the key's priority puts
 * it; removal and a new weight are a descent that remembers its path and fixes maxw back up it
 * only as far as it changes. The searches are descents steered by maxw.
 *
 * Loops, not recursion, and the early stop: a replay whose segments come and go under a cap
 * makes several of these a cudaMalloc or cudaFree (BENCHMARKS.md, "The simulated device's
 * placement with thousands of segments").
 */
#include "addrtree.h"

typedef struct {
    gs_addrtree_entry e;
    uint64_t maxw;
    uint64_t prio; /* the key's hash, kept: compared at every level of an insertion */
    uint32_t l, r;
} node;

struct gs_addrtree {
    node *nd;
    size_t cap, used, len;
    uint32_t spare; /* freed nodes, chained through .l */
    uint32_t root;
    uint32_t *path; /* a descent's nodes, root first (removal, set_weight) */
    size_t path_cap;
};

/* The priority of a key: splitmix64's finalizer, a fixed function of the key. */
static uint64_t prio(uint64_t k)
{
    k ^= k >> 30;
    k *= UINT64_C(0xbf58476d1ce4e5b9);
    k ^= k >> 27;
    k *= UINT64_C(0x94d049bb133111eb);
    return k ^ (k >> 31);
}

/* Whether a goes above b (keys differ; equal hashes are ordered by key, so the order is total). */
static bool above(const gs_addrtree *t, uint32_t a, uint32_t b)
{
    uint64_t pa = t->nd[a].prio, pb = t->nd[b].prio;
    return pa != pb ? pa > pb : t->nd[a].e.key < t->nd[b].e.key;
}

static void upd(gs_addrtree *t, uint32_t x)
{
    node *n = &t->nd[x];
    n->maxw = MAX(n->e.weight, MAX(t->nd[n->l].maxw, t->nd[n->r].maxw));
}

gs_addrtree *gs_addrtree_new(void)
{
    gs_addrtree *t = g_new0(gs_addrtree, 1);
    t->cap = 8; /* grows by doubling: a replay of 20,000 devices makes three trees each */
    t->used = 1;
    t->nd = g_new0(node, t->cap); /* nd[0]: the empty tree, maxw 0 */
    return t;
}

void gs_addrtree_free(gs_addrtree *t)
{
    if (!t) return;
    g_free(t->nd);
    g_free(t->path);
    g_free(t);
}

size_t gs_addrtree_len(const gs_addrtree *t)
{
    return t->len;
}

/* x split into the nodes with keys below key (*a) and the rest (*b). */
static void split(gs_addrtree *t, uint32_t x, uint64_t key, uint32_t *a, uint32_t *b)
{
    if (!x) {
        *a = *b = 0;
        return;
    }
    if (t->nd[x].e.key < key) {
        split(t, t->nd[x].r, key, &t->nd[x].r, b);
        *a = x;
    } else {
        split(t, t->nd[x].l, key, a, &t->nd[x].l);
        *b = x;
    }
    upd(t, x);
}

/* Every key of a below every key of b. */
static uint32_t join(gs_addrtree *t, uint32_t a, uint32_t b)
{
    if (!a || !b) return a ? a : b;
    if (above(t, a, b)) {
        t->nd[a].r = join(t, t->nd[a].r, b);
        upd(t, a);
        return a;
    }
    t->nd[b].l = join(t, a, t->nd[b].l);
    upd(t, b);
    return b;
}

/* x at the end of the path (depth d so far). */
static void push(gs_addrtree *t, size_t *d, uint32_t x)
{
    if (*d == t->path_cap) {
        t->path_cap = t->path_cap ? 2 * t->path_cap : 64;
        t->path = g_renew(uint32_t, t->path, t->path_cap);
    }
    t->path[(*d)++] = x;
}

/* maxw of the path's first d nodes again, deepest first, until one does not change: the nodes
 * above it hold the same subtrees' weights as before. */
static void fix_up(gs_addrtree *t, size_t d)
{
    while (d-- > 0) {
        node *n = &t->nd[t->path[d]];
        uint64_t m = MAX(n->e.weight, MAX(t->nd[n->l].maxw, t->nd[n->r].maxw));
        if (m == n->maxw) return;
        n->maxw = m;
    }
}

void gs_addrtree_insert(gs_addrtree *t, uint64_t key, uint64_t weight, void *value)
{
    uint32_t n = t->spare;
    if (n) {
        t->spare = t->nd[n].l;
    } else {
        if (t->used == t->cap) {
            t->cap *= 2;
            t->nd = g_renew(node, t->nd, t->cap);
        }
        n = (uint32_t)t->used++;
    }
    t->nd[n] = (node){.e = {key, weight, value}, .maxw = weight, .prio = prio(key)};
    /* down past the nodes that stay above n, each of which gets n's weight in its subtree */
    uint32_t *link = &t->root;
    while (*link && !above(t, n, *link)) {
        node *x = &t->nd[*link];
        x->maxw = MAX(x->maxw, weight);
        link = key < x->e.key ? &x->l : &x->r;
    }
    split(t, *link, key, &t->nd[n].l, &t->nd[n].r);
    upd(t, n);
    *link = n;
    t->len++;
}

void *gs_addrtree_remove(gs_addrtree *t, uint64_t key)
{
    size_t d = 0;
    uint32_t *link = &t->root;
    while (*link && t->nd[*link].e.key != key) {
        push(t, &d, *link);
        node *x = &t->nd[*link];
        link = key < x->e.key ? &x->l : &x->r;
    }
    uint32_t gone = *link;
    if (!gone) return NULL;
    *link = join(t, t->nd[gone].l, t->nd[gone].r);
    fix_up(t, d);
    t->nd[gone].l = t->spare;
    t->spare = gone;
    t->len--;
    return t->nd[gone].e.value;
}

void gs_addrtree_set_weight(gs_addrtree *t, uint64_t key, uint64_t weight)
{
    size_t d = 0;
    uint32_t x = t->root;
    for (; x && t->nd[x].e.key != key; x = key < t->nd[x].e.key ? t->nd[x].l : t->nd[x].r)
        push(t, &d, x);
    if (!x) return;
    t->nd[x].e.weight = weight;
    push(t, &d, x);
    fix_up(t, d);
}

const gs_addrtree_entry *gs_addrtree_find(const gs_addrtree *t, uint64_t key)
{
    for (uint32_t x = t->root; x;) {
        if (t->nd[x].e.key == key) return &t->nd[x].e;
        x = key < t->nd[x].e.key ? t->nd[x].l : t->nd[x].r;
    }
    return NULL;
}

const gs_addrtree_entry *gs_addrtree_floor(const gs_addrtree *t, uint64_t key)
{
    uint32_t best = 0;
    for (uint32_t x = t->root; x;) {
        if (t->nd[x].e.key <= key) best = x, x = t->nd[x].r;
        else x = t->nd[x].l;
    }
    return best ? &t->nd[best].e : NULL;
}

const gs_addrtree_entry *gs_addrtree_first_fit(const gs_addrtree *t, uint64_t w)
{
    uint32_t x = t->root;
    if (t->nd[x].maxw < w || !x) return NULL;
    for (;;) { /* x's subtree holds one: the left first, then x, then the right */
        const node *n = &t->nd[x];
        if (n->l && t->nd[n->l].maxw >= w) x = n->l;
        else if (n->e.weight >= w) return &n->e;
        else x = n->r;
    }
}

/* The highest node of x's subtree with weight at least w, keys all below the bound. */
static uint32_t last_fit_all(const gs_addrtree *t, uint32_t x, uint64_t w)
{
    if (!x || t->nd[x].maxw < w) return 0;
    for (;;) {
        const node *n = &t->nd[x];
        if (n->r && t->nd[n->r].maxw >= w) x = n->r;
        else if (n->e.weight >= w) return x;
        else x = n->l;
    }
}

/* The highest node of x's subtree with key below `below` and weight at least w. Each level
 * either goes left (x's key too high) or, x's key low enough, tries the right subtree with the
 * bound and else settles in x or its left subtree, where every key is low enough. */
static uint32_t last_fit_at(const gs_addrtree *t, uint32_t x, uint64_t w, uint64_t below)
{
    while (x && t->nd[x].maxw >= w) {
        const node *n = &t->nd[x];
        if (n->e.key >= below) {
            x = n->l;
            continue;
        }
        uint32_t r = last_fit_at(t, n->r, w, below);
        if (r) return r;
        if (n->e.weight >= w) return x;
        return last_fit_all(t, n->l, w);
    }
    return 0;
}

const gs_addrtree_entry *gs_addrtree_last_fit(const gs_addrtree *t, uint64_t w, uint64_t below)
{
    uint32_t x = last_fit_at(t, t->root, w, below);
    return x ? &t->nd[x].e : NULL;
}

static void each(const gs_addrtree *t, uint32_t x, void (*fn)(const gs_addrtree_entry *, void *),
                 void *ud)
{
    for (; x; x = t->nd[x].r) {
        each(t, t->nd[x].l, fn, ud);
        fn(&t->nd[x].e, ud);
    }
}

void gs_addrtree_foreach(const gs_addrtree *t, void (*fn)(const gs_addrtree_entry *e, void *ud),
                         void *ud)
{
    each(t, t->root, fn, ud);
}
