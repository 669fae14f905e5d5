/* bound.c - the trace's lower bound and the offline planner's peak (bound.h, docs/metrics.md).
 *
 * The planner is "greedy by size" for the dynamic storage allocation problem (DSA): every
 * request is an interval in time with a width in bytes, and the task is to give each an offset
 * so that no two that are live at once overlap, minimising the highest end. Requests are placed
 * largest first (ties: earlier first), each at the lowest offset where it overlaps none of the
 * placed requests whose lifetimes meet its own. Two ways find that offset (plan_greedy picks
 * by the overlap): the placed requests that meet a lifetime [s, e) enumerated from a segment
 * tree over the requests sorted by start, holding the latest end of the placed ones in each
 * subtree, and sorted by offset, O(n log n) plus the overlapping pairs; or an occupancy index
 * (occupancy.h) that keeps the unions of the placed ranges over windows of time, whose cost
 * follows the few unions a placement jumps over rather than every request beside it. The
 * pairs are counted first (count_pairs); where they exceed a budget
 * (thousands of requests live at once all the time, as in LLM generation with its KV cache)
 * greedy by size is not run: the requests that meet every other go to a band at the bottom
 * (exact, take_band) and the rest is placed by first fit in time order (plan_first_fit,
 * O(n log n)), or by the better of both heuristics if the rest fits the budget. Everywhere
 * greedy runs, first fit runs too (about 1% of its cost) and the lower peak wins, so every
 * trace gets a feasible layout and a figure.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bound.h"
#include "occupancy.h"

#define PAGE (2 * GS_MiB)
#define ALIGN UINT64_C(512)

/* Rounds up; inputs are at most GS_MAX_DEVICE_BYTES times the events (below), far from 2^64. */
static uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

/* A request as the bound counts it: one larger than the largest device gpusim simulates
 * (GS_MAX_DEVICE_BYTES) counts as that size. No allocator serves it anyway, and a trace's sizes
 * (up to 2^64 - 1) summed unclamped would overflow (the fuzz_replay harness found it: two
 * requests of 2^64 - 1 bytes live together). */
static uint64_t counted(uint64_t size) { return MIN(size, GS_MAX_DEVICE_BYTES); }

typedef gs_plan_req item;

/* A placed request beside the one being placed: where it lies. */
typedef struct {
    uint64_t off, top;
} span;

typedef struct {
    const item *it;
    size_t *by_start;    /* item indices by start */
    uint64_t *maxend;    /* tree over by_start: 1-based heap order, leaves at [leaves, 2*leaves) */
    size_t leaves;
    span *hits;          /* what a query found: grown as needed */
    size_t n_hits, cap_hits;
} planner;

static int cmp_by_start(const void *a, const void *b, void *ud)
{
    const item *it = ud;
    uint64_t x = it[*(const size_t *)a].start, y = it[*(const size_t *)b].start;
    return (x > y) - (x < y);
}

