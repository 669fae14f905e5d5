/* test_probe.c - replays at a cap from checkpoints of the uncapped replay (sim/probe.h): each is
 * the replay from the first event, to the event it stopped at and every figure it reports, for
 * every policy that says it is blind to the limit; and whatif's answers are the same with them
 * as with every replay from the start.
 */
#include <check.h>
#include <string.h>

#include "probe.h"
#include "testutil.h"
#include "whatif.h"

#define DEVICE (80 * GiB)

/* Long enough for checkpoints (GS_PROBE_MIN_EVENTS), with its peak rising through its first
 * half: steps of 16 activations of varying sizes, freed at the step's end, beside a cache that
 * grows by a larger block every tenth step; the cache is freed at the end. */
static gs_trace *rising_trace(gs_bound **bound)
{
    gs_trace *t = gs_trace_new();
    GArray *cache = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    uint32_t state = 12345;
    for (int s = 0; s < 2100; s++) {
        uint32_t act[16];
        for (int k = 0; k < 16; k++) {
            state = state * 1103515245u + 12345u;
            uint64_t size = (uint64_t)((state >> 8) % 64 + 1) * MiB / 4 * (uint64_t)(1 + s % 5);
            act[k] = gs_trace_add_alloc(t, "torch", 0, size);
        }
        if (s < 1000 && s % 10 == 0) {
            uint32_t c = gs_trace_add_alloc(t, "torch", 0, (uint64_t)(s / 10 + 1) * MiB);
            g_array_append_val(cache, c);
        }
        for (int k = 0; k < 16; k++) gs_trace_add_free(t, act[k]);
    }
    for (guint k = 0; k < cache->len; k++) gs_trace_add_free(t, g_array_index(cache, uint32_t, k));
    g_array_free(cache, TRUE);
    ck_assert_uint_ge(t->n, GS_PROBE_MIN_EVENTS);
    /* once for every replay: one without it plans it again (sim/bound.h), 20x the replay here */
    *bound = gs_bound_compute(t);
    return t;
}

/* One of each way a growth meets the limit: a segment, an expandable segment (which checks more
 * than it maps), a pool's own growth, a stitched pool; and garbage collection, whose threshold
 * is a fraction of the limit (gs_policy_ops.limit_unread). (PyTorch's other settings grow as
 * the default does.) */
static const char *const blind[] = {
    "pytorch", "pytorch:expandable_segments:True",    "cupy",
    "tlsf",    "stitch:headroom:0,max_handle_frac:0", "pytorch:garbage_collection_threshold:0.8",
};

/* Every figure a probe reports, against the replay of the whole trace at that cap. */
static void same_as_full(const gs_trace *t, const gs_bound *bound, const gs_policy *p, uint64_t cap,
                         const gs_probe_result *a)
{
    gs_replay_opts o = {.capacity = cap, .device_total = DEVICE, .bound = bound};
    gs_result r;
    ck_assert(gs_replay_run(t, p, &o, &r, NULL));
    ck_assert_msg(a->completes == (!r.oom && r.error == GS_OK), "%s at %" G_GUINT64_FORMAT, p->spec,
                  cap);
    ck_assert_int_eq(a->oom, r.oom);
    if (r.oom) ck_assert_uint_eq(a->first_oom_event, r.first_oom_event);
    ck_assert_uint_eq(a->start + a->events, r.events);
    ck_assert_int_eq(a->peak_reserved, r.stats.reserved_bytes[GS_STAT_ALL].peak);
    ck_assert_uint_eq(a->device_allocs, r.stats.num_device_alloc);
    ck_assert_uint_eq(a->retries, r.stats.num_alloc_retries);
    gs_result_clear(&r);
}

START_TEST(probes_from_checkpoints_are_full_replays)
{
    gs_bound *bound;
    gs_trace *t = rising_trace(&bound);
    gs_policy *p = gs_policy_new(blind[_i], NULL);
    ck_assert(gs_policy_blind_to_limit(p));
    gs_replay_opts o = {.device_total = DEVICE, .bound = bound};
    gs_result u;
    gs_probes *pr = gs_probes_new(t, p, &o, true, &u);
    ck_assert(!u.oom);
    uint64_t lo = (uint64_t)u.stats.allocated_bytes[GS_STAT_ALL].peak / (2 * MiB) * (2 * MiB);
    uint64_t peak = (uint64_t)u.stats.reserved_bytes[GS_STAT_ALL].peak;
    uint64_t hi = (peak / (2 * MiB) + 1) * (2 * MiB);
    gs_result_clear(&u);
    ck_assert_uint_eq(gs_probes_plan(pr, lo, hi), t->n);
    ck_assert_uint_gt(gs_probes_checkpoints(pr), 0);
    unsigned from_checkpoint = 0, fails = 0;
    for (unsigned j = 0; j <= 8; j++) {
        uint64_t cap = (lo - 64 * MiB + (hi - lo + 64 * MiB) / 8 * j) / (2 * MiB) * (2 * MiB);
        gs_probe_result a;
        gs_probes_run(pr, cap, &a);
        if (!a.replayed) {
            ck_assert(cap >= peak && a.completes);
            continue;
        }
        same_as_full(t, bound, p, cap, &a);
        from_checkpoint += a.start > 0;
        fails += !a.completes;
    }
    ck_assert_msg(from_checkpoint > 0, "%s: no probe started from a checkpoint", p->spec);
    ck_assert_uint_gt(fails, 0);
    gs_probe_result a;
    /* never binds: no replay (just above the peak, unless garbage collection's threshold asks
     * for more; twice the peak for every setting) */
    if (!strstr(p->spec, "garbage")) {
        gs_probes_run(pr, hi, &a);
        ck_assert(!a.replayed && a.completes);
    }
    gs_probes_run(pr, 2 * hi, &a);
    ck_assert(!a.replayed && a.completes);
    gs_probes_free(pr);
    gs_policy_free(p);
    gs_bound_free(bound);
    gs_trace_free(t);
}
END_TEST

