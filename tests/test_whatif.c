/* test_whatif.c - gpusim whatif's engine: the bisection (exact on a threshold, honest on a
 * predicate that is not monotonic, made so on purpose), the candidates, and on the bundled
 * traces every minimum capacity checked by replays at it (completes) and one step below (fails).
 *
 * Usage: test_whatif TRACE_DATA_DIR (traces/data). */
#include <math.h>
#include <string.h>

#include "frontier.h"
#include "report.h"
#include "testutil.h"

static const char *data_dir;

/* A predicate in steps of 1: completes where ok_from <= c, except in [hole_lo, hole_hi). */
typedef struct {
    uint64_t ok_from, hole_lo, hole_hi, ok_below; /* ok_below: also fails at >= this (0: never) */
    /* say, as a replay does (gs_result.same_lo), the capacities that answer alike: the whole
     * stretch between the predicate's boundaries around c */
    bool spans;
    unsigned calls;
    uint64_t asked[256];  /* the capacities asked, in order (each is a whole replay) */
    uint64_t said[256][2]; /* the span each answer said */
    bool again;            /* one was asked twice, or within a span said before */
} pred;

static bool pred_probe(uint64_t c, void *ud, uint64_t same[2])
{
    pred *p = ud;
    for (unsigned i = 0; i < p->calls && i < G_N_ELEMENTS(p->asked); i++)
        p->again |= p->asked[i] == c || (p->said[i][0] <= c && c < p->said[i][1]);
    ck_assert(same[0] == c && same[1] == c + 1);
    if (p->spans) {
        const uint64_t bounds[] = {p->ok_from, p->hole_lo, p->hole_hi, p->ok_below};
        same[0] = 0, same[1] = UINT64_MAX;
        for (unsigned i = 0; i < G_N_ELEMENTS(bounds); i++) {
            if (!bounds[i]) continue;
            if (bounds[i] <= c) same[0] = MAX(same[0], bounds[i]);
            else same[1] = MIN(same[1], bounds[i]);
        }
    }
    if (p->calls < G_N_ELEMENTS(p->asked)) {
        p->asked[p->calls] = c;
        p->said[p->calls][0] = same[0], p->said[p->calls][1] = same[1];
    }
    p->calls++;
    if (p->ok_below && c >= p->ok_below) return false;
    if (c >= p->hole_lo && c < p->hole_hi) return false;
    return c >= p->ok_from;
}

/* The search over (0, 200] in steps of 1, with what every search must keep: each replay
 * counted, and no capacity replayed twice (each is a whole replay). */
static gs_whatif_search search(pred *p)
{
    gs_whatif_search s;
    gs_whatif_bisect(pred_probe, p, 0, 200, 1, &s);
    ck_assert_uint_eq(s.probes, p->calls);
    ck_assert_msg(!p->again, "a capacity replayed twice");
    return s;
}

START_TEST(bisect_finds_a_threshold_exactly)
{
    for (uint64_t thr = 1; thr <= 200; thr += 7) {
        pred p = {.ok_from = thr};
        gs_whatif_search s = search(&p);
        ck_assert(s.found);
        ck_assert_uint_eq(s.min_capacity, thr);
        ck_assert(s.below_fails);
        ck_assert_uint_eq(s.fails_above, 0);
        /* log2(200) + 1, grids and steps near the answer below and above */
        ck_assert_uint_le(s.probes, 1 + 8 + 2 * GS_WHATIF_GRID + 2 * GS_WHATIF_NEAR);
    }
}
END_TEST

/* A bisection started from a capacity likely to fail that does not (from): the step below an
 * answer found next to it is replayed, and the search goes on below it, to the threshold; from a
 * capacity that does fail, the same answer, every capacity replayed once. */
