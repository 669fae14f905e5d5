/* stats.c - the heap's statistics as readers get them (the figures the hot path leaves to be
 * derived, core-int.h), the running sums over several heaps (gs_stats_sums: one device's
 * clients), and the accessors policies and reports read the heap by.
 */
#include "core-int.h"

/* ---- accessors for policies and reports ---- */

/* The figures the hot path leaves to be derived (core-int.h, statistics): every freed, and
 * active and active_bytes from allocation, allocated_bytes and the pending frees. Without full,
 * only what gs_heap_stats_now promises: each current and peak. */
static void stats_fill(gs_stats *st, const gs_heap *h, bool full)
{
#define FILL_CURRENT(name) st->name[GS_STAT_ALL].current = stat_all(st->name);
    GS_STAT_ARRAYS(FILL_CURRENT)
#undef FILL_CURRENT
    for (int t = 0; t < GS_STAT_TYPES; t++) {
        st->active[t].current = st->allocation[t].current + h->pend_n[t];
        st->active[t].peak = MAX(st->allocation[t].peak, h->active_peak_n[t]);
        st->active_bytes[t].current = st->allocated_bytes[t].current + h->pend_bytes[t];
        st->active_bytes[t].peak = MAX(st->allocated_bytes[t].peak, h->active_peak_bytes[t]);
    }
    if (!full) return;
    /* the decreases moved only current (stat2_dec) */
#define FILL_FREED(name)                                                                          \
    for (int t = GS_STAT_SMALL; t <= GS_STAT_LARGE; t++)                                          \
        st->name[t].freed = st->name[t].allocated - st->name[t].current;
    GS_STAT_ARRAYS(FILL_FREED)
#undef FILL_FREED
    st->oversize_allocations.freed =
        st->oversize_allocations.allocated - st->oversize_allocations.current;
    st->oversize_segments.freed = st->oversize_segments.allocated - st->oversize_segments.current;
#define FILL_ALL(name)                                                                            \
    st->name[GS_STAT_ALL].allocated =                                                             \
        st->name[GS_STAT_SMALL].allocated + st->name[GS_STAT_LARGE].allocated;                   \
    st->name[GS_STAT_ALL].freed = st->name[GS_STAT_SMALL].freed + st->name[GS_STAT_LARGE].freed;
    GS_STAT_ARRAYS(FILL_ALL)
#undef FILL_ALL
    for (int t = 0; t < GS_STAT_TYPES; t++) {
        st->active[t].allocated = st->allocation[t].allocated;
        st->active_bytes[t].allocated = st->allocated_bytes[t].allocated;
        st->active[t].freed = st->active[t].allocated - st->active[t].current;
        st->active_bytes[t].freed = st->active_bytes[t].allocated - st->active_bytes[t].current;
    }
}

const gs_stats *gs_heap_stats(const gs_heap *h)
{
    /* Logically const: the derived figures are filled in where they are kept (every heap is
     * made by gs_heap_new, never const itself). */
    gs_heap *m = (gs_heap *)h;
    if (m->filled_ops != m->nops) {
        stats_fill(&m->st, h, true);
        m->filled_ops = m->now_ops = m->nops;
    }
    return &m->st;
}

const gs_stats *gs_heap_stats_now(const gs_heap *h)
{
    gs_heap *m = (gs_heap *)h;
    if (m->now_ops != m->nops) {
        stats_fill(&m->st, h, false);
        m->now_ops = m->nops;
    }
    return &m->st;
}

void gs_stats_sums_init(gs_stats_sums *s)
{
    memset(s, 0, sizeof *s);
    s->at = SIZE_MAX;
}

void gs_stats_sums_clear(gs_stats_sums *s)
{
    g_free(s->last);
    g_free(s->sum);
    g_free(s->largest);
    s->last = s->sum = NULL;
    s->largest = NULL;
    s->n = 0;
    s->at = SIZE_MAX;
}

static inline int64_t cur_of(const gs_stat a[GS_STAT_TYPES], int t)
{
    return t == GS_STAT_ALL ? stat_all(a) : a[t].current;
}