/* Largest first; equal sizes earliest first, then by index, so the order is total. */
static int cmp_by_size(const void *a, const void *b, void *ud)
{
    const item *it = ud;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    if (it[i].size != it[j].size) return it[i].size < it[j].size ? 1 : -1;
    if (it[i].start != it[j].start) return it[i].start < it[j].start ? -1 : 1;
    return (i > j) - (i < j);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Sorts idx[0..n) stably by key[idx[k]] (descending: by its complement), least significant
 * 11 bits first, as far as the highest bit a key has. The plans sort a few hundred thousand
 * indices by size or end (an event's index), where a comparison call per step of
 * g_qsort_with_data was four tenths of the bound's time on a 431,330-event trace. Stable, so
 * from indices in order it gives what that stable sort gives for one key, ties by index. */
static void radix_sort(size_t *idx, size_t n, const uint64_t *key, bool descending)
{
    uint64_t flip = descending ? UINT64_MAX : 0, all = 0;
    for (size_t k = 0; k < n; k++) all |= key[k] ^ flip;
    size_t *tmp = g_new(size_t, n ? n : 1), *from = idx, *to = tmp;
    for (unsigned shift = 0; shift < 64 && (all >> shift); shift += 11) {
        size_t count[2049] = {0};
        for (size_t k = 0; k < n; k++) count[(((key[from[k]] ^ flip) >> shift) & 2047) + 1]++;
        for (unsigned b = 1; b <= 2048; b++) count[b] += count[b - 1];
        for (size_t k = 0; k < n; k++)
            to[count[((key[from[k]] ^ flip) >> shift) & 2047]++] = from[k];
        size_t *t = from;
        from = to;
        to = t;
    }
    if (from != idx) memcpy(idx, from, n * sizeof *idx);
    g_free(tmp);
}

/* The items' order largest first, equal sizes earliest first, then by index (cmp_by_size),
 * into order: by radix_sort where the items come in order of start (sizes alone decide, ties
 * in index order being start order), else by comparisons. */
static void order_by_size(const item *it, size_t n, size_t *order, bool by_start)
{
    for (size_t i = 0; i < n; i++) order[i] = i;
    if (!by_start) {
        g_qsort_with_data(order, (gint)n, sizeof(size_t), cmp_by_size, (gpointer)it);
        return;
    }
    uint64_t *key = g_new(uint64_t, n ? n : 1);
    for (size_t i = 0; i < n; i++) key[i] = it[i].size;
    radix_sort(order, n, key, true);
    g_free(key);
}

/* Whether the items come in order of start: a trace's do (slot order is alloc order), so the
 * sorts by start below are skipped for them (the sort is stable: the same order either way). */
static bool by_start_already(const item *it, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (it[i].start < it[i - 1].start) return false;
    return true;
}

/* The index of the first of s[0..n) (sorted) that is at least v. */
static size_t lower_bound(const uint64_t *s, size_t n, uint64_t v)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Spans by offset. Greedy by size sorts the placed requests beside each one it places (about
 * a thousand each time on GPT-2 and ResNet-50), and qsort's call per comparison was most of its
 * time: a quicksort with the comparison inlined (median of three, insertion sort below 16). */
static void sort_spans(span *a, size_t n)
{
    while (n > 16) {
        span *m = &a[n / 2], *z = &a[n - 1], t;
        if (m->off < a->off) t = *m, *m = *a, *a = t;
        if (z->off < a->off) t = *z, *z = *a, *a = t;
        if (z->off < m->off) t = *z, *z = *m, *m = t;
        uint64_t pivot = m->off;
        size_t i = 0, j = n - 1;
        for (;;) { /* Hoare: a[0] <= pivot <= a[n-1] stop both scans inside the array */
            while (a[i].off < pivot) i++;
            while (a[j].off > pivot) j--;
            if (i >= j) break;
            t = a[i], a[i] = a[j], a[j] = t;
            i++, j--;
        }
        /* [0, j] <= pivot <= [j+1, n): recurse on the smaller part, loop on the larger */
        if (j + 1 < n - j - 1) {
            sort_spans(a, j + 1);
            a += j + 1, n -= j + 1;
        } else {
            sort_spans(a + j + 1, n - j - 1);
            n = j + 1;
        }
    }
    for (size_t i = 1; i < n; i++) {
        span v = a[i];
        size_t k = i;
        for (; k > 0 && a[k - 1].off > v.off; k--) a[k] = a[k - 1];
        a[k] = v;
    }
}

/* The placed requests at sorted positions [0, limit) that end after s, under node (covering
 * [lo, hi)). */
static void query(planner *p, size_t node, size_t lo, size_t hi, size_t limit, uint64_t s)
{
    if (lo >= limit || p->maxend[node] <= s) return;
    if (hi - lo == 1) {
        const item *y = &p->it[p->by_start[lo]];
        if (p->n_hits == p->cap_hits) {
            p->cap_hits = p->cap_hits ? 2 * p->cap_hits : 256;
            p->hits = g_renew(span, p->hits, p->cap_hits);
        }
        p->hits[p->n_hits++] = (span){y->off, y->off + y->size};
        return;
    }
    size_t mid = lo + (hi - lo) / 2;
    query(p, 2 * node, lo, mid, limit, s);
    query(p, 2 * node + 1, mid, hi, limit, s);
}

static void mark_placed(planner *p, size_t pos, uint64_t end)
{
    size_t node = p->leaves + pos;
    p->maxend[node] = end;
    for (node /= 2; node; node /= 2)
        p->maxend[node] = MAX(p->maxend[2 * node], p->maxend[2 * node + 1]);
}

/* Greedy by size with the placed requests that meet each one enumerated and sorted by offset
 * (offsets into it[].off; returns the highest end). Its cost is O(n log n) plus the
 * overlapping pairs, each enumerated once and sorted per placement. */
static uint64_t greedy_by_pairs(item *it, size_t n)
{
    planner p = {.it = it};
    p.by_start = g_new(size_t, n);
    size_t *order = g_new(size_t, n);
    size_t *pos = g_new(size_t, n); /* item -> its position in by_start */
    for (size_t i = 0; i < n; i++) p.by_start[i] = i;
    bool in_order = by_start_already(it, n);
    if (!in_order) g_qsort_with_data(p.by_start, (gint)n, sizeof(size_t), cmp_by_start, it);
    order_by_size(it, n, order, in_order);
    for (size_t i = 0; i < n; i++) pos[p.by_start[i]] = i;
    for (p.leaves = 1; p.leaves < n; p.leaves *= 2) {}
    p.maxend = g_new0(uint64_t, 2 * p.leaves); /* 0: nothing placed (every end is > 0) */
    uint64_t top = 0;
    for (size_t k = 0; k < n; k++) {
        item *x = &it[order[k]];
        /* positions whose start is before x's end: by_start is sorted, so a binary search */
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (it[p.by_start[mid]].start < x->end) lo = mid + 1;
            else hi = mid;
        }
        p.n_hits = 0;
        query(&p, 1, 0, p.leaves, lo, x->start);
        span *h = p.hits;
        sort_spans(h, p.n_hits);
        uint64_t at = 0;
        for (size_t j = 0; j < p.n_hits; j++) {
            if (h[j].off >= at + x->size) break; /* the gap below this one holds x */
            at = MAX(at, h[j].top);
        }
        x->off = at;
        top = MAX(top, at + x->size);
        mark_placed(&p, pos[order[k]], x->end);
    }
    g_free(p.maxend);
    g_free(pos);
    g_free(order);
    g_free(p.by_start);
    g_free(p.hits);
    return top;
}

/* Greedy by size, each request's place found in an occupancy index (occupancy.h) that keeps
 * the unions of the placed ranges over windows of time, so a placement reads a few unions
 * instead of every request beside it. Time is counted in slots, one per distinct start: an
 * item covers the slots whose start lies in its lifetime, at least its own, and two lifetimes
 * meet if and only if one's start lies in the other, that is if they share a slot. */
static uint64_t greedy_by_unions(item *it, size_t n)
{
    uint64_t *starts = g_new(uint64_t, n);
    size_t *order = g_new(size_t, n);
    for (size_t i = 0; i < n; i++) starts[i] = it[i].start;
    bool in_order = by_start_already(it, n);
    if (!in_order) qsort(starts, n, sizeof *starts, cmp_u64);
    size_t slots = 1;
    for (size_t i = 1; i < n; i++)
        if (starts[i] != starts[slots - 1]) starts[slots++] = starts[i];
    order_by_size(it, n, order, in_order);
    gs_occupancy *occ = gs_occupancy_new(slots);
    uint64_t top = 0;
    for (size_t k = 0; k < n; k++) {
        item *x = &it[order[k]];
        size_t lo = lower_bound(starts, slots, x->start), hi = lower_bound(starts, slots, x->end);
        x->off = gs_occupancy_lowest(occ, lo, hi, x->size);
        gs_occupancy_take(occ, lo, hi, x->off, x->size);
        top = MAX(top, x->off + x->size);
    }
    gs_occupancy_free(occ);
    g_free(order);
    g_free(starts);
    return top;
}

/* The pairs of items whose lifetimes meet: greedy by size enumerates each exactly once, so
 * this is its work, known before it starts. Each item meets the items that started before it
 * and end after its start: (starts before s) - (ends at or before s), from the sorted starts
 * and ends in one merge. O(n log n). */
static uint64_t count_pairs(const item *it, size_t n)
{
    uint64_t *st = g_new(uint64_t, n ? n : 1), *en = g_new(uint64_t, n ? n : 1);
    for (size_t i = 0; i < n; i++) {
        st[i] = it[i].start;
        en[i] = it[i].end;
    }
    if (!by_start_already(it, n)) qsort(st, n, sizeof *st, cmp_u64);
    size_t *by_end = g_new(size_t, n ? n : 1); /* the ends in order: en[by_end[j]] */
    for (size_t i = 0; i < n; i++) by_end[i] = i;
    radix_sort(by_end, n, en, false);
    uint64_t pairs = 0;
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        while (j < n && en[by_end[j]] <= st[i]) j++;
        pairs += i - MIN(i, j); /* i started before; j of them (at most i) have ended */
    }
    g_free(st);
    g_free(en);
    g_free(by_end);
    return pairs;
}

