/* test_bound.c - the trace's bound (sim/bound.h): the peak of live requests and the offline
 * planner's peak, on hand-made traces whose answers are worked out in the comments. U is the
 * device's page, 2 MiB, so most answers need no rounding. */
#include "testutil.h"

#include "replay.h"

#include <glib/gstdio.h>

#define U (2 * MiB)

static gs_bound *bound_of(gs_trace *t)
{
    gs_bound *b = gs_bound_compute(t);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_ge(b->offline_bytes, b->lower_bound_bytes); /* never below the bound */
    return b;
}

START_TEST(empty_trace_is_zero)
{
    gs_trace *t = gs_trace_new();
    gs_bound *b = bound_of(t);
    ck_assert_uint_eq(b->n_devices, 1);
    ck_assert_uint_eq(b->lower_bound_bytes, 0);
    ck_assert_uint_eq(b->offline_bytes, 0);
    gs_bound_free(b);
    gs_trace_free(t);
}
END_TEST

/* The peak of live requested bytes, as asked (not rounded per request), then rounded up to the
 * page once: 3 MiB + 100 and 100 bytes live together are 3 MiB + 200 -> 4 MiB. The planner
 * aligns each to 512 bytes: 3 MiB + 512 and 512, also 4 MiB. */
START_TEST(rounds_the_peak_not_each_request)
{
    gs_trace *t = gs_trace_new();
    uint32_t a = gs_trace_add_alloc(t, "torch", 0, 3 * MiB + 100);
    uint32_t c = gs_trace_add_alloc(t, "torch", 0, 100);
    gs_trace_add_free(t, a);
    gs_trace_add_free(t, c);
    for (int i = 0; i < 10; i++) gs_trace_add_free(t, gs_trace_add_alloc(t, "torch", 0, 1000));
    gs_bound *b = bound_of(t);
    ck_assert_uint_eq(b->peak_live_bytes, 3 * MiB + 200);
    ck_assert_uint_eq(b->lower_bound_bytes, 4 * MiB);
    ck_assert_uint_eq(b->offline_bytes, 4 * MiB);
    gs_bound_free(b);
    gs_trace_free(t);
}
END_TEST

/* Requests beyond the largest simulated device count as GS_MAX_DEVICE_BYTES: two of 2^64 - 1
 * bytes live together are 2 x 16 TiB, not a sum that overflows (UBSan's signed overflow in the
 * fuzz_replay harness: tests/fuzz/corpus/replay/crash-bound-overflow.gstrace). */
START_TEST(huge_requests_count_as_the_largest_device)
{
    gs_trace *t = gs_trace_new();
    uint32_t a = gs_trace_add_alloc(t, "torch", 0, UINT64_MAX);
    uint32_t c = gs_trace_add_alloc(t, "torch", 0, UINT64_MAX - 1);
    gs_trace_add_free(t, a);
    gs_trace_add_free(t, c);
    gs_bound *b = bound_of(t);
    ck_assert_uint_eq(b->peak_live_bytes, 2 * GS_MAX_DEVICE_BYTES);
    ck_assert_uint_eq(b->lower_bound_bytes, 2 * GS_MAX_DEVICE_BYTES);
    ck_assert_uint_eq(b->offline_bytes, 2 * GS_MAX_DEVICE_BYTES);
    gs_bound_free(b);
    gs_trace_free(t);
}
END_TEST

/* A (4U) lives over the first half, C (2U) throughout, B (2U) over the second half. Live: A+C
 * = 6U, then B+C = 4U: the bound is 6U. The planner places A at 0, then C (as large as B,
 * earlier) above A at 4U, then B in A's old place at 0: 6U, the optimum. */