/* h's current of stat name[t] as gs_heap_stats_now gives it (stats_fill), from the figures the
 * hot path keeps, without filling anything in: active and active_bytes are allocation and
 * allocated_bytes plus the pending frees. (The names' compares are constants.) */
#define CUR(h, name, t)                                                                         \
    (offsetof(gs_stats, name) == offsetof(gs_stats, active)                                     \
         ? cur_of((h)->st.allocation, t) + (h)->pend_n[t]                                       \
     : offsetof(gs_stats, name) == offsetof(gs_stats, active_bytes)                             \
         ? cur_of((h)->st.allocated_bytes, t) + (h)->pend_bytes[t]                              \
         : cur_of((h)->st.name, t))

/* Whether some current of h is above its threshold: one compare a stat, almost never true (the
 * check after every event). With no free pending (nearly always), active and active_bytes
 * equal allocation and allocated_bytes, so each such pair is one compare with the lower of
 * their thresholds (s->lo_n, s->lo_bytes). */
static inline bool stats_above(const gs_heap *h, const gs_stats_sums *s)
{
    const gs_stats *thr = &s->thr;
#define IS(name, other) (offsetof(gs_stats, name) == offsetof(gs_stats, other))
#define ABOVE3(name, THR)                                                                       \
    if (CUR(h, name, GS_STAT_ALL) > THR(name, GS_STAT_ALL) ||                                   \
        CUR(h, name, GS_STAT_SMALL) > THR(name, GS_STAT_SMALL) ||                               \
        CUR(h, name, GS_STAT_LARGE) > THR(name, GS_STAT_LARGE))                                 \
        return true;
#define THR(name, t) (thr->name[t].current)
#define THR_LO(name, t)                                                                         \
    (IS(name, allocation) ? s->lo_n[t] : IS(name, allocated_bytes) ? s->lo_bytes[t] : THR(name, t))
#define ABOVE(name) ABOVE3(name, THR)
#define ABOVE_NO_PENDING(name)                                                                  \
    if (!IS(name, active) && !IS(name, active_bytes)) {                                         \
        ABOVE3(name, THR_LO)                                                                    \
    }
    if (G_LIKELY(!h->pend_n[GS_STAT_ALL])) {
        GS_STAT_ARRAYS(ABOVE_NO_PENDING)
    } else {
        GS_STAT_ARRAYS(ABOVE)
    }
#undef ABOVE_NO_PENDING
#undef ABOVE
#undef THR_LO
#undef THR
#undef ABOVE3
#undef IS
    return h->st.oversize_allocations.current > thr->oversize_allocations.current ||
           h->st.oversize_segments.current > thr->oversize_segments.current;
}

/* Some current of heaps[k] is above its threshold, or the thresholds are another heap's (or
 * none): set them for heaps[k], each peak less the other heaps' currents, then raise each
 * peak whose threshold heaps[k]'s current passed (to the other heaps' currents plus its), and
 * at a new peak of allocated or reserved bytes note the state there, over every heap, as a
 * heap does for its own (stat2_inc's requested_at_peak_allocated, note_peak_reserved). */