/* Greedy by size (offsets into it[].off; returns the highest end), by whichever way is
 * faster for the trace's overlap; both place every item at the same offset (the lowest where it
 * meets none of the placed items beside it), so the choice changes no figure. Where each
 * request meets hundreds of others (GPT-2 and ResNet-50: 580 on average), the unions read a
 * few ranges instead of hundreds: 7 to 15 times fewer instructions. Where it meets a few dozen,
 * enumerating them is cheaper in time: the index's treaps, spread over memory, cost 1.3 to 1.7
 * times the CPU time there despite fewer instructions (BENCHMARKS.md, "The bound"). */
#define UNIONS_FROM_PAIRS_PER_ITEM 128

static uint64_t plan_greedy(item *it, size_t n, uint64_t pairs)
{
    if (n == 0) return 0;
    return pairs / n >= UNIONS_FROM_PAIRS_PER_ITEM ? greedy_by_unions(it, n)
                                                   : greedy_by_pairs(it, n);
}

/* First fit in time order, the fallback for traces with too many overlapping pairs: the
 * events replayed in order, each request placed at its alloc at the lowest offset free at that
 * moment (nothing placed later can be in its way: later requests go around the live ones), its
 * range freed at its end. The free ranges live in a treap keyed by offset, each node holding
 * the longest free range below it, so the lowest range that holds a request is one descent:
 * O(n log n) for any trace. The range above everything is one free range of unbounded length,
 * so a request always finds one; the highest end ever handed out is the peak. */