START_TEST(planner_reuses_a_dead_requests_place)
{
    gs_trace *t = gs_trace_new();
    uint32_t a = gs_trace_add_alloc(t, "torch", 0, 4 * U);
    uint32_t c = gs_trace_add_alloc(t, "torch", 0, 2 * U);
    gs_trace_add_free(t, a);
    uint32_t b2 = gs_trace_add_alloc(t, "torch", 0, 2 * U);
    gs_trace_add_free(t, b2);
    gs_trace_add_free(t, c);
    gs_bound *b = bound_of(t);
    ck_assert_uint_eq(b->lower_bound_bytes, 6 * U);
    ck_assert_uint_eq(b->offline_bytes, 6 * U);
    gs_bound_free(b);
    gs_trace_free(t);
}
END_TEST

/* Where no layout reaches the bound: x (1U) and y (1U) live together, then x dies and z (2U)
 * comes while y lives; then y dies and w (1U) comes while z lives, and x' (1U) with it.
 *   events: x y | free x | z | free y | w | free z | ...
 * Live: x+y = 2U, y+z = 3U, z+w = 3U. Bound 3U. The planner: z (2U) first at 0; x (overlaps
 * only y) at 0; y (overlaps x and z) above both at 2U; w (overlaps z) at 2U. Peak 3U: greedy by
 * size finds the optimum here because it places z before the small ones box it in (placed in
 * arrival order, x at 0 and y at 1U would leave z no 2U gap below 2U: first fit in time order
 * needs 4U). */
START_TEST(planner_places_large_first)
{
    gs_trace *t = gs_trace_new();
    uint32_t x = gs_trace_add_alloc(t, "torch", 0, U);
    uint32_t y = gs_trace_add_alloc(t, "torch", 0, U);
    gs_trace_add_free(t, x);
    uint32_t z = gs_trace_add_alloc(t, "torch", 0, 2 * U);
    gs_trace_add_free(t, y);
    uint32_t w = gs_trace_add_alloc(t, "torch", 0, U);
    gs_trace_add_free(t, z);
    gs_trace_add_free(t, w);
    gs_bound *b = bound_of(t);
    ck_assert_uint_eq(b->lower_bound_bytes, 3 * U);
    ck_assert_uint_eq(b->offline_bytes, 3 * U);
    gs_bound_free(b);
    gs_trace_free(t);
}
END_TEST

/* A deferred free ends its request's life at the free, not at the completion: an allocator
 * that synchronizes may reuse the memory at once (PyTorch's does before it gives up on a
 * request); an oom event (a request the recorded run failed and went past) needs no room; an
 * allocation never freed lives to the end. */
START_TEST(deferred_frees_oom_events_and_leaks)
{
    gs_trace *t = gs_trace_new();
    uint32_t a = gs_trace_add_alloc(t, "torch", 0, 2 * U);
    gs_trace_add_free_deferred(t, a);
    uint32_t c = gs_trace_add_alloc(t, "torch", 1, 3 * U); /* a pending: reusable on a sync */
    gs_trace_add_free_done(t, a);
    gs_trace_add_oom(t, "torch", 0, 40 * U);
    gs_trace_add_free(t, c);
    gs_trace_add_alloc(t, "torch", 0, U); /* never freed */
    gs_bound *b = bound_of(t);
    ck_assert_uint_eq(b->lower_bound_bytes, 3 * U);
    ck_assert_uint_eq(b->offline_bytes, 3 * U);
    gs_bound_free(b);
    gs_trace_free(t);
}
END_TEST

/* The bound is a promise about every allocator, capped ones included: requests freed with a
 * deferred completion that comes long after (a quarter of the frees here, completed 40 events
 * later) made it count pending memory as live, twice what PyTorch completes in once it is
 * capped (it synchronizes and reuses the pending blocks; a synthetic snapshot of 417k events
 * had a "bound" of 199 GiB and completed at 97 GiB). PyTorch completes at the lower bound
 * rounded up to its segments here, and never below the bound. */