static G_GNUC_NO_INLINE void sums_fold(gs_stats_sums *s, gs_heap *const *heaps, size_t n,
                                       size_t k)
{
    s->heaps_read += n; /* (at most: heaps[k], the other one, the sums at a peak) */
    gs_stats *p = &s->peaks, *thr = &s->thr;
    /* each type written out: a constant t lets CUR lose its branch (a loop cost 2x) */
#define EACH_TYPE(stmt)                                                                         \
    do {                                                                                        \
        enum { t = GS_STAT_ALL };                                                               \
        stmt;                                                                                   \
    } while (0);                                                                                \
    do {                                                                                        \
        enum { t = GS_STAT_SMALL };                                                             \
        stmt;                                                                                   \
    } while (0);                                                                                \
    do {                                                                                        \
        enum { t = GS_STAT_LARGE };                                                             \
        stmt;                                                                                   \
    } while (0);
    /* the thresholds for heaps[k]: kept (s->at == k), or each peak less the other heaps'
     * currents, which for two heaps (the usual case) is one heap's, taken in the raise's pass */
    const gs_heap *other = NULL;
    if (s->at != k && n == 2) {
        other = heaps[1 - k];
    } else if (s->at != k) {
#define FROM_PEAK(name)                                                                         \
    EACH_TYPE(thr->name[t].current = p->name[t].peak)
        GS_STAT_ARRAYS(FROM_PEAK)
#undef FROM_PEAK
        thr->oversize_allocations.current = p->oversize_allocations.peak;
        thr->oversize_segments.current = p->oversize_segments.peak;
        for (size_t j = 0; j < n; j++) {
            const gs_heap *o = heaps[j];
            if (j == k) continue;
#define LESS_OTHER(name) EACH_TYPE(thr->name[t].current -= CUR(o, name, t))
            GS_STAT_ARRAYS(LESS_OTHER)
#undef LESS_OTHER
            thr->oversize_allocations.current -= o->st.oversize_allocations.current;
            thr->oversize_segments.current -= o->st.oversize_segments.current;
        }
    }
    s->at = k;
    const gs_heap *h = heaps[k];
    int64_t old_allocated = p->allocated_bytes[GS_STAT_ALL].peak;
    int64_t old_reserved = p->reserved_bytes[GS_STAT_ALL].peak;
    /* peak less the other heaps' currents (th), and heaps[k]'s current (c): above, the peak
     * becomes theirs plus c, and the threshold c */
#define RAISE(tp, pp, th, c)                                                                    \
    do {                                                                                        \
        int64_t th_ = (th), c_ = (c);                                                           \
        if (c_ > th_) {                                                                         \
            (pp)->peak += c_ - th_;                                                             \
            th_ = c_;                                                                           \
        }                                                                                       \
        (tp)->current = th_;                                                                    \
    } while (0)
    if (other) {
#define RAISE_OTHER(name)                                                                       \
    EACH_TYPE(RAISE(&thr->name[t], &p->name[t], p->name[t].peak - CUR(other, name, t),          \
                    CUR(h, name, t)))
        GS_STAT_ARRAYS(RAISE_OTHER)
#undef RAISE_OTHER
        RAISE(&thr->oversize_allocations, &p->oversize_allocations,
              p->oversize_allocations.peak - other->st.oversize_allocations.current,
              h->st.oversize_allocations.current);
        RAISE(&thr->oversize_segments, &p->oversize_segments,
              p->oversize_segments.peak - other->st.oversize_segments.current,
              h->st.oversize_segments.current);
    } else {
#define RAISE_KEPT(name)                                                                        \
    EACH_TYPE(RAISE(&thr->name[t], &p->name[t], thr->name[t].current, CUR(h, name, t)))
        GS_STAT_ARRAYS(RAISE_KEPT)
#undef RAISE_KEPT
        RAISE(&thr->oversize_allocations, &p->oversize_allocations,
              thr->oversize_allocations.current, h->st.oversize_allocations.current);
        RAISE(&thr->oversize_segments, &p->oversize_segments, thr->oversize_segments.current,
              h->st.oversize_segments.current);
    }
#undef RAISE
#undef EACH_TYPE
    for (int t = 0; t < GS_STAT_TYPES; t++) {
        s->lo_n[t] = MIN(thr->allocation[t].current, thr->active[t].current);
        s->lo_bytes[t] = MIN(thr->allocated_bytes[t].current, thr->active_bytes[t].current);
    }
    if (p->allocated_bytes[GS_STAT_ALL].peak > old_allocated) {
        p->requested_at_peak_allocated = 0;
        for (size_t j = 0; j < n; j++)
            p->requested_at_peak_allocated += CUR(heaps[j], requested_bytes, GS_STAT_ALL);
    }
    if (p->reserved_bytes[GS_STAT_ALL].peak > old_reserved) {
        uint64_t largest = 0, all = 0;
        for (size_t j = 0; j < n; j++) {
            uint64_t big = 0;
            all += gs_heap_free_bytes(heaps[j], &big);
            largest = MAX(largest, big);
        }
        p->largest_free_at_peak_reserved = largest;
        p->total_free_at_peak_reserved = all;
    }
}

