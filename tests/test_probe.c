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

/* Long enough for checkpoints too, its sizes less regular: steps of 8-20 activations of mixed
 * sizes (some not a whole page), a block kept every few steps over the first 60%, and now and
 * then a middle-sized block that lives for a while. Under stitch's growth ahead (its room
 * under a cap is the limit less the growth) the rising trace above replays as the uncapped
 * replay would; this one did not. */
static gs_trace *mixed_trace(gs_bound **bound)
{
    gs_trace *t = gs_trace_new();
    GArray *keep = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    GArray *mid = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    uint64_t st = 1;
#define RAND(n) ((st = st * 6364136223846793005u + 1442695040888963407u) >> 33) % (n)
    for (int s = 0; s < 2400; s++) {
        uint32_t act[20];
        int n = 8 + (int)RAND(13);
        uint64_t mult = 1 + (uint64_t)s % (3 + 2 * RAND(3));
        for (int k = 0; k < n; k++) {
            uint64_t odd = RAND(3) == 0 ? 0 : RAND(3) == 0 ? 512 : 1 + RAND(MiB);
            act[k] = gs_trace_add_alloc(t, "torch", 0, (1 + RAND(64)) * MiB / 4 * mult + odd);
        }
        if (s < 1440 && s % (5 + (int)RAND(11)) == 0) {
            uint32_t a =
                gs_trace_add_alloc(t, "torch", 0, (uint64_t)(s / 10 + 1) * MiB + RAND(4) * MiB / 2);
            g_array_append_val(keep, a);
        }
        if (RAND(10) == 0) {
            uint32_t a = gs_trace_add_alloc(t, "torch", 0, (1 + RAND(200)) * MiB);
            g_array_append_val(mid, a);
        }
        if (mid->len && RAND(12) == 0) {
            guint k = (guint)RAND(mid->len);
            gs_trace_add_free(t, g_array_index(mid, uint32_t, k));
            g_array_remove_index(mid, k);
        }
        for (int k = n; k-- > 0;) gs_trace_add_free(t, act[k]);
    }
#undef RAND
    for (guint k = 0; k < keep->len; k++) gs_trace_add_free(t, g_array_index(keep, uint32_t, k));
    for (guint k = 0; k < mid->len; k++) gs_trace_add_free(t, g_array_index(mid, uint32_t, k));
    g_array_free(keep, TRUE);
    g_array_free(mid, TRUE);
    ck_assert_uint_ge(t->n, GS_PROBE_MIN_EVENTS);
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
    ck_assert_msg(a->peak_reserved == r.stats.reserved_bytes[GS_STAT_ALL].peak,
                  "%s at %" G_GUINT64_FORMAT ": peak reserved %" G_GINT64_FORMAT
                  " (%s), %" G_GINT64_FORMAT " replayed from the first event",
                  p->spec, cap, a->peak_reserved, a->replayed ? "probe" : "no replay",
                  r.stats.reserved_bytes[GS_STAT_ALL].peak);
    if (!a->replayed) { /* (the uncapped replay's: no counts) */
        gs_result_clear(&r);
        return;
    }
    ck_assert_uint_eq(a->start + a->events, r.events);
    ck_assert_uint_eq(a->device_allocs, r.stats.num_device_alloc);
    ck_assert_uint_eq(a->retries, r.stats.num_alloc_retries);
    gs_result_clear(&r);
}