typedef struct {
    uint64_t off, len, maxlen;
    uint32_t prio, l, r;
} fnode;

typedef struct {
    fnode *nd;          /* nd[0] is the empty tree (maxlen 0) */
    uint32_t *spare;    /* nodes handed back, for reuse */
    size_t n_spare, used;
    uint32_t root;
    uint64_t rng;       /* xorshift64 state for the priorities: local, deterministic */
} ftreap;

static void fupd(ftreap *f, uint32_t x)
{
    fnode *n = &f->nd[x];
    n->maxlen = MAX(n->len, MAX(f->nd[n->l].maxlen, f->nd[n->r].maxlen));
}

/* t split into the nodes with off < key (*a) and the rest (*b). */
static void fsplit(ftreap *f, uint32_t t, uint64_t key, uint32_t *a, uint32_t *b)
{
    if (!t) {
        *a = *b = 0;
        return;
    }
    if (f->nd[t].off < key) {
        fsplit(f, f->nd[t].r, key, &f->nd[t].r, b);
        *a = t;
    } else {
        fsplit(f, f->nd[t].l, key, a, &f->nd[t].l);
        *b = t;
    }
    fupd(f, t);
}

/* Every node of a before every node of b. */
static uint32_t fmerge(ftreap *f, uint32_t a, uint32_t b)
{
    if (!a || !b) return a ? a : b;
    if (f->nd[a].prio > f->nd[b].prio) {
        f->nd[a].r = fmerge(f, f->nd[a].r, b);
        fupd(f, a);
        return a;
    }
    f->nd[b].l = fmerge(f, a, f->nd[b].l);
    fupd(f, b);
    return b;
}

static uint32_t fnew(ftreap *f, uint64_t off, uint64_t len)
{
    uint32_t x = f->n_spare ? f->spare[--f->n_spare] : (uint32_t)++f->used;
    f->rng ^= f->rng << 13;
    f->rng ^= f->rng >> 7;
    f->rng ^= f->rng << 17;
    f->nd[x] = (fnode){.off = off, .len = len, .maxlen = len, .prio = (uint32_t)(f->rng >> 32)};
    return x;
}

/* Take size bytes from the lowest free range that holds them; returns their offset. */
static uint64_t ftake(ftreap *f, uint64_t size)
{
    uint32_t t = f->root;
    for (;;) { /* the unbounded range on top holds anything, so this ends at a node */
        fnode *n = &f->nd[t];
        if (f->nd[n->l].maxlen >= size) t = n->l;
        else if (n->len >= size) break;
        else t = n->r;
    }
    uint64_t at = f->nd[t].off;
    uint32_t a, b, mid, c;
    fsplit(f, f->root, at, &a, &b);
    fsplit(f, b, at + 1, &mid, &c); /* mid is t alone */
    f->nd[t].off += size;
    f->nd[t].len -= size;
    if (f->nd[t].len == 0) {
        f->spare[f->n_spare++] = t;
        mid = 0;
    } else {
        fupd(f, t);
    }
    f->root = fmerge(f, a, fmerge(f, mid, c));
    return at;
}