/* ---- more than two heaps: running sums ---- */

enum { NSUMS = GS_STATS_N };

/* The places of a few stats in a list of NSUMS (every array's three types in gs_stats' order,
 * then the two oversize stats). */
#define AT_OF(name) \
    ((int)((offsetof(gs_stats, name) - offsetof(gs_stats, allocation)) / sizeof(gs_stat)))
G_STATIC_ASSERT(offsetof(gs_stats, allocation) == 0);
G_STATIC_ASSERT(offsetof(gs_stats, oversize_allocations) == (NSUMS - 2) * sizeof(gs_stat));

void gs_stats_each(gs_stats *s, gs_stat *out[GS_STATS_N])
{
    int i = 0;
#define PTRS(name) \
    for (int t = 0; t < GS_STAT_TYPES; t++) out[i++] = &s->name[t];
    GS_STAT_ARRAYS(PTRS)
#undef PTRS
    out[i++] = &s->oversize_allocations;
    out[i] = &s->oversize_segments;
}

void gs_stat_charge(gs_stat a[GS_STAT_TYPES], int type, int64_t v)
{
    if (v >= 0) {
        gs_stat_inc(&a[GS_STAT_ALL], v);
        gs_stat_inc(&a[type], v);
    } else {
        gs_stat_dec(&a[GS_STAT_ALL], -v);
        gs_stat_dec(&a[type], -v);
    }
}

int gs_heap_pool_stat_type(const gs_heap *h, unsigned pool)
{
    return h->policy->ops->pools[gs_pool_kind(pool)].is_small ? GS_STAT_SMALL : GS_STAT_LARGE;
}

void gs_stats_charge_reserve(gs_stats *st, const gs_heap *h, const gs_segment *s, int64_t bytes)
{
    int type = gs_heap_pool_stat_type(h, s->pool);
    gs_stat_charge(st->reserved_bytes, type, bytes);
    if (!s->expandable) gs_stat_charge(st->segment, type, bytes > 0 ? 1 : -1);
}

void gs_stats_add(gs_stats *d, const gs_stats *s)
{
    gs_stat *dl[NSUMS], *sl[NSUMS];
    gs_stats_each(d, dl);
    gs_stats_each((gs_stats *)s, sl); /* (read only: it hands out places) */
    for (int i = 0; i < NSUMS; i++) {
        dl[i]->current += sl[i]->current;
        dl[i]->allocated += sl[i]->allocated;
        dl[i]->freed += sl[i]->freed;
    }
    d->num_alloc_retries += s->num_alloc_retries;
    d->num_ooms += s->num_ooms;
    d->num_sync_all_streams += s->num_sync_all_streams;
    d->num_device_alloc += s->num_device_alloc;
    d->num_device_free += s->num_device_free;
    d->num_reclaim_retries += s->num_reclaim_retries;
    d->num_oom_rejections += s->num_oom_rejections;
}

/* h's currents as gs_heap_stats_now gives them, in that order. */
static void currents(const gs_heap *h, int64_t out[NSUMS])
{
    int i = 0;
#define CURS(name)                          \
    out[i++] = CUR(h, name, GS_STAT_ALL);   \
    out[i++] = CUR(h, name, GS_STAT_SMALL); \
    out[i++] = CUR(h, name, GS_STAT_LARGE);
    GS_STAT_ARRAYS(CURS)
#undef CURS
    out[i++] = h->st.oversize_allocations.current;
    out[i] = h->st.oversize_segments.current;
}