START_TEST(probes_from_checkpoints_are_full_replays)
{
    gs_bound *bound;
    /* each setting on each trace: _i / G_N_ELEMENTS(blind) says which trace */
    gs_trace *t = _i < (int)G_N_ELEMENTS(blind) ? rising_trace(&bound) : mixed_trace(&bound);
    gs_policy *p = gs_policy_new(blind[_i % G_N_ELEMENTS(blind)], NULL);
    ck_assert(gs_policy_blind_to_limit(p));
    gs_replay_opts o = {.device_total = DEVICE, .bound = bound};
    gs_result u;
    gs_probes *pr = gs_probes_new(t, p, &o, true, &u);
    ck_assert(!u.oom);
    uint64_t lo = (uint64_t)u.stats.allocated_bytes[GS_STAT_ALL].peak / (2 * MiB) * (2 * MiB);
    uint64_t peak = (uint64_t)u.stats.reserved_bytes[GS_STAT_ALL].peak;
    uint64_t hi = (peak / (2 * MiB) + 1) * (2 * MiB);
    gs_result_clear(&u);
    /* the trunk ends at its last checkpoint: the probes below go on from there alone */
    size_t trunk = gs_probes_plan(pr, lo, hi);
    ck_assert_uint_gt(trunk, 0);
    ck_assert_uint_lt(trunk, t->n);
    ck_assert_uint_gt(gs_probes_checkpoints(pr), 0);
    unsigned from_checkpoint = 0, fails = 0;
    /* caps over the search's range, then past the peak (where some setting's growths ahead
     * still meet the cap), some not whole pages: each as the full replay, the ones that need
     * no replay too */
    for (unsigned j = 0; j <= 24; j++) {
        uint64_t cap = j <= 16 ? lo - 64 * MiB + (hi - lo + 64 * MiB) / 16 * j
                               : hi + (uint64_t)(j - 16) * 24 * MiB;
        if (j % 2) cap = cap / (2 * MiB) * (2 * MiB);
        gs_probe_result a;
        gs_probes_run(pr, cap, &a);
        if (!a.replayed) ck_assert(cap >= peak && a.completes);
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

/* The figures of two replays of the whole trace at different caps, all alike. */
static void same_replay(const gs_result *a, const gs_result *b, const char *spec, uint64_t cap)
{
    ck_assert_msg(a->oom == b->oom && a->events == b->events &&
                      (!a->oom || a->first_oom_event == b->first_oom_event),
                  "%s: the replay at %" G_GUINT64_FORMAT " went otherwise", spec, cap);
    ck_assert_int_eq(a->error, b->error);
    ck_assert_int_eq(a->stats.reserved_bytes[GS_STAT_ALL].peak,
                     b->stats.reserved_bytes[GS_STAT_ALL].peak);
    ck_assert_int_eq(a->stats.allocated_bytes[GS_STAT_ALL].peak,
                     b->stats.allocated_bytes[GS_STAT_ALL].peak);
    ck_assert_uint_eq(a->stats.num_device_alloc, b->stats.num_device_alloc);
    ck_assert_uint_eq(a->stats.num_device_free, b->stats.num_device_free);
    ck_assert_uint_eq(a->stats.num_alloc_retries, b->stats.num_alloc_retries);
    ck_assert_uint_eq(a->stats.num_ooms, b->stats.num_ooms);
    ck_assert_double_eq(gs_devcalls_total_us(&a->calls), gs_devcalls_total_us(&b->calls));
}

/* A capped replay says which caps replay as it did (gs_result.same_lo), and whatif's search
 * answers those without replaying them: replays at both ends of each span (or at twice its
 * start, where it has no end) and between them are this one in every figure. Some spans are
 * wider than the search's step (else the test proves nothing), and under garbage collection some
 * replay's collection acted (segments released with no retry), where what it frees depends on its
 * threshold, a fraction of the cap. */
START_TEST(a_capped_replay_holds_for_the_caps_it_says)
{
    gs_bound *bound;
    gs_trace *t = rising_trace(&bound);
    gs_policy *p = gs_policy_new(blind[_i], NULL);
    gs_replay_opts o = {.device_total = DEVICE, .bound = bound};
    gs_result u;
    ck_assert(gs_replay_run(t, p, &o, &u, NULL));
    ck_assert_uint_eq(u.same_hi, 0); /* no cap: nothing said */
    uint64_t lo = (uint64_t)u.stats.allocated_bytes[GS_STAT_ALL].peak / (2 * MiB) * (2 * MiB);
    uint64_t hi = ((uint64_t)u.stats.reserved_bytes[GS_STAT_ALL].peak / (2 * MiB) + 1) * (2 * MiB);
    gs_result_clear(&u);
    unsigned wide = 0, collected = 0;
    for (unsigned j = 0; j <= 8; j++) {
        uint64_t cap = (lo - 64 * MiB + (hi - lo + 64 * MiB) / 8 * j) / (2 * MiB) * (2 * MiB);
        gs_result r;
        o.capacity = cap;
        ck_assert(gs_replay_run(t, p, &o, &r, NULL));
        ck_assert_msg(r.same_lo <= cap && cap < r.same_hi, "%s at %" G_GUINT64_FORMAT, p->spec,
                      cap);
        wide += r.same_hi - r.same_lo > 2 * MiB;
        collected += r.stats.num_device_free > 0 && !r.stats.num_alloc_retries;
        /* its ends and caps spread between them */
        uint64_t top = r.same_hi == UINT64_MAX ? 2 * r.same_lo : r.same_hi - 1;
        for (unsigned e = 0; e <= 6; e++) {
            uint64_t c = r.same_lo + (top - r.same_lo) / 6 * e +
                         (e == 6 ? (top - r.same_lo) % 6 : 0);
            if (c == cap || !c) continue;
            gs_result x;
            o.capacity = c;
            ck_assert(gs_replay_run(t, p, &o, &x, NULL));
            same_replay(&r, &x, p->spec, c);
            gs_result_clear(&x);
        }
        gs_result_clear(&r);
    }
    /* (stitch's growths ahead read the room left under the cap: its spans are the cap alone) */
    if (!strstr(p->spec, "stitch"))
        ck_assert_msg(wide > 0, "%s: no span wider than a step", p->spec);
    if (strstr(p->spec, "garbage")) ck_assert_uint_gt(collected, 0);
    gs_policy_free(p);
    gs_bound_free(bound);
    gs_trace_free(t);
}
END_TEST

/* Garbage collection says for which caps it frees what it freed: a live 400 MiB block, cached
 * blocks X (100 MiB, the oldest), Y (100 MiB) and H (30 MiB, the youngest), then a 120 MiB
 * request that no cached block serves. Under a 700 MiB cap the threshold is 560 MiB of the
 * 630 reserved: one pass frees X, enough for any threshold of 530 MiB or more, caps from
 * 662.5 MiB; from 787.5 MiB the collection does nothing. At 655 MiB the request would fit
 * after one pass too (650 MiB), but the collection makes two, so the span must stop at 662.5. */
START_TEST(garbage_collection_says_its_caps)
{
    gs_trace *t = gs_trace_new();
    uint32_t x = gs_trace_add_alloc(t, "torch", 0, 100 * MiB);
    uint32_t y = gs_trace_add_alloc(t, "torch", 0, 100 * MiB);
    uint32_t h = gs_trace_add_alloc(t, "torch", 0, 30 * MiB);
    gs_trace_add_alloc(t, "torch", 0, 400 * MiB); /* (last: no collection before the request) */
    gs_trace_add_free(t, x);
    for (int k = 0; k < 13; k++) { /* ages: each request served from the large pool's cache */
        if (k == 10) gs_trace_add_free(t, y);
        gs_trace_add_free(t, h);
        h = gs_trace_add_alloc(t, "torch", 0, 30 * MiB);
    }
    gs_trace_add_free(t, h);
    gs_trace_add_alloc(t, "torch", 0, 120 * MiB);
    gs_policy *p = gs_policy_new("pytorch:garbage_collection_threshold:0.8", NULL);
    gs_replay_opts o = {.capacity = 700 * MiB, .device_total = DEVICE};
    gs_result r, a, b;
    ck_assert(gs_replay_run(t, p, &o, &r, NULL));
    ck_assert(!r.oom);
    ck_assert_uint_eq(r.stats.num_device_free, 1); /* X alone */
    ck_assert_uint_eq(r.same_lo, 1325 * MiB / 2);
    ck_assert_uint_eq(r.same_hi, 1575 * MiB / 2);
    o.capacity = r.same_lo;
    ck_assert(gs_replay_run(t, p, &o, &a, NULL));
    same_replay(&r, &a, p->spec, o.capacity);
    o.capacity = r.same_hi - 1;
    gs_result_clear(&a);
    ck_assert(gs_replay_run(t, p, &o, &a, NULL));
    same_replay(&r, &a, p->spec, o.capacity);
    o.capacity = 655 * MiB; /* two passes: X and Y */
    ck_assert(gs_replay_run(t, p, &o, &b, NULL));
    ck_assert(!b.oom);
    ck_assert_uint_eq(b.stats.num_device_free, 2);
    ck_assert(b.same_hi <= r.same_lo);
    gs_result_clear(&r);
    gs_result_clear(&a);
    gs_result_clear(&b);
    gs_policy_free(p);
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
    tcase_add_loop_test(tc, probes_from_checkpoints_are_full_replays, 0, 2 * G_N_ELEMENTS(blind));
    tcase_add_loop_test(tc, a_capped_replay_holds_for_the_caps_it_says, 0, G_N_ELEMENTS(blind));
    tcase_add_test(tc, garbage_collection_says_its_caps);
    tcase_add_test(tc, settings_reading_the_limit_replay_from_the_start);
    tcase_add_test(tc, whatif_answers_the_same_from_checkpoints);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