/* Give [off, off + size) back, joined with the free ranges just below and above it. */
static void fgive(ftreap *f, uint64_t off, uint64_t size)
{
    uint32_t a, b, x;
    fsplit(f, f->root, off, &a, &b);
    uint64_t lo = off, len = size;
    for (x = a; x && f->nd[x].r; x = f->nd[x].r) {} /* the range below */
    if (x && f->nd[x].off + f->nd[x].len == off) {
        uint32_t a2, drop;
        lo = f->nd[x].off;
        len += f->nd[x].len;
        fsplit(f, a, lo, &a2, &drop);
        a = a2;
        f->spare[f->n_spare++] = drop;
    }
    for (x = b; x && f->nd[x].l; x = f->nd[x].l) {} /* the range above */
    if (x && f->nd[x].off == off + size) {
        uint32_t drop, b2;
        len += f->nd[x].len; /* the top range's length ends at UINT64_MAX: no overflow */
        fsplit(f, b, f->nd[x].off + 1, &drop, &b2);
        b = b2;
        f->spare[f->n_spare++] = drop;
    }
    f->root = fmerge(f, a, fmerge(f, fnew(f, lo, len), b));
}

static uint64_t plan_first_fit(item *it, size_t n)
{
    if (n == 0) return 0;
    size_t *by_start = g_new(size_t, n), *by_end = g_new(size_t, n);
    for (size_t i = 0; i < n; i++) by_start[i] = by_end[i] = i;
    if (!by_start_already(it, n))
        g_qsort_with_data(by_start, (gint)n, sizeof(size_t), cmp_by_start, it);
    uint64_t *ends = g_new(uint64_t, n);
    for (size_t i = 0; i < n; i++) ends[i] = it[i].end;
    radix_sort(by_end, n, ends, false);
    g_free(ends);
    /* at most one free range more than the live requests, plus the three a give holds */
    ftreap f = {.nd = g_new0(fnode, n + 4), .spare = g_new(uint32_t, n + 4), .rng = 0x9e3779b97f4a7c15u};
    f.root = fnew(&f, 0, UINT64_MAX);
    uint64_t top = 0;
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        item *x = &it[by_start[i]];
        for (; j < n && it[by_end[j]].end <= x->start; j++) /* ends first: reusable at once */
            fgive(&f, it[by_end[j]].off, it[by_end[j]].size);
        x->off = ftake(&f, x->size);
        top = MAX(top, x->off + x->size);
    }
    g_free(f.nd);
    g_free(f.spare);
    g_free(by_start);
    g_free(by_end);
    return top;
}

/* The most overlapping pairs greedy by size may enumerate: its cost is O(n log n) plus these,
 * 50 to 200 ns each (sorted per placement), so this bounds it to about a second on the
 * development VM. The bundled and real traces need 4 million at most (BENCHMARKS.md, "The
 * bound"); past it, first fit in time order, O(n log n) whatever the overlap. */
#define PAIR_BUDGET UINT64_C(8000000)

/* The better of the two heuristics, where greedy by size is affordable (first fit costs about
 * 1% of it), else first fit. */
static uint64_t plan_best(item *it, size_t n)
{
    uint64_t ff = plan_first_fit(it, n);
    uint64_t pairs = count_pairs(it, n);
    if (pairs > PAIR_BUDGET) return ff;
    uint64_t *ff_off = g_new(uint64_t, n);
    for (size_t i = 0; i < n; i++) ff_off[i] = it[i].off;
    uint64_t gr = plan_greedy(it, n, pairs);
    if (ff < gr)
        for (size_t i = 0; i < n; i++) it[i].off = ff_off[i];
    g_free(ff_off);
    return MIN(ff, gr);
}

/* The band: a request whose lifetime meets every other's (it starts before any other ends and
 * ends after every other starts) can go at the bottom without loss: in any layout nothing else
 * shares its address range at any time, so cutting its range out and stacking it below the
 * rest keeps every other pair apart. Taking such requests out can only make more of the rest
 * qualify (the rest's earliest end rises, its latest start falls), so repeat until none does.
 * The rest is planned above the band, with fewer overlapping pairs. Returns the band's height;
 * *rest holds the indices of the others. */