/* A setting that reads the limit from the start (an arena sized from it, a growth judged
 * against it, handles sized from it) has no checkpoints, and every probe replays from the
 * first event. */
START_TEST(settings_reading_the_limit_replay_from_the_start)
{
    static const char *const reads[] = {"rmm-arena", "stitch", "stitch:headroom:0"};
    gs_bound *bound;
    gs_trace *t = rising_trace(&bound);
    for (size_t k = 0; k < G_N_ELEMENTS(reads); k++) {
        gs_policy *p = gs_policy_new(reads[k], NULL);
        ck_assert_msg(!gs_policy_blind_to_limit(p), "%s", reads[k]);
        gs_replay_opts o = {.device_total = DEVICE, .bound = bound};
        gs_result u;
        gs_probes *pr = gs_probes_new(t, p, &o, true, &u);
        uint64_t peak = (uint64_t)u.stats.reserved_bytes[GS_STAT_ALL].peak;
        gs_result_clear(&u);
        ck_assert_uint_eq(gs_probes_plan(pr, peak / 2, peak), 0);
        gs_probe_result a;
        gs_probes_run(pr, peak - peak / 8, &a);
        ck_assert(a.replayed);
        ck_assert_uint_eq(a.start, 0);
        same_as_full(t, bound, p, peak - peak / 8, &a);
        gs_probes_free(pr);
        gs_policy_free(p);
    }
    gs_bound_free(bound);
    gs_trace_free(t);
}
END_TEST

/* whatif's answers, searched in a process per setting with checkpoints, are those of every
 * replay made from the start; and they cost fewer events. */
START_TEST(whatif_answers_the_same_from_checkpoints)
{
    gs_bound *bound;
    gs_trace *t = rising_trace(&bound);
    const char *const none[] = {NULL};
    GPtrArray *a = gs_whatif_candidates(NULL, none, NULL),
              *b = gs_whatif_candidates(NULL, none, NULL);
    /* three settings, one of them expandable segments, are enough and cost a third */
    g_ptr_array_remove_range(a, 3, a->len - 3);
    g_ptr_array_remove_range(b, 3, b->len - 3);
    gs_whatif_opts o = {.device_total = DEVICE, .jobs = 2};
    gs_whatif_run(a, t, &o);
    o.full_replays = true;
    gs_whatif_run(b, t, &o);
    uint64_t ea = 0, eb = 0;
    for (guint i = 0; i < a->len; i++) {
        const gs_whatif_row *x = a->pdata[i], *y = b->pdata[i];
        ck_assert_str_eq(x->pol->spec, y->pol->spec);
        ck_assert_int_eq(x->search.found, y->search.found);
        ck_assert_uint_eq(x->search.min_capacity, y->search.min_capacity);
        ck_assert_int_eq(x->search.below_fails, y->search.below_fails);
        ck_assert_uint_eq(x->search.fails_above, y->search.fails_above);
        ck_assert_int_eq(x->at_cap.oom, y->at_cap.oom);
        ck_assert_int_eq(x->at_cap.stats.reserved_bytes[GS_STAT_ALL].peak,
                         y->at_cap.stats.reserved_bytes[GS_STAT_ALL].peak);
        ck_assert_uint_eq(x->at_cap.stats.num_device_alloc, y->at_cap.stats.num_device_alloc);
        /* with no cap, the replay at the cap is the search's uncapped replay too (replays
         * counts those besides the search's probes: 2 before) */
        ck_assert_uint_eq(y->replays, 1);
        ea += x->replayed_events;
        eb += y->replayed_events;
    }
    ck_assert_uint_lt(ea, eb / 4 * 3);
    gs_whatif_rows_free(a);
    gs_whatif_rows_free(b);
    gs_bound_free(bound);
    gs_trace_free(t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("probe");
    TCase *tc = tcase_create("probe");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, probes_from_checkpoints_are_full_replays, 0, G_N_ELEMENTS(blind));
    tcase_add_test(tc, settings_reading_the_limit_replay_from_the_start);
    tcase_add_test(tc, whatif_answers_the_same_from_checkpoints);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
