/* bound.c - the trace's lower bound and the offline planner's peak (bound.h, docs/metrics.md).
 *
 * The planner is "greedy by size" for the dynamic storage allocation problem (DSA): every
 * request is an interval in time with a width in bytes, and the task is to give each an offset
 * so that no two that are live at once overlap, minimising the highest end. Requests are placed
 * largest first (ties: earlier first), each at the lowest offset where it overlaps none of the
 * placed requests whose lifetimes meet its own. The placed requests that meet a lifetime
 * [s, e) are found with a segment tree over the requests sorted by start, holding the latest
 * end of the placed ones in each subtree: those that start before e and end after s are
 * enumerated without looking at the others, so the cost is O(n log n) plus the overlapping
 * pairs, not O(n^2).
 */
#include <stdlib.h>
#include <string.h>

#include "bound.h"

#define PAGE (2 * GS_MiB)
#define ALIGN UINT64_C(512)

static uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

typedef struct {
    uint64_t start, end; /* event indices: live over [start, end) */
    uint64_t size;       /* aligned */
    uint64_t off;
} item;

typedef struct {
    const item *it;
    size_t *by_start;    /* item indices by start */
    uint64_t *maxend;    /* tree over by_start: 1-based heap order, leaves at [leaves, 2*leaves) */
    size_t leaves;
    GArray *hits;        /* item indices found by a query */
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

/* A placed request beside the one being placed: where it lies. */
typedef struct {
    uint64_t off, top;
} span;

static int cmp_span(const void *a, const void *b)
{
    uint64_t x = ((const span *)a)->off, y = ((const span *)b)->off;
    return (x > y) - (x < y);
}

/* The placed requests at sorted positions [0, limit) that end after s, under node (covering
 * [lo, hi)). */
static void query(planner *p, size_t node, size_t lo, size_t hi, size_t limit, uint64_t s)
{
    if (lo >= limit || p->maxend[node] <= s) return;
    if (hi - lo == 1) {
        const item *y = &p->it[p->by_start[lo]];
        span sp = {y->off, y->off + y->size};
        g_array_append_val(p->hits, sp);
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

/* The most pairs (placed request, request being placed) with overlapping lifetimes the planner
 * looks at before it gives up: its cost is O(n log n) plus these pairs (sorted per placement),
 * 50 to 200 ns each, so this bounds it to about 3 s. A trace that needs more (very many
 * allocations live at once, all the time) gets no offline figure (0) rather than a long wait:
 * the bundled and the real traces need 4 million at most (BENCHMARKS.md, "The bound"). */
#define PAIR_BUDGET UINT64_C(16000000)

/* Place every item (offsets into it[].off); returns the highest end, 0 when over budget. */
static uint64_t plan(item *it, size_t n)
{
    if (n == 0) return 0;
    planner p = {.it = it, .hits = g_array_new(FALSE, FALSE, sizeof(span))};
    p.by_start = g_new(size_t, n);
    size_t *order = g_new(size_t, n);
    size_t *pos = g_new(size_t, n); /* item -> its position in by_start */
    for (size_t i = 0; i < n; i++) p.by_start[i] = order[i] = i;
    g_qsort_with_data(p.by_start, (gint)n, sizeof(size_t), cmp_by_start, it);
    g_qsort_with_data(order, (gint)n, sizeof(size_t), cmp_by_size, it);
    for (size_t i = 0; i < n; i++) pos[p.by_start[i]] = i;
    for (p.leaves = 1; p.leaves < n; p.leaves *= 2) {}
    p.maxend = g_new0(uint64_t, 2 * p.leaves); /* 0: nothing placed (every end is > 0) */
    uint64_t top = 0, hits_total = 0;
    for (size_t k = 0; k < n; k++) {
        item *x = &it[order[k]];
        /* positions whose start is before x's end: by_start is sorted, so a binary search */
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (it[p.by_start[mid]].start < x->end) lo = mid + 1;
            else hi = mid;
        }
        g_array_set_size(p.hits, 0);
        query(&p, 1, 0, p.leaves, lo, x->start);
        hits_total += p.hits->len;
        if (hits_total > PAIR_BUDGET) {
            top = 0; /* not computed: see PAIR_BUDGET */
            break;
        }
        span *h = (span *)(void *)p.hits->data;
        /* data is NULL while the array is empty, which qsort may not be given */
        if (p.hits->len > 1) qsort(h, p.hits->len, sizeof(span), cmp_span);
        uint64_t at = 0;
        for (guint j = 0; j < p.hits->len; j++) {
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
    g_array_free(p.hits, TRUE);
    return top;
}

gs_bound *gs_bound_compute(const gs_trace *t)
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
    /* Each slot's lifetime: from its alloc to its free, or to the completion of a deferred
     * free (the memory is not reusable before), or to the end of the trace. oom events are no
     * slot: a request the recorded run failed and went past needs no room. */
    size_t ns = t->n_slots;
    item *all = g_new0(item, ns ? ns : 1);
    uint32_t *dev = g_new0(uint32_t, ns ? ns : 1);
    uint64_t *req = g_new0(uint64_t, ns ? ns : 1);
    for (size_t i = 0; i < ns; i++) all[i].end = t->n + 1;
    for (size_t i = 0; i < t->n; i++) {
        const gs_event *e = &t->ev[i];
        if (e->slot >= ns) continue;
        item *x = &all[e->slot];
        if (e->op == GS_OP_ALLOC) {
            x->start = i + 1; /* ends are > 0: 0 marks "none placed" in the planner's tree */
            x->size = MAX(ALIGN, round_up(e->size, ALIGN));
            req[e->slot] = e->size;
            dev[e->slot] = e->device;
        } else if ((e->op == GS_OP_FREE && !(e->flags & GS_EV_DEFERRED)) ||
                   e->op == GS_OP_FREE_DONE) {
            x->end = i + 1;
        }
    }
    /* Peak of the live requested bytes, per device: the events in order, + at an alloc, - at
     * the end of its lifetime as above. */
    int64_t *live = g_new0(int64_t, b->n_devices);
    for (size_t i = 0; i < t->n; i++) {
        const gs_event *e = &t->ev[i];
        if (e->slot >= ns || all[e->slot].start == 0) continue;
        bool ends = (e->op == GS_OP_FREE && !(e->flags & GS_EV_DEFERRED)) ||
                    e->op == GS_OP_FREE_DONE;
        if (e->op != GS_OP_ALLOC && !ends) continue;
        size_t d = 0;
        while (b->devices[d].device != dev[e->slot]) d++;
        live[d] += e->op == GS_OP_ALLOC ? (int64_t)req[e->slot] : -(int64_t)req[e->slot];
        if (live[d] > (int64_t)b->devices[d].peak_live_bytes)
            b->devices[d].peak_live_bytes = (uint64_t)live[d];
    }
    g_free(live);
    item *mine = g_new(item, ns ? ns : 1);
    bool offline_missing = false;
    for (size_t d = 0; d < b->n_devices; d++) {
        gs_bound_dev *bd = &b->devices[d];
        size_t m = 0;
        for (size_t i = 0; i < ns; i++)
            if (dev[i] == bd->device && all[i].start != 0) mine[m++] = all[i];
        bd->lower_bound_bytes = round_up(bd->peak_live_bytes, PAGE);
        bd->offline_bytes = round_up(plan(mine, m), PAGE);
        b->peak_live_bytes += bd->peak_live_bytes;
        b->lower_bound_bytes += bd->lower_bound_bytes;
        b->offline_bytes += bd->offline_bytes;
        offline_missing |= bd->offline_bytes == 0 && m > 0;
    }
    if (offline_missing) b->offline_bytes = 0;
    g_free(mine);
    g_free(req);
    g_free(dev);
    g_free(all);
    g_free(ids);
    return b;
}

void gs_bound_free(gs_bound *b)
{
    if (!b) return;
    g_free(b->devices);
    g_free(b);
}

const gs_bound_dev *gs_bound_device(const gs_bound *b, uint32_t device)
{
    for (size_t d = 0; b && d < b->n_devices; d++)
        if (b->devices[d].device == device) return &b->devices[d];
    return NULL;
}