START_TEST(capped_replays_respect_the_bound_with_deferred_frees)
{
    GError *err = NULL;
    gs_policy *p = gs_policy_new("pytorch", &err);
    gs_trace *t = gs_trace_new();
    uint32_t pending[64];
    size_t np = 0, first = 0;
    for (int i = 0; i < 400; i++) {
        uint32_t id = gs_trace_add_alloc(t, "torch", 0, 20 * MiB);
        if (i % 4 == 0) {
            gs_trace_add_free_deferred(t, id);
            pending[np++ % 64] = id;
            if (np - first > 10) gs_trace_add_free_done(t, pending[first++ % 64]);
        } else {
            gs_trace_add_free(t, id);
        }
    }
    while (first < np) gs_trace_add_free_done(t, pending[first++ % 64]);
    gs_bound *b = bound_of(t);
    ck_assert_uint_eq(b->lower_bound_bytes, 20 * MiB + (U - 20 * MiB % U) % U);
    gs_replay_opts o = {.device_total = 80 * GiB};
    gs_result res;
    ck_assert(gs_replay_run(t, p, &o, &res, &err));
    ck_assert(!res.oom); /* uncapped: the pending blocks pile up */
    ck_assert_uint_gt((uint64_t)res.stats.reserved_bytes[GS_STAT_ALL].peak,
                      8 * b->lower_bound_bytes);
    gs_result_clear(&res);
    for (uint64_t cap = b->lower_bound_bytes; cap <= 2 * b->lower_bound_bytes; cap += U) {
        o.capacity = cap;
        ck_assert(gs_replay_run(t, p, &o, &res, &err));
        bool ok = !res.oom;
        ck_assert_uint_ge(cap, b->lower_bound_bytes);
        gs_result_clear(&res);
        if (ok) break;
        ck_assert_uint_lt(cap, 2 * b->lower_bound_bytes); /* completes within twice the bound */
    }
    gs_bound_free(b);
    gs_trace_free(t);
    gs_policy_free(p);
}
END_TEST

/* Several devices: a bound each, the totals their sums (each device's memory is its own). */
START_TEST(per_device_and_totals)
{
    gs_trace *t = gs_trace_new();
    uint32_t a = gs_trace_add_alloc(t, "torch", 0, 3 * U);
    gs_trace_add_alloc(t, "torch", 0, 5 * U);
    t->ev[t->n - 1].device = 1;
    gs_trace_add_free(t, a);
    gs_trace_add_alloc(t, "torch", 0, 4 * U);
    t->ev[t->n - 1].device = 1;
    gs_bound *b = bound_of(t);
    ck_assert_uint_eq(b->n_devices, 2);
    ck_assert_uint_eq(gs_bound_device(b, 0)->lower_bound_bytes, 3 * U);
    ck_assert_uint_eq(gs_bound_device(b, 1)->lower_bound_bytes, 9 * U);
    ck_assert_uint_eq(gs_bound_device(b, 1)->offline_bytes, 9 * U);
    ck_assert_uint_eq(b->lower_bound_bytes, 12 * U);
    ck_assert_uint_eq(b->offline_bytes, 12 * U);
    ck_assert_ptr_null(gs_bound_device(b, 7));
    /* and every replay result carries it, its devices' results their own */
    GError *err = NULL;
    gs_policy *p = gs_policy_new("pytorch", &err);
    gs_replay_opts o = {.device_total = 80 * GiB};
    gs_result r;
    ck_assert(gs_replay_run(t, p, &o, &r, &err));
    ck_assert_uint_eq(r.lower_bound_bytes, 12 * U);
    ck_assert_uint_eq(r.offline_bytes, 12 * U);
    ck_assert_uint_eq(r.devices[0].lower_bound_bytes, 3 * U);
    ck_assert_uint_eq(r.devices[1].offline_bytes, 9 * U);
    gs_result_clear(&r);
    gs_policy_free(p);
    gs_bound_free(b);
    gs_trace_free(t);
}
END_TEST

/* Random traces: the planner is never below the bound, never above the sum of every request,
 * and no policy's replay reserves less than the bound at its peak. */