START_TEST(bisect_from_a_hint_that_is_wrong)
{
    for (uint64_t thr = 3; thr <= 150; thr += 7) {
        const uint64_t froms[] = {thr - 2, thr - 1, thr, thr + 1, thr + 30, 199, 200, 250};
        for (size_t i = 0; i < G_N_ELEMENTS(froms); i++) {
            pred p = {.ok_from = thr};
            gs_whatif_search s;
            gs_whatif_bisect_from(pred_probe, &p, 0, froms[i], 200, 1, &s);
            ck_assert_uint_eq(s.probes, p.calls);
            ck_assert_msg(!p.again, "a capacity replayed twice");
            ck_assert(s.found && s.below_fails);
            ck_assert_msg(s.min_capacity == thr,
                          "threshold %" G_GUINT64_FORMAT " from %" G_GUINT64_FORMAT
                          ": %" G_GUINT64_FORMAT,
                          thr, froms[i], s.min_capacity);
            ck_assert_uint_eq(s.fails_above, 0);
        }
    }
}
END_TEST

/* Predicates made not monotonic on purpose, each row one: the answer the search must give, and
 * the range its failure above the answer must fall in. */
static const struct {
    pred p;
    uint64_t min, fails_lo, fails_hi; /* fails_above in [fails_lo, fails_hi] */
    const char *why;
} not_monotonic[] = {
    {{.ok_from = 40, .hole_lo = 100, .hole_hi = 130}, 40, 100, 129,
     "completes from 40, fails again in [100, 130): answers 40, says a larger capacity failed"},
    {{.ok_from = 40, .hole_lo = 45, .hole_hi = 47}, 40, 46, 46,
     "a window two steps wide, five above the answer, between the grid's points: seen by the "
     "steps next to it (resnet50 under expandable segments completes from 5,640 MiB, fails at "
     "5,650)"},
    {{.ok_from = 44, .hole_lo = 46, .hole_hi = 48}, 44, 47, 47,
     "the bisection stops at the top of a narrow window ([46, 48): it answers 48), and only the "
     "steps below show that 44 and 45 complete"},
    {{.ok_from = 30, .ok_below = 180}, 30, 180, 200,
     "fails at the largest capacity but completes lower down"},
};

START_TEST(bisect_on_predicates_not_monotonic)
{
    pred p = not_monotonic[_i].p;
    gs_whatif_search s = search(&p);
    ck_assert_msg(s.found && s.min_capacity == not_monotonic[_i].min &&
                      s.fails_above >= not_monotonic[_i].fails_lo &&
                      s.fails_above <= not_monotonic[_i].fails_hi,
                  "%s: min %" G_GUINT64_FORMAT ", fails above at %" G_GUINT64_FORMAT,
                  not_monotonic[_i].why, s.min_capacity, s.fails_above);
}
END_TEST

/* A probe that says which capacities answer as the one it replayed (a capped replay's
 * gs_result.same_lo) saves the replays of those: the same answers, with fewer replays and none
 * inside a span already said. */
START_TEST(bisect_takes_the_spans_a_probe_says)
{
    pred rows[G_N_ELEMENTS(not_monotonic) + 3] = {{.ok_from = 1},
                                                  {.ok_from = 77},
                                                  {.ok_from = 1000}};
    for (unsigned i = 0; i < G_N_ELEMENTS(not_monotonic); i++) rows[3 + i] = not_monotonic[i].p;
    for (unsigned i = 0; i < G_N_ELEMENTS(rows); i++) {
        pred plain = rows[i], spans = rows[i];
        spans.spans = true;
        gs_whatif_search a = search(&plain), b = search(&spans);
        ck_assert_int_eq(a.found, b.found);
        ck_assert_uint_eq(a.min_capacity, b.min_capacity);
        ck_assert_int_eq(a.below_fails, b.below_fails);
        ck_assert_uint_eq(a.fails_above, b.fails_above);
        ck_assert_msg(b.probes < a.probes, "row %u: %u replays with spans, %u without", i, b.probes,
                      a.probes);
        /* a boundary each side of each answer's span is all a search needs */
        ck_assert_uint_le(b.probes, 8);
    }
}
END_TEST

START_TEST(bisect_never_completes)
{
    pred p = {.ok_from = 1000};
    gs_whatif_search s = search(&p);
    ck_assert(!s.found);
    ck_assert_uint_eq(s.fails_above, 0);
}
END_TEST

