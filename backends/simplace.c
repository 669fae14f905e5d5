/* simplace.c - the simulated cudaMalloc's placement, rules 1 to 5 of simdevice.c (simplace.h).
 *
 * The VA ranges, the free holes between them and the pages of small allocations are each an
 * address-ordered tree (addrtree.h) weighted by what a search asks of them: a range by its
 * largest gap (rule 2: the lowest range with a gap of S), a hole by its length (rule 3: the
 * highest hole larger than V), a page by its free tail (rule 1: the lowest page whose end holds
 * the request). Each answer is the one a scan of the sorted arrays they replace found, in
 * O(log n): with thousands of segments the arrays' scans and the memmove of every insertion at
 * the bottom (new ranges are carved below the others) were most of a replay.
 *
 * Inside a range the segments are a sorted array: a range spans 32 MiB, or one segment's size
 * rounded up to 32 MiB, so it holds a few segments, a dozen or so of 2 MiB at most (until its
 * first and largest segment goes: then as many as its size holds). The ranges are allocated
 * in slabs and reused, so a replay that makes thousands makes no malloc for them.
 */
#include <string.h>

#include "addrtree.h"
#include "backend.h"
#include "simplace.h"

#define PAGE (2 * GS_MiB)          /* simdevice.c's page */
#define CHUNK (32 * GS_MiB)        /* rule 3 */
#define ALIGN_BIG (512 * GS_MiB)   /* rule 3, H200 */
#define TOP_BELOW_X (414 * GS_MiB) /* rule 3: T = X - 414 MiB */

typedef struct {
    uint64_t lo, hi; /* [lo, hi) */
} span;

/* Spans in address order: a few in place (a range holds one segment or a few, a page a few
 * allocations), more on the heap. The struct holding one must not move (s may point into it):
 * ranges live in slabs, pages each in an allocation of its own. */
typedef struct {
    span *s;
    guint n, cap;
    span local[4];
} spans;

/* A VA range (rule 2): what lives in it, in address order. */
typedef struct {
    uint64_t base, size;
    uint64_t gap;   /* its largest gap, its weight in the ranges' tree */
    bool permanent; /* the context's own (rule 5): only its gaps are usable, it never goes */
    spans used;
} va_range;

/* A 2 MiB page of small allocations (rule 1). */
typedef struct {
    uint64_t addr;
    spans live; /* offsets into the page */
} small_page;

/* Ranges are allocated a slab at a time, so a replay that makes thousands makes no malloc each;
 * the first slab is small (most devices of a trace with thousands hold a range or two) and each
 * next one twice the last, up to SLAB. */
#define SLAB 256
#define SLAB_FIRST 4

struct gs_simplace {
    uint64_t x;          /* X (rule 5) */
    bool align_512m;     /* rule 3, H200 */
    gs_addrtree *ranges; /* va_range* by base, weighted by gap */
    gs_addrtree *holes;  /* freed VA below the context's range: by lo, weighted by length */
    uint64_t bottom;     /* the lowest carved address */
    gs_addrtree *pages;  /* small_page* by addr, weighted by the free bytes at its end */
    GPtrArray *slabs;    /* va_range[SLAB_FIRST], then twice the last's, up to SLAB */
    size_t next_slab;    /* the next slab's ranges */
    va_range **spare;    /* the slabs' ranges not in use, their spans empty */
    size_t n_spare, cap_spare;
};

static void spans_init(spans *v)
{
    v->s = v->local;
    v->n = 0;
    v->cap = G_N_ELEMENTS(v->local);
}

static void spans_fini(spans *v)
{
    if (v->s != v->local) g_free(v->s);
}

static void spans_insert(spans *v, guint k, span x)
{
    if (v->n == v->cap) {
        span *s = g_new(span, 2 * v->cap);
        memcpy(s, v->s, v->n * sizeof(span));
        spans_fini(v);
        v->s = s;
        v->cap *= 2;
    }
    memmove(&v->s[k + 1], &v->s[k], (v->n - k) * sizeof(span));
    v->s[k] = x;
    v->n++;
}

static void spans_remove(spans *v, guint k)
{
    memmove(&v->s[k], &v->s[k + 1], (v->n - k - 1) * sizeof(span));
    v->n--;
}