START_TEST(random_traces_respect_the_bound)
{
    GRand *r = g_rand_new_with_seed(16);
    GError *err = NULL;
    gs_policy *p = gs_policy_new("pytorch", &err);
    for (int k = 0; k < 40; k++) {
        gs_trace *t = gs_trace_new();
        uint32_t live[32];
        int n = 0;
        uint64_t sum = 0;
        for (int i = 0; i < 300; i++) {
            if (n && (n == 32 || g_rand_boolean(r))) {
                int j = g_rand_int_range(r, 0, n);
                gs_trace_add_free(t, live[j]);
                live[j] = live[--n];
            } else {
                uint64_t sz = (uint64_t)g_rand_int_range(r, 1, 8 << 20);
                sum += (sz + 511) / 512 * 512;
                live[n++] = gs_trace_add_alloc(t, "torch", 0, sz);
            }
        }
        gs_bound *b = bound_of(t);
        ck_assert_uint_le(b->offline_bytes, (sum + U - 1) / U * U);
        gs_replay_opts o = {.device_total = 80 * GiB};
        gs_result res;
        ck_assert(gs_replay_run(t, p, &o, &res, &err));
        ck_assert_uint_ge((uint64_t)res.stats.reserved_bytes[GS_STAT_ALL].peak, b->lower_bound_bytes);
        ck_assert_uint_eq(res.lower_bound_bytes, b->lower_bound_bytes);
        gs_result_clear(&res);
        gs_bound_free(b);
        gs_trace_free(t);
    }
    gs_policy_free(p);
    g_rand_free(r);
}
END_TEST

/* More requests live at once than greedy by size can afford (6000 live throughout: 18 million
 * overlapping pairs, past its budget, where it used to report 0): the planner still gives a
 * layout. The 6000 (3 MiB) meet everything, so they are the band at the bottom, and the 1 MiB
 * requests that come and go one at a time share one place above it: 4 MiB, the bound. */
/* A trace read from a file comes with its peak of live bytes, summed by the reader as it
 * appended the events (gs_trace_read_peak_live), and a replay's bound takes it instead of a
 * pass: the same figures as the pass over the same events built in code, which has no reader's
 * tally, on random traces with deferred frees, oom events, requests past the largest device and
 * (some) a second device; as text, and as binary where one device. Also which readings carry
 * it (one device's: a deferred free counts at the free, so a text trace's free_done, which its
 * reader settles at the end, changes nothing) and whether a trace has pool events, answered
 * from the tally. */
static gs_trace *saved_and_read(const gs_trace *t, const char *dir, const char *name)
{
    char *path = g_build_filename(dir, name, NULL);
    GError *err = NULL;
    ck_assert_msg(gs_trace_save(t, path, &err), "%s", err ? err->message : "");
    gs_trace *back = gs_trace_load(path, 0, NULL, NULL, &err);
    ck_assert_msg(back != NULL, "%s", err ? err->message : "");
    g_free(path);
    return back;
}

static void same_bound(const gs_bound *a, const gs_bound *b)
{
    ck_assert_uint_eq(a->n_devices, b->n_devices);
    ck_assert_uint_eq(a->peak_live_bytes, b->peak_live_bytes);
    ck_assert_uint_eq(a->lower_bound_bytes, b->lower_bound_bytes);
    ck_assert_uint_eq(a->offline_bytes, b->offline_bytes);
    for (size_t d = 0; d < a->n_devices; d++) {
        ck_assert_uint_eq(a->devices[d].device, b->devices[d].device);
        ck_assert_uint_eq(a->devices[d].peak_live_bytes, b->devices[d].peak_live_bytes);
    }
}