/* The largest free block of heap j as last seen, into the tree of maxima (leaves at n + j). */
static void set_largest(gs_stats_sums *s, size_t j, uint64_t v)
{
    size_t i = s->n + j;
    s->largest[i] = v;
    for (i /= 2; i >= 1; i /= 2) s->largest[i] = MAX(s->largest[2 * i], s->largest[2 * i + 1]);
}

/* Heap j's figures as they are now into last, sum and the tree. */
static void take_heap(gs_stats_sums *s, const gs_heap *h, size_t j)
{
    s->heaps_read++;
    int64_t cur[NSUMS], *last = s->last + j * NSUMS;
    currents(h, cur);
    for (int i = 0; i < NSUMS; i++) {
        s->sum[i] += cur[i] - last[i];
        last[i] = cur[i];
    }
    uint64_t big = 0;
    (void)gs_heap_free_bytes(h, &big);
    set_largest(s, j, big);
}

/* sums_fold for more than two heaps: each threshold is the peak less the other heaps' currents,
 * which are the running sum less heaps[k]'s last seen (only heaps[k] changed since its, and
 * each other one's is as it was when it was left); the heap left, s->at, is taken first. A
 * call after gs_stats_sums_dirty (reclaim, the frees between passes) takes every heap. */
static G_GNUC_NO_INLINE void sums_fold_many(gs_stats_sums *s, gs_heap *const *heaps, size_t n,
                                            size_t k)
{
    if (s->n != n) {
        gs_stats_sums_clear(s);
        s->n = n;
        s->last = g_new0(int64_t, n * NSUMS);
        s->sum = g_new0(int64_t, NSUMS);
        s->largest = g_new0(uint64_t, 2 * n);
    }
    if (s->at == SIZE_MAX) {
        for (size_t j = 0; j < n; j++) take_heap(s, heaps[j], j);
    } else if (s->at != k) {
        take_heap(s, heaps[s->at], s->at);
    }
    s->at = k;
    int64_t cur[NSUMS];
    const int64_t *last = s->last + k * NSUMS;
    currents(heaps[k], cur);
    s->heaps_read++;
    gs_stats *p = &s->peaks, *thr = &s->thr;
    gs_stat *ps[NSUMS], *ts[NSUMS];
    gs_stats_each(p, ps);
    gs_stats_each(thr, ts);
    int64_t old_allocated = p->allocated_bytes[GS_STAT_ALL].peak;
    int64_t old_reserved = p->reserved_bytes[GS_STAT_ALL].peak;
    for (int i = 0; i < NSUMS; i++) {
        int64_t th = ps[i]->peak - (s->sum[i] - last[i]);
        if (cur[i] > th) {
            ps[i]->peak += cur[i] - th;
            th = cur[i];
        }
        ts[i]->current = th;
    }
    for (int t = 0; t < GS_STAT_TYPES; t++) {
        s->lo_n[t] = MIN(thr->allocation[t].current, thr->active[t].current);
        s->lo_bytes[t] = MIN(thr->allocated_bytes[t].current, thr->active_bytes[t].current);
    }
    /* a sum over every heap: the others' as last seen, and heaps[k]'s now */
#define ALL_HEAPS(name) (s->sum[AT_OF(name)] - last[AT_OF(name)] + cur[AT_OF(name)])
    if (p->allocated_bytes[GS_STAT_ALL].peak > old_allocated)
        p->requested_at_peak_allocated = ALL_HEAPS(requested_bytes);
    if (p->reserved_bytes[GS_STAT_ALL].peak > old_reserved) {
        /* (gs_heap_free_bytes: reserved less allocated less the pending frees, which active
         * bytes count) */
        uint64_t big = 0;
        (void)gs_heap_free_bytes(heaps[k], &big);
        set_largest(s, k, big);
        p->largest_free_at_peak_reserved = s->largest[1];
        p->total_free_at_peak_reserved =
            (uint64_t)(ALL_HEAPS(reserved_bytes) - ALL_HEAPS(active_bytes));
    }
#undef ALL_HEAPS
}

static void sums_fold_any(gs_stats_sums *s, gs_heap *const *heaps, size_t n, size_t k)
{
    if (n > 2) sums_fold_many(s, heaps, n, k);
    else sums_fold(s, heaps, n, k);
}