static uint64_t take_band(item *it, size_t n, size_t *rest, size_t *n_rest)
{
    size_t m = n;
    for (size_t i = 0; i < n; i++) rest[i] = i;
    uint64_t band = 0;
    for (bool again = true; again && m > 1;) {
        /* the two earliest ends and two latest starts, for "every other" */
        uint64_t e1 = UINT64_MAX, e2 = UINT64_MAX, s1 = 0, s2 = 0;
        for (size_t k = 0; k < m; k++) {
            const item *x = &it[rest[k]];
            if (x->end < e1) e2 = e1, e1 = x->end;
            else if (x->end < e2) e2 = x->end;
            if (x->start > s1) s2 = s1, s1 = x->start;
            else if (x->start > s2) s2 = x->start;
        }
        again = false;
        size_t kept = 0;
        for (size_t k = 0; k < m; k++) {
            item *x = &it[rest[k]];
            uint64_t min_end = x->end == e1 ? e2 : e1, max_start = x->start == s1 ? s2 : s1;
            if (x->start < min_end && x->end > max_start) {
                x->off = band;
                band += x->size;
                again = true;
            } else {
                rest[kept++] = rest[k];
            }
        }
        m = kept;
    }
    *n_rest = m;
    return band;
}

static gs_bound *bound(const gs_trace *t, gs_plan_method meth, bool stored);
static size_t device_index(const gs_bound *b, uint32_t device);

/* The end of a slot's lifetime: its free, deferred or not. A deferred free's memory waits for
 * its completion only as long as the allocator lets it: one that synchronizes (PyTorch's does,
 * before it gives up on a request) may reuse it at once, so counting it live to its completion
 * was no bound (docs/metrics.md, "The bound"). */
static bool ends(const gs_event *e)
{
    return e->op == GS_OP_FREE;
}

/* Each slot's lifetime, for the planner: from its alloc to its end (above), or to the end of
 * the trace. oom events are no slot: a request the recorded run failed and went past needs no
 * room. */
static item *lifetimes(const gs_trace *t)
{
    size_t ns = t->n_slots;
    item *all = g_new0(item, ns ? ns : 1);
    for (size_t i = 0; i < ns; i++) all[i].end = t->n + 1;
    for (size_t i = 0; i < t->n; i++) {
        const gs_event *e = &t->ev[i];
        if (e->slot >= ns) continue;
        item *x = &all[e->slot];
        if (e->op == GS_OP_ALLOC) {
            x->start = i + 1; /* ends are > 0: 0 marks "none placed" in the planner's tree */
            x->size = MAX(ALIGN, round_up(counted(e->size), ALIGN));
        } else if (ends(e)) {
            x->end = i + 1;
        }
    }
    return all;
}

uint64_t gs_bound_plan(gs_plan_req *r, size_t n, gs_plan_method m)
{
    if (n == 0) return 0;
    if (m == GS_PLAN_GREEDY) return plan_greedy(r, n, count_pairs(r, n));
    if (m == GS_PLAN_FIRST_FIT) return plan_first_fit(r, n);
    /* Where greedy by size is affordable on the whole trace, the layout is the better of the
     * two; otherwise the band first, and the same choice for the rest above it. (The band
     * first everywhere would halve the work on GPT-2 and ResNet-50, but greedy over the rest is
     * not always as good as greedy over all: tests/test_bound.c's random sets show it.) */
    if (m == GS_PLAN_AUTO && count_pairs(r, n) <= PAIR_BUDGET) return plan_best(r, n);
    size_t *idx = g_new(size_t, n), m_rest;
    uint64_t band = take_band(r, n, idx, &m_rest);
    item *rest = g_new(item, m_rest ? m_rest : 1);
    for (size_t k = 0; k < m_rest; k++) rest[k] = r[idx[k]];
    uint64_t top = band + plan_best(rest, m_rest);
    for (size_t k = 0; k < m_rest; k++) r[idx[k]].off = band + rest[k].off;
    g_free(rest);
    g_free(idx);
    return top;
}

gs_bound *gs_bound_compute(const gs_trace *t) { return bound(t, GS_PLAN_AUTO, true); }

gs_bound *gs_bound_compute_with(const gs_trace *t, gs_plan_method meth)
{
    return bound(t, meth, false);
}