START_TEST(read_traces_carry_their_peak)
{
    GRand *r = g_rand_new_with_seed(1515);
    char *dir = g_dir_make_tmp("gs-bound-XXXXXX", NULL);
    ck_assert_ptr_nonnull(dir);
    for (int k = 0; k < 60; k++) {
        gs_trace *t = gs_trace_new();
        uint32_t live[24], pending[24];
        int n = 0, np = 0;
        gboolean deferred_ok = k % 3 != 0, two_devices = k % 5 == 4;
        for (int i = 0; i < 400; i++) {
            int what = g_rand_int_range(r, 0, 10);
            if (np && (np == 24 || what == 0)) {
                int j = g_rand_int_range(r, 0, np);
                gs_trace_add_free_done(t, pending[j]);
                pending[j] = pending[--np];
            } else if (n && (n == 24 || what < 5)) {
                int j = g_rand_int_range(r, 0, n);
                if (deferred_ok && what == 1 && np < 24) {
                    gs_trace_add_free_deferred(t, live[j]);
                    pending[np++] = live[j];
                } else {
                    gs_trace_add_free(t, live[j]);
                }
                live[j] = live[--n];
            } else if (what == 9) {
                gs_trace_add_oom(t, "torch", 0, (uint64_t)g_rand_int_range(r, 1, 1 << 30));
            } else {
                uint64_t sz = what == 8 && k % 2 ? G_MAXUINT64 - (uint64_t)i
                                                 : (uint64_t)g_rand_int_range(r, 1, 64 << 20);
                live[n++] = gs_trace_add_alloc(t, "torch", (uint64_t)(i % 3), sz);
                if (two_devices && i % 2) t->ev[t->n - 1].device = 1;
            }
        }
        while (np) gs_trace_add_free_done(t, pending[--np]);
        gs_bound *built = gs_bound_compute(t);
        uint64_t peak;
        ck_assert(!gs_trace_read_peak_live(t, &peak)); /* built in code: no reader's tally */
        ck_assert(!gs_trace_has_pools(t));

        gs_trace *text = saved_and_read(t, dir, "t.gstrace");
        gs_bound *bt = gs_bound_compute(text);
        same_bound(built, bt);
        ck_assert(gs_trace_read_peak_live(text, &peak) == !two_devices);
        if (!two_devices) ck_assert_uint_eq(peak, built->peak_live_bytes);
        ck_assert(!gs_trace_has_pools(text));
        if (!two_devices) {
            gs_trace *bin = saved_and_read(t, dir, "t.gsbin");
            gs_bound *bb = gs_bound_compute(bin);
            same_bound(built, bb);
            ck_assert(gs_trace_read_peak_live(bin, &peak));
            ck_assert_uint_eq(peak, built->peak_live_bytes);
            ck_assert(!gs_trace_has_pools(bin));
            gs_bound_free(bb);
            gs_trace_free(bin);
        }
        gs_bound_free(bt);
        gs_trace_free(text);
        gs_bound_free(built);
        gs_trace_free(t);
    }
    /* pool events: counted by the reader, found by a pass in a built trace */
    gs_trace *t = gs_trace_new();
    gs_trace_add_pool(t, GS_OP_POOL_BEGIN, 0, 7, false);
    gs_trace_add_free(t, gs_trace_add_alloc(t, "torch", 0, 4096));
    gs_trace_add_pool(t, GS_OP_POOL_END, 0, 7, false);
    gs_trace_add_pool(t, GS_OP_POOL_RELEASE, 0, 7, false);
    ck_assert(gs_trace_has_pools(t));
    gs_trace *text = saved_and_read(t, dir, "p.gstrace");
    ck_assert(gs_trace_has_pools(text));
    gs_trace_free(text);
    gs_trace_free(t);
    char *files[] = {"t.gstrace", "t.gsbin", "p.gstrace"};
    for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
        char *path = g_build_filename(dir, files[i], NULL);
        g_remove(path);
        g_free(path);
    }
    g_rmdir(dir);
    g_free(dir);
    g_rand_free(r);
}
END_TEST

START_TEST(many_live_still_planned)
{
    gs_trace *t = gs_trace_new();
    for (int i = 0; i < 6000; i++) gs_trace_add_alloc(t, "torch", 0, 512);
    for (int i = 0; i < 1000; i++) gs_trace_add_free(t, gs_trace_add_alloc(t, "torch", 0, MiB));
    gs_bound *b = bound_of(t);
    ck_assert_uint_eq(b->lower_bound_bytes, 4 * MiB);
    ck_assert_uint_eq(b->offline_bytes, 4 * MiB);
    gs_bound_free(b);
    gs_trace_free(t);
}
END_TEST