void gs_stats_sums_after(gs_stats_sums *s, gs_heap *const *heaps, size_t n, size_t k)
{
    if (G_LIKELY(s->at == k) && !stats_above(heaps[k], s)) return;
    sums_fold_any(s, heaps, n, k);
}

/* Whether an inactive split count of h is above its threshold: the only currents a free can
 * raise (gs_stats_sums_after_free). Six compares where stats_above makes 23. */
static inline bool split_above(const gs_heap *h, const gs_stats_sums *s)
{
    const gs_stat *n = h->st.inactive_split, *b = h->st.inactive_split_bytes;
    const gs_stat *tn = s->thr.inactive_split, *tb = s->thr.inactive_split_bytes;
    enum { A = GS_STAT_ALL, S = GS_STAT_SMALL, L = GS_STAT_LARGE };
    /* (| rather than ||: one branch, not six) */
    return (n[S].current > tn[S].current) | (n[L].current > tn[L].current) |
           (n[S].current + n[L].current > tn[A].current) | (b[S].current > tb[S].current) |
           (b[L].current > tb[L].current) | (b[S].current + b[L].current > tb[A].current);
}

void gs_stats_sums_after_free(gs_stats_sums *s, gs_heap *const *heaps, size_t n, size_t k)
{
    if (G_LIKELY(s->at == k) && !split_above(heaps[k], s)) return;
    sums_fold_any(s, heaps, n, k);
}

const gs_devcalls *gs_heap_devcalls(const gs_heap *h) { return &h->calls; }
const gs_policy *gs_heap_policy(const gs_heap *h) { return h->policy; }
uint64_t gs_heap_limit(const gs_heap *h) { return h->limit; }
bool gs_heap_moving(const gs_heap *h)
{
    return h->moving;
}
void gs_heap_set_limit(gs_heap *h, uint64_t limit)
{
    h->limit = limit;
    /* what was asked so far passed (a copy of an uncapped replay that refused nothing, capped
     * at no less than that: probe.h) */
    h->limit_kept = gs_heap_limit_asked(h);
    h->limit_refused = UINT64_MAX;
    /* garbage collection starts under the new limit where the ages it reads were kept */
    if (h->gc_ages) h->gc_active = limit > 0 && h->P->collect != NULL;
}

void gs_heap_keep_gc_ages(gs_heap *h)
{
    /* (a setting whose collection reads no limit, PyTorch's with no threshold, needs none) */
    if (!h->P->collect || !h->P->limit_unread || !h->P->limit_unread(h->cfg, 1) || h->gc_ages)
        return;
    h->gc_ages = true;
    h->plain = false; /* (the plain path keeps no ages) */
}
uint64_t gs_heap_limit_asked(const gs_heap *h)
{
    return MAX(h->limit_asked, (uint64_t)h->st.reserved_bytes[GS_STAT_ALL].peak);
}
void gs_heap_same_limits(const gs_heap *h, uint64_t *lo, uint64_t *hi)
{
    *lo = h->limit_kept;
    *hi = h->limit_refused;
}
void gs_heap_limit_decides(gs_heap *h, uint64_t lo, uint64_t hi)
{
    h->limit_kept = MAX(h->limit_kept, lo);
    h->limit_refused = MIN(h->limit_refused, hi);
}
uint64_t gs_heap_reserved(const gs_heap *h) { return h->total_reserved; }
void gs_heap_set_tag(gs_heap *h, uint32_t tag) { h->tag = tag; }
const gs_segment *gs_heap_segments(const gs_heap *h) { return h->segments; }
uint64_t *gs_heap_policy_state(gs_heap *h) { return h->policy_state; }

uint64_t gs_heap_device_total(gs_heap *h)
{
    if (!h->device_total) {
        uint64_t fr = 0;
        (void)gs_dev_mem_info(h->be, NULL, &fr, &h->device_total);
    }
    return h->device_total;
}