void gs_bound_store(const gs_bound *b, gs_trace *t)
{
    GString *v = g_string_new(NULL);
    for (size_t d = 0; d < b->n_devices; d++) {
        /* a figure beyond what a header may say (the trace needs more than 16 TiB) is left to
         * be planned again */
        if (b->devices[d].offline_bytes > GS_MAX_DEVICE_BYTES) continue;
        g_string_append_printf(v, "%s%" PRIu32 "=%" PRIu64, v->len ? "," : "",
                               b->devices[d].device, b->devices[d].offline_bytes);
    }
    if (v->len) {
        char n[24];
        g_snprintf(n, sizeof n, "%zu", t->n);
        gs_trace_set_meta(t, "offline_planner", GS_BOUND_PLANNER);
        gs_trace_set_meta(t, "offline_events", n);
        gs_trace_set_meta(t, "offline_bytes_by_device", v->str);
    }
    g_string_free(v, TRUE);
}

void gs_bound_plan_and_store(gs_trace *t)
{
    gs_bound *b = gs_trace_get_meta(t, "offline_events") ? gs_bound_compute(t)
                                                         : gs_bound_compute_with(t, GS_PLAN_AUTO);
    gs_bound_store(b, t);
    gs_bound_free(b);
}

/* stored: take the header's figure where it is this planner's (gs_bound_store) and possible:
 * a multiple of the page, at least the lower bound. Anything else is planned again. */
/* The slots of each device, in slot order: device d's are order[(*first)[d] .. (*first)[d + 1]]
 * (g_free both). dix: each slot's device index (UINT32_MAX: none), NULL when every slot is
 * device 0's; per_dev: the slots of each. One pass, where a pass over every slot for each device
 * made 20,000 devices cost 4 * 10^8 steps. */
static size_t *slots_by_device(const uint32_t *dix, size_t ns, const size_t *per_dev, size_t n_dev,
                               size_t **first)
{
    size_t *f = g_new0(size_t, n_dev + 1), *order = g_new(size_t, ns ? ns : 1);
    if (!dix) {
        f[1] = ns;
        for (size_t d = 2; d <= n_dev; d++) f[d] = ns;
        for (size_t i = 0; i < ns; i++) order[i] = i;
    } else {
        for (size_t d = 0; d < n_dev; d++) f[d + 1] = f[d] + per_dev[d];
        size_t *next = g_memdup2(f, n_dev * sizeof *f);
        for (size_t i = 0; i < ns; i++)
            if (dix[i] != UINT32_MAX) order[next[dix[i]]++] = i;
        g_free(next);
    }
    *first = f;
    return order;
}

/* Per device of b, the peak of a layout that puts every request beside all the others, as the
 * planner sizes them, rounded up to the page: no planner's answer is above it. */
static uint64_t *side_by_side(const gs_trace *t, const gs_bound *b)
{
    uint64_t *sum = g_new0(uint64_t, b->n_devices);
    for (size_t i = 0; i < t->n; i++) {
        const gs_event *e = &t->ev[i];
        if (e->op != GS_OP_ALLOC || e->slot >= t->n_slots) continue;
        size_t d = device_index(b, e->device);
        if (d < b->n_devices) sum[d] += MAX(ALIGN, round_up(counted(e->size), ALIGN));
    }
    for (size_t d = 0; d < b->n_devices; d++) sum[d] = round_up(sum[d], PAGE);
    return sum;
}