/* Random request sets, every planner: each layout is feasible (no two requests live at once
 * share an address), its peak is its highest end and no less than the most bytes live at once,
 * and auto is no worse than either heuristic alone. Some requests live long (the band). */
START_TEST(random_layouts_are_feasible)
{
    GRand *r = g_rand_new_with_seed(1616);
    const gs_plan_method ms[] = {GS_PLAN_GREEDY, GS_PLAN_FIRST_FIT, GS_PLAN_BANDED, GS_PLAN_AUTO};
    for (int k = 0; k < 60; k++) {
        size_t n = (size_t)g_rand_int_range(r, 1, 300);
        uint64_t horizon = (uint64_t)g_rand_int_range(r, 2, 1000);
        gs_plan_req *q = g_new(gs_plan_req, n);
        for (size_t i = 0; i < n; i++) {
            bool lng = g_rand_int_range(r, 0, 10) == 0;
            uint64_t s = lng ? 0 : (uint64_t)g_rand_int_range(r, 0, (gint32)horizon - 1);
            uint64_t e = lng ? horizon : (uint64_t)g_rand_int_range(r, (gint32)s + 1, (gint32)horizon + 1);
            q[i] = (gs_plan_req){.start = s, .end = e, .size = 512 * (uint64_t)g_rand_int_range(r, 1, 64)};
        }
        uint64_t load = 0; /* the most bytes live at once: at some request's start */
        for (size_t i = 0; i < n; i++) {
            uint64_t l = 0;
            for (size_t j = 0; j < n; j++)
                if (q[j].start <= q[i].start && q[i].start < q[j].end) l += q[j].size;
            load = MAX(load, l);
        }
        uint64_t peak[4];
        for (int m = 0; m < 4; m++) {
            for (size_t i = 0; i < n; i++) q[i].off = UINT64_MAX;
            peak[m] = gs_bound_plan(q, n, ms[m]);
            uint64_t hi = 0;
            size_t collide = 0; /* counted here, asserted once: a check per pair is slow */
            for (size_t i = 0; i < n; i++) {
                hi = MAX(hi, q[i].off + q[i].size);
                for (size_t j = i + 1; j < n; j++) {
                    bool meet = q[i].start < q[j].end && q[j].start < q[i].end;
                    bool share = q[i].off < q[j].off + q[j].size && q[j].off < q[i].off + q[i].size;
                    collide += meet && share;
                }
            }
            ck_assert_msg(collide == 0, "set %d planner %d: %zu pairs collide", k, m, collide);
            ck_assert_uint_eq(peak[m], hi);
            ck_assert_uint_ge(peak[m], load);
        }
        ck_assert_uint_le(peak[3], MIN(peak[0], peak[1]));
        g_free(q);
    }
    g_rand_free(r);
}
END_TEST

/* Greedy by size is one layout, whichever way the planner finds each place (bound.c picks by
 * the overlap): every request, largest first (then earliest, then first given), at the lowest
 * offset where it meets none placed before it whose lifetime meets its own. Checked against
 * that rule run by brute force, on sets crowded in time (hundreds of requests beside each one:
 * the occupancy index) and sparse ones (a few dozen: the enumeration). */
typedef struct {
    uint64_t off, top;
} span;