START_TEST(candidates_recorded_standard_and_given)
{
    const char *extra[] = {"pytorch:expandable_segments:True", "cupy", NULL};
    GError *err = NULL;
    GPtrArray *rows = gs_whatif_candidates("max_split_size_mb:128", extra, &err);
    ck_assert_ptr_nonnull(rows);
    const gs_whatif_row *r0 = rows->pdata[0];
    ck_assert_str_eq(r0->pol->spec, "pytorch:max_split_size_mb:128");
    ck_assert(r0->recorded);
    unsigned n_exp = 0, n_rec = 0;
    for (guint i = 0; i < rows->len; i++) {
        const gs_whatif_row *r = rows->pdata[i];
        n_exp += strcmp(r->pol->spec, "pytorch:expandable_segments:True") == 0;
        n_rec += r->recorded;
    }
    ck_assert_uint_eq(n_exp, 1); /* named twice, listed once */
    ck_assert_uint_eq(n_rec, 1);
    ck_assert_ptr_nonnull(gs_whatif_default(rows));
    const gs_whatif_row *last = rows->pdata[rows->len - 1];
    ck_assert_str_eq(last->pol->spec, "cupy");
    ck_assert(last->given);
    gs_whatif_rows_free(rows);

    const char *bad[] = {"pytorch:max_split_sise_mb:1", NULL};
    ck_assert_ptr_null(gs_whatif_candidates(NULL, bad, &err));
    ck_assert(strstr(err->message, "max_split_sise_mb"));
    g_clear_error(&err);
}
END_TEST

static bool completes(const gs_trace *t, const gs_policy *p, uint64_t cap, uint64_t total)
{
    gs_replay_opts o = {.capacity = cap, .device_total = total};
    gs_result r;
    ck_assert(gs_replay_run(t, p, &o, &r, NULL));
    bool ok = !r.oom && r.error == GS_OK;
    gs_result_clear(&r);
    return ok;
}

/* The check, on every bundled single-client trace: each minimum capacity completes,
 * and 2 MiB less fails. */
START_TEST(min_capacity_verified_by_replay)
{
    static const char *const names[] = {"resnet50", "gpt2", "batch-alternate"};
    for (size_t n = 0; n < G_N_ELEMENTS(names); n++) {
        char *path = g_strdup_printf("%s/%s.gstrace.gz", data_dir, names[n]);
        gs_trace *t = gs_trace_load(path, 0, NULL, NULL, NULL);
        ck_assert_msg(t != NULL, "%s", path);
        GPtrArray *rows = gs_whatif_candidates(gs_trace_get_meta(t, "allocator_conf"), NULL, NULL);
        uint64_t total = t->device_total;
        gs_whatif_opts o = {.capacity = 5 * GiB + 768 * MiB, .device_total = total, .jobs = 2};
        gs_whatif_run(rows, t, &o);
        gs_whatif_sort(rows);
        uint64_t prev = 0;
        for (guint i = 0; i < rows->len; i++) {
            const gs_whatif_row *r = rows->pdata[i];
            ck_assert_msg(r->search.found, "%s %s: no minimum", names[n], r->pol->spec);
            uint64_t m = r->search.min_capacity;
            ck_assert_uint_eq(m % GS_WHATIF_STEP, 0);
            ck_assert_uint_ge(m, prev); /* sorted, most memory saved first */
            prev = m;
            ck_assert_msg(completes(t, r->pol, m, total), "%s %s fails at its minimum", names[n],
                          r->pol->spec);
            ck_assert_msg(!completes(t, r->pol, m - GS_WHATIF_STEP, total),
                          "%s %s completes below its minimum", names[n], r->pol->spec);
            /* the outcome at the cap agrees with the minimum (these traces are monotonic) */
            if (!r->search.fails_above)
                ck_assert_int_eq(!r->at_cap.oom, m <= o.capacity);
        }
        gs_whatif_rows_free(rows);
        gs_trace_free(t);
        g_free(path);
    }
}
END_TEST