static gs_bound *bound(const gs_trace *t, gs_plan_method meth, bool stored)
{
    gs_bound *b = g_new0(gs_bound, 1);
    uint32_t *ids = NULL;
    b->n_devices = gs_trace_devices(t, &ids);
    if (b->n_devices == 0) {
        b->n_devices = 1;
        b->devices = g_new0(gs_bound_dev, 1);
        g_free(ids);
        return b;
    }
    b->devices = g_new0(gs_bound_dev, b->n_devices);
    for (size_t d = 0; d < b->n_devices; d++) b->devices[d].device = ids[d];
    /* The peak of the live requested bytes, per device: the events in order, + at an alloc,
     * - at the end of its lifetime (lifetimes below). Unsigned: an end always follows its
     * alloc, and a sum of requests of at most 2^44 bytes stays below 2^64 up to 2^20 live at
     * once. A trace of one device that was read from a file comes with the figure: its reader
     * summed the same way as it appended the events (gs_trace_read_peak_live), and every
     * allocation is that device's. Otherwise one pass, with per slot only its request and
     * device index: 12 bytes, where the planner's items (built only if a device's figure must
     * be planned) take 32. */
    size_t ns = t->n_slots;
    uint32_t *dix = NULL; /* device index per slot; UINT32_MAX: no alloc. NULL: all device 0 */
    size_t *per_dev = g_new0(size_t, b->n_devices);
    uint64_t read_peak;
    if (b->n_devices == 1 && gs_trace_read_peak_live(t, &read_peak)) {
        b->devices[0].peak_live_bytes = read_peak;
        per_dev[0] = ns;
    } else {
        dix = g_new(uint32_t, ns ? ns : 1);
        uint64_t *req = g_new0(uint64_t, ns ? ns : 1);
        memset(dix, 0xff, (ns ? ns : 1) * sizeof *dix);
        uint64_t *live = g_new0(uint64_t, b->n_devices);
        uint32_t d = 0; /* the last alloc's device index (events come in runs of a device) */
        for (size_t i = 0; i < t->n; i++) {
            const gs_event *e = &t->ev[i];
            if (e->slot >= ns) continue;
            if (e->op == GS_OP_ALLOC) {
                if (b->devices[d].device != e->device)
                    d = (uint32_t)device_index(b, e->device); /* (every event's is there) */
                dix[e->slot] = d;
                per_dev[d]++;
                req[e->slot] = counted(e->size);
                live[d] += req[e->slot];
                if (live[d] > b->devices[d].peak_live_bytes)
                    b->devices[d].peak_live_bytes = live[d];
            } else if (ends(e) && dix[e->slot] != UINT32_MAX) {
                live[dix[e->slot]] -= req[e->slot];
            }
        }
        g_free(live);
        g_free(req);
    }
    item *all = NULL, *mine = NULL;
    uint64_t *kept = g_new0(uint64_t, b->n_devices);
    bool *has_kept = g_new0(bool, b->n_devices);
    if (stored) gs_trace_stored_offlines(t, GS_BOUND_PLANNER, ids, b->n_devices, kept, has_kept);
    /* Figures stored without the count of events they were planned over (before it was
     * written): at most what every request placed side by side takes, or planned again. A
     * trace cut from a longer one kept the longer one's figure. */
    uint64_t *side = NULL;
    if (stored && !gs_trace_get_meta(t, "offline_events")) side = side_by_side(t, b);
    size_t *first = NULL; /* the slots by device: first[d] .. first[d + 1] in order[] */
    size_t *order = NULL;
    for (size_t d = 0; d < b->n_devices; d++) {
        gs_bound_dev *bd = &b->devices[d];
        bd->lower_bound_bytes = round_up(bd->peak_live_bytes, PAGE);
        if (has_kept[d] && kept[d] % PAGE == 0 && kept[d] >= bd->lower_bound_bytes &&
            (kept[d] > 0) == (per_dev[d] > 0) && (!side || kept[d] <= side[d])) {
            bd->offline_bytes = kept[d];
        } else {
            if (!all) {
                all = lifetimes(t);
                mine = g_new(item, ns ? ns : 1);
                order = slots_by_device(dix, ns, per_dev, b->n_devices, &first);
            }
            size_t m = 0;
            for (size_t j = first[d]; j < first[d + 1]; j++) mine[m++] = all[order[j]];
            bd->offline_bytes = round_up(gs_bound_plan(mine, m, meth), PAGE);
        }
        b->peak_live_bytes += bd->peak_live_bytes;
        b->lower_bound_bytes += bd->lower_bound_bytes;
        b->offline_bytes += bd->offline_bytes;
    }
    g_free(mine);
    g_free(all);
    g_free(order);
    g_free(first);
    g_free(kept);
    g_free(has_kept);
    g_free(side);
    g_free(per_dev);
    g_free(dix);
    g_free(ids);
    return b;
}

void gs_bound_free(gs_bound *b)
{
    if (!b) return;
    g_free(b->devices);
    g_free(b);
}

/* The index of device among b's (ascending, from gs_trace_devices), or b->n_devices. */
static size_t device_index(const gs_bound *b, uint32_t device)
{
    size_t lo = 0, hi = b->n_devices;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (b->devices[mid].device < device) lo = mid + 1;
        else hi = mid;
    }
    return lo < b->n_devices && b->devices[lo].device == device ? lo : b->n_devices;
}

const gs_bound_dev *gs_bound_device(const gs_bound *b, uint32_t device)
{
    size_t d = b ? device_index(b, device) : 0;
    return b && d < b->n_devices ? &b->devices[d] : NULL;
}