/* The first span with lo >= at. */
static guint spans_lower(const spans *v, uint64_t at)
{
    guint lo = 0, hi = v->n;
    while (lo < hi) {
        guint mid = lo + (hi - lo) / 2;
        if (v->s[mid].lo < at) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* r's gaps (between its spans, and at its ends) in address order: TRUE at the first of at
 * least size, its start in *at; FALSE when none is, *largest then the largest of them. */
static bool range_gap_walk(const va_range *r, uint64_t size, uint64_t *at, uint64_t *largest)
{
    uint64_t cur = r->base, gap = 0;
    for (guint k = 0; k <= r->used.n; k++) {
        uint64_t end = k < r->used.n ? r->used.s[k].lo : r->base + r->size;
        if (end >= cur && end - cur >= size) {
            *at = cur;
            return true;
        }
        if (end >= cur && end - cur > gap) gap = end - cur;
        if (k < r->used.n) cur = r->used.s[k].hi;
    }
    *largest = gap;
    return false;
}

/* r's largest gap, into r and its weight in the tree. */
static void range_gap(gs_simplace *p, va_range *r)
{
    uint64_t at;
    (void)range_gap_walk(r, UINT64_MAX, &at, &r->gap); /* no gap spans 2^64 - 1 bytes */
    gs_addrtree_set_weight(p->ranges, r->base, r->gap);
}

/* A range out of the slabs. */
static va_range *range_take(gs_simplace *p)
{
    if (!p->n_spare) {
        size_t n = p->next_slab ? p->next_slab : SLAB_FIRST;
        p->next_slab = MIN(2 * n, SLAB);
        va_range *slab = g_new(va_range, n);
        g_ptr_array_add(p->slabs, slab);
        if (p->cap_spare < n) p->spare = g_renew(va_range *, p->spare, p->cap_spare = n);
        for (size_t i = n; i-- > 0;) { /* the slab's first on top */
            spans_init(&slab[i].used);
            p->spare[p->n_spare++] = &slab[i];
        }
    }
    return p->spare[--p->n_spare];
}

/* r back to the slabs (its spans' heap array, if it has one, kept for the next). */
static void range_give(gs_simplace *p, va_range *r)
{
    r->used.n = 0;
    if (p->n_spare == p->cap_spare) p->spare = g_renew(va_range *, p->spare, p->cap_spare *= 2);
    p->spare[p->n_spare++] = r;
}

/* A new range with the spans used[0..n), into the tree with its largest gap. */
static void range_new(gs_simplace *p, uint64_t base, uint64_t size, bool permanent,
                      const span *used, size_t n)
{
    va_range *r = range_take(p);
    r->base = base;
    r->size = size;
    r->permanent = permanent;
    for (size_t i = 0; i < n; i++) spans_insert(&r->used, r->used.n, used[i]);
    uint64_t at;
    (void)range_gap_walk(r, UINT64_MAX, &at, &r->gap);
    gs_addrtree_insert(p->ranges, base, r->gap, r);
}

/* The context's range (rule 5): [X - 2 MiB, X + 100 MiB), usable only at [X, X + 2 MiB) and
 * [X + 74 MiB, X + 98 MiB); the rest is marked used, forever. */
static void context_range(gs_simplace *p)
{
    uint64_t x = p->x;
    span fixed[] = {{x - 2 * GS_MiB, x},
                    {x + 2 * GS_MiB, x + 74 * GS_MiB},
                    {x + 98 * GS_MiB, x + 100 * GS_MiB}};
    range_new(p, x - 2 * GS_MiB, 102 * GS_MiB, true, fixed, G_N_ELEMENTS(fixed));
    p->bottom = x - TOP_BELOW_X;
}

gs_simplace *gs_simplace_new(uint64_t x, bool align_512m)
{
    gs_simplace *p = g_new0(gs_simplace, 1);
    p->x = x;
    p->align_512m = align_512m;
    p->ranges = gs_addrtree_new();
    p->holes = gs_addrtree_new();
    p->pages = gs_addrtree_new();
    p->slabs = g_ptr_array_new();
    context_range(p);
    return p;
}

static void page_drop(const gs_addrtree_entry *e, void *ud)
{
    small_page *pg = e->value;
    spans_fini(&pg->live);
    g_free(pg);
}

void gs_simplace_free(gs_simplace *p)
{
    if (!p) return;
    gs_addrtree_foreach(p->pages, page_drop, NULL);
    gs_addrtree_free(p->ranges);
    gs_addrtree_free(p->holes);
    gs_addrtree_free(p->pages);
    for (guint i = 0, n = SLAB_FIRST; i < p->slabs->len; i++, n = MIN(2 * n, SLAB)) {
        va_range *slab = p->slabs->pdata[i];
        for (size_t k = 0; k < n; k++) spans_fini(&slab[k].used);
        g_free(slab);
    }
    g_ptr_array_free(p->slabs, TRUE);
    g_free(p->spare);
    g_free(p);
}

static uint64_t round_up(uint64_t x, uint64_t to)
{
    return (x + to - 1) / to * to;
}

static uint64_t align_for(const gs_simplace *p, uint64_t size)
{
    return p->align_512m && size % ALIGN_BIG == 0 ? ALIGN_BIG : PAGE;
}

static void hole_add(gs_simplace *p, uint64_t lo, uint64_t hi)
{
    gs_addrtree_insert(p->holes, lo, hi - lo, NULL);
}

/* Rule 3's new range of v bytes: at the top of the highest hole strictly larger than v (with
 * the alignment, where the top minus v rounded down still lies above the hole's start), else
 * below the carved space. Only a hole longer than v can qualify, so the search goes from the
 * highest of those down, each step one descent (the first nearly always qualifies). */
static uint64_t range_base(gs_simplace *p, uint64_t v, uint64_t al)
{
    for (const gs_addrtree_entry *h = gs_addrtree_last_fit(p->holes, v + 1, UINT64_MAX); h;
         h = gs_addrtree_last_fit(p->holes, v + 1, h->key)) {
        uint64_t lo = h->key, hi = h->key + h->weight, b = (hi - v) / al * al;
        if (b <= lo) continue;
        gs_addrtree_set_weight(p->holes, lo, b - lo); /* b > lo: the hole's bottom stays */
        if (b + v < hi) hole_add(p, b + v, hi);
        return b;
    }
    uint64_t base = (p->bottom - v) / al * al;
    if (base + v < p->bottom) hole_add(p, base + v, p->bottom);
    p->bottom = base;
    return base;
}

uint64_t gs_simplace_place(gs_simplace *p, uint64_t size)
{
    /* rule 2: the lowest range with a gap of size, at its lowest such gap */
    const gs_addrtree_entry *e = gs_addrtree_first_fit(p->ranges, size);
    uint64_t a, largest;
    if (e && range_gap_walk(e->value, size, &a, &largest)) {
        va_range *r = e->value;
        span u = {a, a + size};
        spans_insert(&r->used, spans_lower(&r->used, a), u);
        range_gap(p, r);
        return a;
    }
    uint64_t v = MAX(CHUNK, round_up(size, CHUNK));
    uint64_t base = range_base(p, v, align_for(p, size));
    span u = {base, base + size};
    range_new(p, base, v, false, &u, 1);
    return base;
}

void gs_simplace_unplace(gs_simplace *p, uint64_t addr)
{
    /* the range holding addr: the last with base <= addr (ranges do not overlap) */
    const gs_addrtree_entry *e = gs_addrtree_floor(p->ranges, addr);
    if (!e) return;
    va_range *r = e->value;
    if (addr >= r->base + r->size) return;
    guint k = spans_lower(&r->used, addr);
    if (k < r->used.n && r->used.s[k].lo == addr) spans_remove(&r->used, k);
    if (r->used.n || r->permanent) {
        range_gap(p, r);
        return;
    }
    span h = {r->base, r->base + r->size};
    gs_addrtree_remove(p->ranges, r->base);
    range_give(p, r);
    /* merge with the free neighbours: holes never touch (each merged when made), so those are
     * the hole starting at h's end and the one ending at h's start */
    const gs_addrtree_entry *up = gs_addrtree_find(p->holes, h.hi);
    if (up) {
        h.hi += up->weight;
        gs_addrtree_remove(p->holes, up->key);
    }
    const gs_addrtree_entry *down = h.lo ? gs_addrtree_floor(p->holes, h.lo - 1) : NULL;
    /* (no hole starts at the bottom: the lowest thing carved is always a range, so a hole
     * below h that grows over it is never the carved space's end) */
    if (down && down->key + down->weight == h.lo) /* the hole below grows over h */
        gs_addrtree_set_weight(p->holes, down->key, h.hi - down->key);
    else if (h.lo == p->bottom) p->bottom = h.hi; /* the carved space shrinks */
    else hole_add(p, h.lo, h.hi);
}

/* A page's free tail: the bytes after its highest live allocation. */
static uint64_t tail_of(const small_page *pg)
{
    return PAGE - (pg->live.n ? pg->live.s[pg->live.n - 1].hi : 0);
}

uint64_t gs_simplace_small(gs_simplace *p, uint64_t n, bool commit, bool *new_page)
{
    *new_page = false;
    const gs_addrtree_entry *e = gs_addrtree_first_fit(p->pages, n);
    if (e) {
        small_page *pg = e->value;
        uint64_t end = PAGE - e->weight;
        if (commit) {
            spans_insert(&pg->live, pg->live.n, (span){end, end + n});
            gs_addrtree_set_weight(p->pages, pg->addr, tail_of(pg));
        }
        return pg->addr + end;
    }
    *new_page = true;
    if (!commit) return 0;
    small_page *pg = g_new0(small_page, 1);
    pg->addr = gs_simplace_place(p, PAGE);
    spans_init(&pg->live);
    spans_insert(&pg->live, 0, (span){0, n});
    gs_addrtree_insert(p->pages, pg->addr, tail_of(pg), pg);
    return pg->addr;
}

bool gs_simplace_unsmall(gs_simplace *p, uint64_t addr)
{
    const gs_addrtree_entry *e = gs_addrtree_floor(p->pages, addr);
    if (!e) return false;
    small_page *pg = e->value;
    if (addr >= pg->addr + PAGE) return false;
    uint64_t off = addr - pg->addr;
    guint k = spans_lower(&pg->live, off);
    if (k < pg->live.n && pg->live.s[k].lo == off) spans_remove(&pg->live, k);
    if (pg->live.n) {
        gs_addrtree_set_weight(p->pages, pg->addr, tail_of(pg));
        return false;
    }
    gs_addrtree_remove(p->pages, pg->addr);
    gs_simplace_unplace(p, pg->addr);
    spans_fini(&pg->live);
    g_free(pg);
    return true;
}

uint64_t gs_simplace_bottom(const gs_simplace *p)
{
    return p->bottom;
}