static int cmp_span_off(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static uint64_t brute_greedy(const gs_plan_req *q, size_t n, uint64_t *off)
{
    size_t *order = g_new(size_t, n);
    bool *placed = g_new0(bool, n);
    for (size_t i = 0; i < n; i++) order[i] = i;
    for (size_t i = 1; i < n; i++) /* insertion sort: largest, earliest, first */
        for (size_t k = i; k > 0; k--) {
            const gs_plan_req *a = &q[order[k - 1]], *b = &q[order[k]];
            bool after = a->size < b->size || (a->size == b->size && a->start > b->start);
            if (!after) break;
            size_t t = order[k];
            order[k] = order[k - 1], order[k - 1] = t;
        }
    uint64_t top = 0;
    span *in_way = g_new(span, n);
    for (size_t k = 0; k < n; k++) {
        const gs_plan_req *x = &q[order[k]];
        size_t m = 0; /* the placed ones beside x, by offset; y climbs past each in the way */
        for (size_t j = 0; j < n; j++)
            if (placed[j] && q[j].start < x->end && x->start < q[j].end)
                in_way[m++] = (span){off[j], off[j] + q[j].size};
        qsort(in_way, m, sizeof *in_way, cmp_span_off);
        uint64_t y = 0;
        for (size_t j = 0; j < m && in_way[j].off < y + x->size; j++) y = MAX(y, in_way[j].top);
        off[order[k]] = y;
        placed[order[k]] = true;
        top = MAX(top, y + x->size);
    }
    g_free(in_way);
    g_free(placed);
    g_free(order);
    return top;
}

START_TEST(greedy_is_one_layout)
{
    GRand *r = g_rand_new_with_seed(1818);
    int past = 0; /* crowded sets past the index's threshold (bound.c: 128 pairs a request) */
    for (int k = 0; k < 40; k++) {
        bool crowded = k % 2 == 0;
        size_t n = (size_t)g_rand_int_range(r, crowded ? 300 : 1, crowded ? 900 : 400);
        uint64_t horizon = crowded ? (uint64_t)g_rand_int_range(r, 2, 8) : 4 * n + 2;
        gs_plan_req *q = g_new(gs_plan_req, n);
        uint64_t *want = g_new(uint64_t, n);
        for (size_t i = 0; i < n; i++) {
            uint64_t s = (uint64_t)g_rand_int_range(r, 0, (gint32)horizon - 1);
            uint64_t e = crowded ? (uint64_t)g_rand_int_range(r, (gint32)s + 1, (gint32)horizon + 1)
                                 : s + (uint64_t)g_rand_int_range(r, 1, 40);
            /* few sizes, so ties are broken by start and by index */
            q[i] = (gs_plan_req){.start = s,
                                 .end = e,
                                 .size = 512 * (uint64_t)g_rand_int_range(r, 1, 6)};
        }
        uint64_t top = brute_greedy(q, n, want), pairs = 0;
        for (size_t i = 0; i < n; i++)
            for (size_t j = i + 1; j < n; j++)
                pairs += q[i].start < q[j].end && q[j].start < q[i].end;
        past += pairs / n >= 128;
        ck_assert_uint_eq(gs_bound_plan(q, n, GS_PLAN_GREEDY), top);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(q[i].off == want[i],
                          "set %d (%s, %zu requests): request %zu at %" G_GUINT64_FORMAT
                          ", greedy by size puts it at %" G_GUINT64_FORMAT,
                          k, crowded ? "crowded" : "sparse", n, i, q[i].off, want[i]);
        g_free(want);
        g_free(q);
    }
    ck_assert_int_ge(past, 5);
    g_rand_free(r);
}
END_TEST

static Suite *bound_suite(void)
{
    Suite *s = suite_create("bound");
    TCase *tc = tcase_create("bound");
    tcase_add_test(tc, empty_trace_is_zero);
    tcase_add_test(tc, rounds_the_peak_not_each_request);
    tcase_add_test(tc, huge_requests_count_as_the_largest_device);
    tcase_add_test(tc, planner_reuses_a_dead_requests_place);
    tcase_add_test(tc, planner_places_large_first);
    tcase_add_test(tc, deferred_frees_oom_events_and_leaks);
    tcase_add_test(tc, capped_replays_respect_the_bound_with_deferred_frees);
    tcase_add_test(tc, per_device_and_totals);
    tcase_add_test(tc, random_traces_respect_the_bound);
    tcase_add_test(tc, read_traces_carry_their_peak);
    tcase_add_test(tc, many_live_still_planned);
    tcase_add_test(tc, random_layouts_are_feasible);
    tcase_add_test(tc, greedy_is_one_layout);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return run_suite(bound_suite()); }