/* resnet50's largest request is 302 MiB (a 302 MiB segment): max_split_size_mb:512 decides as
 * the default at every step, so it takes the default's search (one replay, at the cap, where
 * it had its own search of dozens), and 256 is searched (its 302 MiB block is oversize). The
 * answers are --full-replays', which searches every row. */
START_TEST(settings_alike_share_a_search)
{
    char *path = g_strdup_printf("%s/resnet50.gstrace.gz", data_dir);
    gs_trace *t = gs_trace_load(path, 0, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(t);
    GPtrArray *rows[2];
    for (int full = 0; full < 2; full++) {
        rows[full] = gs_whatif_candidates(NULL, NULL, NULL);
        gs_whatif_opts o = {.device_total = t->device_total, .jobs = 2, .full_replays = full};
        gs_whatif_run(rows[full], t, &o);
    }
    const gs_whatif_row *dflt = NULL;
    for (guint i = 0; i < rows[0]->len; i++) {
        const gs_whatif_row *r = rows[0]->pdata[i], *f = rows[1]->pdata[i];
        ck_assert_str_eq(r->pol->spec, f->pol->spec);
        ck_assert_uint_eq(r->search.found, f->search.found);
        ck_assert_uint_eq(r->search.min_capacity, f->search.min_capacity);
        ck_assert_uint_eq(r->search.fails_above, f->search.fails_above);
        ck_assert_uint_gt(f->search.probes, 1);
        if (strcmp(r->pol->spec, "pytorch") == 0) dflt = r;
        bool alike = strcmp(r->pol->spec, "pytorch:max_split_size_mb:512") == 0;
        ck_assert_msg(alike == (r->search.probes == 0), "%s: %u probes", r->pol->spec,
                      r->search.probes);
        if (alike) {
            ck_assert_ptr_nonnull(dflt); /* the default comes first */
            ck_assert_uint_eq(r->search.min_capacity, dflt->search.min_capacity);
            ck_assert_uint_eq(r->replays, 1); /* at the cap: its report's, made all the same */
        }
    }
    gs_whatif_rows_free(rows[0]);
    gs_whatif_rows_free(rows[1]);
    gs_trace_free(t);
    g_free(path);
}
END_TEST

/* Settings whose choices read the limit (RMM's arena is sized from it, stitch's slack is
 * bounded by it) fail on resnet50 at the capacity they reserve with no cap, and complete above:
 * the search then goes on up to the device's memory. Each had "no minimum". */
START_TEST(min_capacity_of_settings_that_read_the_limit)
{
    char *path = g_strdup_printf("%s/resnet50.gstrace.gz", data_dir);
    gs_trace *t = gs_trace_load(path, 0, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(t);
    const char *const extra[] = {"rmm-arena", "stitch:slack:0.05", NULL};
    GPtrArray *rows = gs_whatif_candidates(NULL, extra, NULL);
    gs_whatif_opts o = {.device_total = t->device_total, .jobs = 2};
    gs_whatif_run(rows, t, &o);
    for (guint i = 0; i < rows->len; i++) {
        const gs_whatif_row *r = rows->pdata[i];
        if (!r->given) continue;
        ck_assert_msg(r->search.found, "%s: no minimum", r->pol->spec);
        uint64_t m = r->search.min_capacity;
        ck_assert(completes(t, r->pol, m, o.device_total));
        ck_assert(!completes(t, r->pol, m - GS_WHATIF_STEP, o.device_total));
    }
    gs_whatif_rows_free(rows);
    gs_trace_free(t);
    g_free(path);
}
END_TEST

/* A capacity is each device's own limit: on a trace of two devices, each holding 100 MiB at
 * once, the minimum is what one device needs (it was the sum: 202 MiB), and it is verified by
 * replays on both sides. */
START_TEST(min_capacity_per_device)
{
    gs_trace *t = gs_trace_new();
    uint32_t a = gs_trace_add_alloc(t, "torch", 0, 100 * MiB);
    uint32_t b = gs_trace_add_alloc(t, "torch", 0, 100 * MiB);
    t->ev[t->n - 1].device = 1;
    gs_trace_add_free(t, a);
    gs_trace_add_free(t, b);
    const char *const none[] = {NULL};
    GPtrArray *rows = gs_whatif_candidates(NULL, none, NULL);
    gs_whatif_opts o = {.device_total = 80 * GiB, .jobs = 2};
    gs_whatif_run(rows, t, &o);
    for (guint i = 0; i < rows->len; i++) {
        const gs_whatif_row *r = rows->pdata[i];
        ck_assert_msg(r->search.found, "%s", r->pol->spec);
        uint64_t m = r->search.min_capacity;
        ck_assert_msg(m >= 100 * MiB && m <= 130 * MiB, "%s: %" G_GUINT64_FORMAT, r->pol->spec, m);
        ck_assert(completes(t, r->pol, m, o.device_total));
        ck_assert(!completes(t, r->pol, m - GS_WHATIF_STEP, o.device_total));
    }
    gs_whatif_rows_free(rows);
    gs_trace_free(t);
}
END_TEST

/* The search starts from the trace's bound, not from the uncapped replay's peak of allocated
 * bytes: under max_split_size_mb:40 the 45 MiB request takes the cached 60 MiB block whole
 * with no cap (40 + 60 MiB allocated), but under a cap of 86 MiB the block is released first
 * and the request gets a block of its own size (86 MiB allocated at the peak). whatif said 100
 * MiB, a replay at 86 completes. */
START_TEST(min_capacity_below_the_uncapped_allocated_peak)
{
    gs_trace *t = gs_trace_new();
    gs_trace_add_free(t, gs_trace_add_alloc(t, "torch", 0, 60 * MiB));
    gs_trace_add_alloc(t, "torch", 0, 40 * MiB);
    gs_trace_add_alloc(t, "torch", 0, 45 * MiB);
    const char *const extra[] = {"pytorch:max_split_size_mb:40", NULL};
    GPtrArray *rows = gs_whatif_candidates(NULL, extra, NULL);
    gs_whatif_opts o = {.device_total = 80 * GiB, .jobs = 2};
    gs_whatif_run(rows, t, &o);
    bool seen = false;
    for (guint i = 0; i < rows->len; i++) {
        const gs_whatif_row *r = rows->pdata[i];
        ck_assert_msg(r->search.found, "%s", r->pol->spec);
        uint64_t m = r->search.min_capacity;
        ck_assert_msg(completes(t, r->pol, m, o.device_total), "%s", r->pol->spec);
        ck_assert_msg(!completes(t, r->pol, m - GS_WHATIF_STEP, o.device_total),
                      "%s: %" G_GUINT64_FORMAT, r->pol->spec, m);
        if (!r->given) continue;
        seen = true;
        ck_assert_uint_eq(r->at_cap.stats.allocated_bytes[GS_STAT_ALL].peak, 100 * MiB);
        ck_assert_uint_eq(m, 86 * MiB);
    }
    ck_assert(seen);
    gs_whatif_rows_free(rows);
    gs_trace_free(t);
}
END_TEST

/* The front: a point is on it when it has a minimum, completes uncapped, and no other such
 * point needs no more memory and no more time with less of one; equal points are both on it. */
START_TEST(frontier_marks_the_undominated)
{
    gs_frontier_point p[] = {
        {.found = true, .completes = true, .min_capacity = 10, .device_us = 5}, /* front */
        {.found = true, .completes = true, .min_capacity = 8, .device_us = 9},  /* front */
        {.found = true, .completes = true, .min_capacity = 10, .device_us = 6}, /* behind 0 */
        {.found = true, .completes = true, .min_capacity = 8, .device_us = 9},  /* equals 1 */
        {.found = true, .completes = true, .min_capacity = 12, .device_us = 4}, /* front */
        {.found = false, .completes = true, .min_capacity = 0, .device_us = 1}, /* no minimum */
        {.found = true, .completes = false, .min_capacity = 1, .device_us = 1}, /* fails */
        {.found = true, .completes = true, .min_capacity = 9, .device_us = 10}, /* behind 1 */
    };
    gs_frontier_mark(p, G_N_ELEMENTS(p));
    static const bool want[] = {true, true, false, true, true, false, false, false};
    for (size_t i = 0; i < G_N_ELEMENTS(p); i++)
        ck_assert_msg(p[i].pareto == want[i], "point %zu", i);
}
END_TEST

/* Every family on a real trace: one point per setting, gpusim's own marked, each ratio its
 * figures over the bound and over the default's, and the front recomputed by brute force. */
START_TEST(frontier_of_a_trace)
{
    char *path = g_strdup_printf("%s/resnet50.gstrace.gz", data_dir);
    gs_trace *t = gs_trace_load(path, 0, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(t);
    const char *const extra[] = {"stitch:max_handle_mb:20", "cupy", NULL};
    GPtrArray *rows = gs_frontier_candidates(extra, NULL);
    ck_assert_ptr_nonnull(rows);
    ck_assert_uint_eq(rows->len, 16); /* 8 PyTorch settings, 7 families, one given ("cupy" twice) */
    gs_whatif_opts o = {.capacity = 1 * GiB, .device_total = t->device_total, .jobs = 2};
    gs_frontier *f = gs_frontier_run(rows, t, &o);
    ck_assert_uint_eq(f->n, 16);
    ck_assert_uint_eq(f->bound, 5832179712); /* resnet50's lower bound */
    size_t ours = 0, front = 0;
    for (size_t i = 0; i < f->n; i++) {
        const gs_frontier_point *a = &f->pts[i];
        ours += a->ours;
        ck_assert(a->ours == g_str_has_prefix(a->row->pol->spec, "stitch"));
        ck_assert_msg(!a->row->at_cap.oom, "%s: the capacity given was not ignored",
                      a->row->pol->spec);
        if (a->found) {
            ck_assert_uint_ge(a->min_capacity, f->bound);
            ck_assert(fabs(a->memory - (double)a->min_capacity / (double)f->bound) < 1e-12);
        }
        ck_assert(fabs(a->time * f->default_us - a->device_us) < 1e-6 * a->device_us + 1e-9);
        bool dominated = false;
        for (size_t j = 0; j < f->n; j++) {
            const gs_frontier_point *b = &f->pts[j];
            if (b->found && b->completes && b->min_capacity <= a->min_capacity &&
                b->device_us <= a->device_us &&
                (b->min_capacity < a->min_capacity || b->device_us < a->device_us))
                dominated = true;
        }
        ck_assert_msg(a->pareto == (a->found && a->completes && !dominated), "%s",
                      a->row->pol->spec);
        front += a->pareto;
    }
    ck_assert_uint_eq(ours, 2);
    ck_assert_uint_ge(front, 1);
    gs_frontier_free(f);
    gs_trace_free(t);
    g_free(path);
}
END_TEST

static Suite *whatif_suite(void)
{
    Suite *s = suite_create("whatif");
    TCase *tc = tcase_create("search");
    tcase_add_test(tc, bisect_finds_a_threshold_exactly);
    tcase_add_test(tc, bisect_from_a_hint_that_is_wrong);
    tcase_add_loop_test(tc, bisect_on_predicates_not_monotonic, 0, G_N_ELEMENTS(not_monotonic));
    tcase_add_test(tc, bisect_never_completes);
    tcase_add_test(tc, bisect_takes_the_spans_a_probe_says);
    tcase_add_test(tc, candidates_recorded_standard_and_given);
    suite_add_tcase(s, tc);
    TCase *tr = tcase_create("traces");
    tcase_set_timeout(tr, 300);
    tcase_add_test(tr, min_capacity_verified_by_replay);
    tcase_add_test(tc, frontier_marks_the_undominated);
    tcase_add_test(tr, frontier_of_a_trace);
    tcase_add_test(tr, min_capacity_per_device);
    tcase_add_test(tr, min_capacity_below_the_uncapped_allocated_peak);
    tcase_add_test(tr, min_capacity_of_settings_that_read_the_limit);
    tcase_add_test(tr, settings_alike_share_a_search);
    suite_add_tcase(s, tr);
    return s;
}

int main(int argc, char **argv)
{
    data_dir = argc > 1 ? argv[1] : "traces/data";
    return run_suite(whatif_suite());
}
