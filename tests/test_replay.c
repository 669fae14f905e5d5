/* test_replay.c - the replay engine on built traces (outcomes, first OOM, continue-on-oom,
 * deferred frees, empty_cache, repeat), size parsing, reference files, and the bundled
 * synthetic batch-alternate trace that expandable segments exist for.
 *
 * Usage: test_replay [TRACE_DATA_DIR] (traces/data; the trace-file tests need it). */
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "report.h"
#include "validate.h"
#include "testutil.h"

static gs_result replay(const gs_trace *t, const char *spec, uint64_t capacity, bool cont)
{
    GError *err = NULL;
    gs_policy *p = gs_policy_new(spec, &err);
    ck_assert_ptr_nonnull(p);
    gs_replay_opts o = {.capacity = capacity, .device_total = 80 * GiB, .continue_on_oom = cont};
    gs_result r;
    ck_assert(gs_replay_run(t, p, &o, &r, &err));
    gs_policy_free(p);
    return r;
}

START_TEST(replay_counts_like_the_heap)
{
    gs_trace *t = gs_trace_new();
    uint32_t a = gs_trace_add_alloc(t, "torch", 0, 30 * MiB);
    uint32_t b = gs_trace_add_alloc(t, "torch", 0, 4096);
    gs_trace_add_free(t, a);
    gs_trace_add_op(t, GS_OP_MARK, 1);
    uint32_t c = gs_trace_add_alloc(t, "torch", 0, 20 * MiB); /* reuses a's segment */
    gs_trace_add_free(t, b);
    gs_trace_add_free(t, c);
    gs_trace_add_op(t, GS_OP_EMPTY_CACHE, 0);
    gs_result r = replay(t, "pytorch", 0, false);
    ck_assert(!r.oom);
    ck_assert_int_eq(r.error, GS_OK);
    ck_assert_uint_eq(r.events, t->n);
    ck_assert_int_eq(r.stats.reserved_bytes[GS_STAT_ALL].peak, 32 * MiB);
    ck_assert_int_eq(r.stats.reserved_bytes[GS_STAT_ALL].current, 0);
    ck_assert_int_eq(r.stats.allocated_bytes[GS_STAT_ALL].peak, 30 * MiB + 4096);
    ck_assert_uint_eq(r.stats.num_device_alloc, 2);
    ck_assert_uint_eq(r.stats.num_device_free, 2);
    ck_assert_double_eq_tol(gs_result_frag_peak(&r), 1.0 - (30.0 * MiB + 4096) / (32.0 * MiB), 1e-12);
    ck_assert(r.calls.time_us[GS_CALL_MALLOC] > 0); /* modelled device time */
    gs_result_clear(&r);
    gs_trace_free(t);
}
END_TEST

/* Device calls that fail while the allocator gives everything back at the end are counted
 * (gs_result.teardown_failures, for the command line to warn about), not dropped, and leave the
 * run's statistics as they were. */
START_TEST(replay_counts_teardown_failures)
{
    gs_trace *t = gs_trace_new();
    gs_trace_add_alloc(t, "torch", 0, 30 * MiB); /* both still live at the end */
    gs_trace_add_alloc(t, "torch", 0, 4096);
    const char *specs[] = {"pytorch", "pytorch:expandable_segments:True"};
    const uint32_t masks[] = {1u << GS_CALL_FREE,
                              1u << GS_CALL_UNMAP | 1u << GS_CALL_PAGE_RELEASE | 1u << GS_CALL_VA_RELEASE};
    for (int k = 0; k < 2; k++) {
        gs_policy *p = gs_policy_new(specs[k], NULL);
        gs_result clean, failing;
        for (int f = 0; f < 2; f++) {
            gs_sim_config sc = {.total_bytes = 80 * GiB};
            gs_faulty_config fc = {.mask = masks[k], .probability = f ? 1.0 : 0.0,
                                   .status = GS_ERR_DEVICE};
            gs_backend *be = gs_faulty_backend_new(gs_sim_backend_new(&sc), &fc);
            gs_replay_opts o = {.device_total = 80 * GiB, .backend = be};
            ck_assert(gs_replay_run(t, p, &o, f ? &failing : &clean, NULL));
            ck_assert_uint_eq((f ? &failing : &clean)->teardown_failures, gs_faulty_injected(be));
            gs_backend_destroy(be);
        }
        ck_assert_uint_eq(clean.teardown_failures, 0);
        ck_assert_uint_ge(failing.teardown_failures, 2); /* a segment of each pool, at least */
        ck_assert_int_eq(failing.error, GS_OK);
        ck_assert(memcmp(&clean.stats, &failing.stats, sizeof clean.stats) == 0);
        gs_result_clear(&clean);
        gs_result_clear(&failing);
        gs_policy_free(p);
    }
    gs_trace_free(t);
}
END_TEST

START_TEST(replay_stops_at_first_oom_unless_told)
{
    gs_trace *t = gs_trace_new();
    uint32_t a = gs_trace_add_alloc(t, "torch", 0, 60 * MiB);
    gs_trace_add_alloc(t, "torch", 0, 60 * MiB); /* event 1: over a 100 MiB capacity */
    gs_trace_add_free(t, 1);
    gs_trace_add_free(t, a);
    gs_trace_add_alloc(t, "torch", 0, 70 * MiB); /* fits once a is gone */
    gs_result r = replay(t, "pytorch", 100 * MiB, false);
    ck_assert(r.oom);
    ck_assert_uint_eq(r.first_oom_event, 1);
    ck_assert_uint_eq(r.first_oom_size, 60 * MiB);
    ck_assert_uint_eq(r.events, 2);
    ck_assert_uint_eq(r.stats.num_ooms, 1);
    gs_result_clear(&r);
    r = replay(t, "pytorch", 100 * MiB, true);
    ck_assert(r.oom);
    ck_assert_uint_eq(r.events, t->n);
    ck_assert_uint_eq(r.skipped_frees, 1);
    ck_assert_uint_eq(r.stats.num_ooms, 1);
    ck_assert_int_eq(r.stats.allocation[GS_STAT_ALL].allocated, 2);
    gs_result_clear(&r);
    gs_trace_free(t);
}
END_TEST

START_TEST(replay_deferred_free_and_flush)
{
    gs_trace *t = gs_trace_new();
    uint32_t a = gs_trace_add_alloc(t, "torch", 0, 30 * MiB);
    gs_trace_add_free_deferred(t, a);
    gs_trace_add_alloc(t, "torch", 0, 30 * MiB); /* a is pending: a second segment */
    gs_trace_add_op(t, GS_OP_EMPTY_CACHE, 0);      /* completes a, releases its segment */
    gs_trace_add_free_done(t, a);                  /* already completed: nothing to do */
    gs_result r = replay(t, "pytorch", 0, false);
    ck_assert_int_eq(r.error, GS_OK);
    ck_assert_uint_eq(r.stats.num_device_alloc, 2);
    ck_assert_uint_eq(r.stats.num_device_free, 1);
    ck_assert_int_eq(r.stats.active[GS_STAT_ALL].current, 1);
    gs_result_clear(&r);
    gs_trace_free(t);
}
END_TEST

START_TEST(replay_repeat_multiplies_events)
{
    gs_trace *t = gs_trace_new();
    uint32_t a = gs_trace_add_alloc(t, "torch", 0, 4096);
    gs_trace_add_alloc(t, "torch", 0, 8192); /* still live at the end of each pass */
    gs_trace_add_free(t, a);
    GError *err = NULL;
    gs_policy *p = gs_policy_new("pytorch", &err);
    gs_replay_opts o = {.device_total = 80 * GiB, .repeat = 5};
    gs_result r;
    ck_assert(gs_replay_run(t, p, &o, &r, &err));
    ck_assert_uint_eq(r.events, 15);
    ck_assert_int_eq(r.stats.allocation[GS_STAT_ALL].allocated, 10);
    ck_assert_uint_eq(r.stats.num_device_alloc, 1);
    gs_result_clear(&r);
    gs_policy_free(p);
    gs_trace_free(t);
}
END_TEST

/* A checkpoint hook (whatif's, sim/probe.c) is called before each event until it says done or
 * stop: after GS_CHECKPOINT_DONE the replay goes on without it, in every later pass too, to the
 * same result as a replay that never had one; GS_CHECKPOINT_STOP ends it there. */
typedef struct {
    size_t calls, done_at, stop_at;
} hook_count;

static gs_checkpoint_next count_hook(gs_heap *h, size_t index, void *ud)
{
    (void)h;
    hook_count *c = ud;
    c->calls++;
    if (index == c->stop_at) return GS_CHECKPOINT_STOP;
    return index == c->done_at ? GS_CHECKPOINT_DONE : GS_CHECKPOINT_GO_ON;
}

START_TEST(replay_checkpoint_hook_done_and_stop)
{
    gs_trace *t = gs_trace_new();
    for (unsigned k = 0; k < 40; k++) {
        uint32_t a = gs_trace_add_alloc(t, "torch", 0, (k % 7 + 1) * MiB);
        if (k % 3) gs_trace_add_free(t, a);
    }
    GError *err = NULL;
    gs_policy *p = gs_policy_new("pytorch", &err);
    gs_replay_opts plain = {.device_total = 80 * GiB, .repeat = 2};
    gs_result want, got;
    ck_assert(gs_replay_run(t, p, &plain, &want, &err));
    hook_count c = {.done_at = 17, .stop_at = SIZE_MAX};
    gs_replay_opts o = plain;
    o.checkpoint = count_hook;
    o.checkpoint_ud = &c;
    ck_assert(gs_replay_run(t, p, &o, &got, &err));
    ck_assert_uint_eq(c.calls, 18); /* events 0..17 of the first pass, none after */
    ck_assert_uint_eq(got.events, want.events);
    ck_assert_mem_eq(&got.stats, &want.stats, sizeof got.stats);
    ck_assert_uint_eq(got.stats.num_device_alloc, want.stats.num_device_alloc);
    gs_result_clear(&got);
    c = (hook_count){.done_at = SIZE_MAX, .stop_at = 9};
    o.repeat = 1;
    ck_assert(gs_replay_run(t, p, &o, &got, &err));
    ck_assert_uint_eq(c.calls, 10);
    ck_assert_uint_eq(got.events, 9);
    ck_assert(!got.oom);
    ck_assert_int_eq(got.error, GS_OK);
    gs_result_clear(&got);
    gs_result_clear(&want);
    gs_policy_free(p);
    gs_trace_free(t);
}
END_TEST

START_TEST(parse_sizes)
{
    uint64_t v;
    GError *err = NULL;
    ck_assert(gs_parse_size("4096", &v, &err)); ck_assert_uint_eq(v, 4096);
    ck_assert(gs_parse_size("512MiB", &v, &err)); ck_assert_uint_eq(v, 512 * MiB);
    ck_assert(gs_parse_size("6.25GiB", &v, &err)); ck_assert_uint_eq(v, 6710886400);
    ck_assert(gs_parse_size("5.75 GiB", &v, &err)); ck_assert_uint_eq(v, 6174015488);
    ck_assert(gs_parse_size("18.2GiB", &v, &err)); ck_assert_uint_eq(v, 19542101196);
    ck_assert(gs_parse_size("1.5GB", &v, &err)); ck_assert_uint_eq(v, 1500000000);
    ck_assert(gs_parse_size("2T", &v, &err)); ck_assert_uint_eq(v, 2 * 1024 * GiB);
    const char *bad[] = {"", "GiB", "-1", "1.GiB", "12 parsecs", "0", "0.0GiB",
                         "99999999999999999999", "20000000TiB", "5.75"};
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        ck_assert_msg(!gs_parse_size(bad[i], &v, &err), "accepted '%s'", bad[i]);
        ck_assert_ptr_nonnull(strstr(err->message, "bad size"));
        g_clear_error(&err);
    }
}
END_TEST

/* The first OOM's report: a 20 MiB segment split into five 4 MiB blocks, two of them
 * freed apart from each other, and a cap of one segment: a 6 MiB request cannot be served, and
 * the report says so in PyTorch's words and shows why (8 MiB free, all in 4 MiB pieces). */
START_TEST(first_oom_report_fields)
{
    gs_trace *t = gs_trace_new();
    uint32_t s[5];
    for (int i = 0; i < 5; i++) s[i] = gs_trace_add_alloc(t, "torch", 7, 4 * MiB);
    gs_trace_add_free(t, s[1]);
    gs_trace_add_free(t, s[3]);
    gs_trace_add_alloc(t, "torch", 7, 6 * MiB);
    gs_policy *p = gs_policy_new("pytorch", NULL);
    gs_replay_opts o = {.capacity = 20 * MiB};
    gs_result r;
    ck_assert(gs_replay_run(t, p, &o, &r, NULL));
    ck_assert(r.oom);
    ck_assert_uint_eq(r.first_oom_event, 7);
    const gs_oom_report *q = r.first_oom_report;
    ck_assert_ptr_nonnull(q);
    ck_assert_uint_eq(q->request, 6 * MiB);
    ck_assert_uint_eq(q->rounded, 6 * MiB);
    ck_assert_uint_eq(q->stream, 7);
    ck_assert_uint_eq(q->allocated, 12 * MiB);
    ck_assert_uint_eq(q->reserved, 20 * MiB);
    ck_assert_uint_eq(q->limit, 20 * MiB);
    ck_assert_uint_eq(q->free_total, 8 * MiB);
    ck_assert_uint_eq(q->free_too_small, 8 * MiB);
    ck_assert_uint_eq(q->largest_free, 4 * MiB);
    ck_assert_uint_eq(q->largest_in_pool, 4 * MiB);
    ck_assert_uint_eq(q->largest_on_stream, 4 * MiB);
    char *m = gs_oom_message(q);
    ck_assert_str_eq(m, "Tried to allocate 6.00 MiB; 12.00 MiB is allocated by PyTorch, and "
                        "8.00 MiB is reserved by PyTorch but unallocated");
    g_free(m);
    gs_result r2 = {0};
    gs_result_move(&r2, &r); /* the report moves with its result */
    ck_assert_ptr_null(r.first_oom_report);
    ck_assert_ptr_eq(r2.first_oom_report, q);
    gs_result_clear(&r2);
    gs_result_clear(&r);
    gs_policy_free(p);
    gs_trace_free(t);
}
END_TEST

START_TEST(format_sizes)
{
    char *s = gs_format_size(20 * MiB);
    ck_assert_str_eq(s, "20.00 MiB");
    g_free(s);
    s = gs_format_size(512);
    ck_assert_str_eq(s, "512 B");
    g_free(s);
    /* capacities: the one formatter of report labels, plot titles and validate */
    static const struct { uint64_t b; const char *sep, *want; } caps[] = {
        {6174015488, "", "5.75GiB"}, {6174015488, " ", "5.75 GiB"}, {6 * GiB, " ", "6 GiB"},
        {GiB / 2, "", "0.5GiB"}, {300 * MiB, "", "300MiB"}, {100 * MiB, " ", "100 MiB"},
        {6710886399, "", "6710886399B"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(caps); i++) {
        s = gs_format_capacity(caps[i].b, caps[i].sep);
        ck_assert_str_eq(s, caps[i].want);
        g_free(s);
    }
}
END_TEST

START_TEST(reference_files)
{
    char *dir = g_dir_make_tmp("gs-ref-XXXXXX", NULL);
    char *path = g_build_filename(dir, "r.json", NULL);
    g_file_set_contents(path,
        "{\"format\": \"gpusim-reference 1\", \"allocator_conf\": \"max_split_size_mb:128\",\n"
        " \"device_total_bytes\": 85017493504, \"cap_bytes\": 6710886399, \"outcome\": \"ok\",\n"
        " \"memory_stats\": {\"num_alloc_retries\": 6, \"reserved_bytes.all.peak\": 23068672},\n"
        " \"device_events\": [[\"segment_alloc\", 140000000000000, 2097152, 0],\n"
        "   [\"segment_alloc\", 140000020971520, 20971520, 3], [\"segment_free\", 140000000000000, 2097152, 9]]}\n",
        -1, NULL);
    GError *err = NULL;
    gs_reference *r = gs_reference_load(path, &err);
    ck_assert_msg(r != NULL, "%s", err ? err->message : "");
    ck_assert_str_eq(r->allocator_conf, "max_split_size_mb:128");
    ck_assert_uint_eq(r->cap_bytes, 6710886399);
    ck_assert_uint_eq(r->n_segment_alloc, 2);
    ck_assert_uint_eq(r->peak_reserved, 23068672);
    ck_assert_uint_eq(g_array_index(r->seg_addrs, uint64_t, 1), 140000020971520);
    int64_t v;
    ck_assert(gs_reference_stat(r, "num_alloc_retries", &v));
    ck_assert_int_eq(v, 6);
    ck_assert(!gs_reference_stat(r, "num_ooms", &v));
    gs_reference_free(r);
    g_file_set_contents(path, "{\"format\": \"something else\"}", -1, NULL);
    ck_assert_ptr_null(gs_reference_load(path, &err));
    ck_assert_ptr_nonnull(strstr(err->message, "not a gpusim reference file"));
    g_clear_error(&err);
    g_unlink(path);
    g_rmdir(dir);
    g_free(path);
    g_free(dir);
}
END_TEST


/* ---- requests that failed in the recorded run (oom events), and several devices ---- */

/* a 60 MiB block; a 60 MiB request that failed (caught); a's free; 70 MiB; a 200 MiB request
 * that failed last (the run died of it). */
static gs_trace *oom_trace(void)
{
    gs_trace *t = gs_trace_new();
    uint32_t a = gs_trace_add_alloc(t, "torch", 0, 60 * MiB);
    gs_trace_add_oom(t, "torch", 0, 60 * MiB);
    gs_trace_add_free(t, a);
    gs_trace_add_alloc(t, "torch", 0, 70 * MiB);
    gs_trace_add_oom(t, "torch", 0, 200 * MiB);
    gs_trace_set_meta(t, "fatal_oom_event", "4");
    return t;
}

START_TEST(replay_oom_events)
{
    gs_trace *t = oom_trace();
    /* under the recorded cap: the first fails and is gone past, the last is where it died */
    gs_result r = replay(t, "pytorch", 100 * MiB, false);
    ck_assert(r.oom);
    ck_assert_uint_eq(r.first_oom_event, 4);
    ck_assert_uint_eq(r.first_oom_size, 200 * MiB);
    ck_assert_uint_eq(r.caught_ooms, 1);
    ck_assert_uint_eq(r.stats.num_ooms, 2);
    /* each failed request flushed and retried, and so did the 70 MiB (a's 60 MiB segment was
     * cached: 60 + 70 > 100) */
    ck_assert_uint_eq(r.stats.num_alloc_retries, 3);
    ck_assert_uint_eq(r.events, 5);
    gs_result_clear(&r);
    /* --continue-on-oom changes nothing: the caught one is gone past anyway */
    r = replay(t, "pytorch", 100 * MiB, true);
    ck_assert(r.oom);
    ck_assert_uint_eq(r.caught_ooms, 1);
    ck_assert_uint_eq(r.first_oom_event, 4);
    gs_result_clear(&r);
    /* without a cap both are served and given back at once: the program never had them */
    r = replay(t, "pytorch", 0, false);
    ck_assert(!r.oom);
    ck_assert_uint_eq(r.caught_ooms, 0);
    ck_assert_uint_eq(r.stats.num_ooms, 0);
    ck_assert_int_eq(r.stats.allocation[GS_STAT_ALL].current, 1);
    ck_assert_int_eq(r.stats.allocated_bytes[GS_STAT_ALL].current, 70 * MiB);
    ck_assert_int_eq(r.stats.allocated_bytes[GS_STAT_ALL].peak, 270 * MiB);
    ck_assert_uint_eq(r.events, 5);
    /* past the recorded death: survived, never ok (the rest of the program is not in it) */
    ck_assert(r.survived);
    ck_assert_str_eq(gs_result_outcome(&r), "survived");
    gs_result_clear(&r);
    r = replay(t, "pytorch", 100 * MiB, false);
    ck_assert(!r.survived);
    ck_assert_str_eq(gs_result_outcome(&r), "oom");
    gs_result_clear(&r);
    /* an oom that is not last is caught whatever the header says about another */
    gs_trace_add_op(t, GS_OP_MARK, 0);
    gs_trace_set_meta(t, "fatal_oom_event", "");
    r = replay(t, "pytorch", 100 * MiB, false);
    ck_assert(!r.oom);
    ck_assert(!r.survived); /* a trace that completed: ok */
    ck_assert_str_eq(gs_result_outcome(&r), "ok");
    ck_assert_uint_eq(r.caught_ooms, 2);
    gs_result_clear(&r);
    gs_trace_free(t);
}
END_TEST

/* A benchmark's repeat (o.repeat) of a trace that ends in the OOM its run died of: each pass
 * ends there and the next starts from the freed state, so every pass is replayed (a run that
 * stopped after the first measured mostly its setup); the first OOM is the first pass's. */
START_TEST(replay_repeat_goes_past_the_death)
{
    gs_trace *t = oom_trace();
    GError *err = NULL;
    gs_policy *p = gs_policy_new("pytorch", &err);
    gs_replay_opts o = {.capacity = 100 * MiB, .device_total = 80 * GiB, .repeat = 3};
    gs_result r;
    ck_assert(gs_replay_run(t, p, &o, &r, &err));
    ck_assert_uint_eq(r.events, 15);
    ck_assert(r.oom);
    ck_assert_uint_eq(r.first_oom_event, 4);
    ck_assert_uint_eq(r.caught_ooms, 3);
    ck_assert_uint_eq(r.stats.num_ooms, 6);
    ck_assert_int_eq(r.stats.allocation[GS_STAT_ALL].allocated, 6);
    gs_result_clear(&r);
    gs_policy_free(p);
    gs_trace_free(t);
}
END_TEST

/* Device 0: 30 MiB, freed, its cache emptied; device 1: 50 MiB, then 40 MiB. */
static gs_trace *two_device_trace(void)
{
    gs_trace *t = gs_trace_new();
    uint32_t a = gs_trace_add_alloc(t, "torch", 0, 30 * MiB);
    gs_trace_add_alloc(t, "torch", 0, 50 * MiB);
    t->ev[t->n - 1].device = 1;
    gs_trace_add_free(t, a);
    gs_trace_add_op(t, GS_OP_EMPTY_CACHE, 0); /* device 0's cache only */
    gs_trace_add_alloc(t, "torch", 0, 40 * MiB);
    t->ev[t->n - 1].device = 1;
    return t;
}

START_TEST(replay_several_devices)
{
    gs_trace *t = two_device_trace();
    GError *err = NULL;
    gs_policy *p = gs_policy_new("pytorch", &err);
    gs_replay_opts o = {.device_total = 80 * GiB};
    gs_result r;
    ck_assert(gs_replay_run(t, p, &o, &r, &err));
    ck_assert_uint_eq(r.n_devices, 2);
    const gs_result *d0 = &r.devices[0], *d1 = &r.devices[1];
    ck_assert_uint_eq(d0->device, 0);
    ck_assert_uint_eq(d1->device, 1);
    ck_assert_int_eq(d0->stats.reserved_bytes[GS_STAT_ALL].peak, 30 * MiB);
    ck_assert_uint_eq(d0->stats.num_device_free, 1); /* its empty_cache */
    ck_assert_int_eq(d1->stats.reserved_bytes[GS_STAT_ALL].peak, 90 * MiB);
    ck_assert_uint_eq(d1->stats.num_device_free, 0); /* not emptied */
    ck_assert_str_eq(d1->policy, "pytorch");
    ck_assert_uint_eq(d0->events + d1->events, t->n);
    /* the totals: sums, and the peak of the sum over time (30 + 50, then 0 + 90) */
    ck_assert_int_eq(r.stats.reserved_bytes[GS_STAT_ALL].peak, 90 * MiB);
    ck_assert_int_eq(r.stats.reserved_bytes[GS_STAT_ALL].allocated, 120 * MiB);
    ck_assert_uint_eq(r.stats.num_device_alloc, 3);
    ck_assert_uint_eq(r.stats.num_device_free, 1);
    ck_assert_uint_eq(r.dev_free_before, d0->dev_free_before + d1->dev_free_before);
    gs_result_clear(&r);

    /* a limit per device: device 1 may reserve 80 MiB, and dies at its 40 MiB */
    gs_device_opts dev[] = {{.device = 1, .capacity = 80 * MiB}};
    o.devices = dev;
    o.n_devices = 1;
    o.capacity = 1 * GiB; /* every other device's */
    ck_assert(gs_replay_run(t, p, &o, &r, &err));
    ck_assert(r.oom);
    ck_assert_uint_eq(r.first_oom_event, 4);
    ck_assert_uint_eq(r.first_oom_device, 1);
    ck_assert(!r.devices[0].oom);
    ck_assert(r.devices[1].oom);
    ck_assert_uint_eq(r.devices[1].first_oom_event, 4);
    ck_assert_uint_eq(r.devices[0].capacity, 1 * GiB);
    ck_assert_uint_eq(r.devices[1].capacity, 80 * MiB);
    ck_assert_uint_eq(r.devices[1].stats.num_alloc_retries, 1);

    /* the reports: a row per device (table, CSV), "devices" with a result's keys (JSON) */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    gs_report(f, GS_FMT_TABLE, "two", t, &r, 1, NULL, true);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "pytorch @0=1GiB,1=80MiB "));
    ck_assert_ptr_nonnull(strstr(buf, "\n  device 0 @1GiB "));
    ck_assert_ptr_nonnull(strstr(buf, "\n  device 1 @80MiB "));
    ck_assert_ptr_nonnull(strstr(buf, "first OOM at event 4 on device 1"));
    free(buf);
    f = open_memstream(&buf, &len);
    gs_report(f, GS_FMT_CSV, "two", t, &r, 1, NULL, true);
    fclose(f);
    char **lines = g_strsplit(buf, "\n", -1);
    ck_assert(g_str_has_suffix(lines[0], ",device"));
    ck_assert(g_str_has_suffix(lines[1], ","));   /* the totals */
    ck_assert(g_str_has_suffix(lines[2], ",0"));
    ck_assert(g_str_has_suffix(lines[3], ",1"));
    ck_assert(g_str_has_prefix(lines[3], "two,pytorch,83886080,oom,4,"));
    g_strfreev(lines);
    free(buf);
    f = open_memstream(&buf, &len);
    gs_report(f, GS_FMT_JSON, "two", t, &r, 1, NULL, true);
    fclose(f);
    gs_json *j = gs_json_parse("report", buf, len, &err);
    ck_assert_msg(j, "%s", err ? err->message : "");
    const gs_json *res = gs_json_get(j, "results")->items[0];
    const gs_json *devs = gs_json_get(res, "devices");
    ck_assert_ptr_nonnull(devs);
    ck_assert_uint_eq(devs->n, 2);
    const gs_json *j1 = gs_json_get(devs, "1");
    for (size_t k = 0; k < res->n; k++) /* every key of the result, but "devices" */
        ck_assert_msg(strcmp(res->keys[k], "devices") == 0 || gs_json_get(j1, res->keys[k]),
                      "device 1 lacks '%s'", res->keys[k]);
    ck_assert_str_eq(gs_json_get(j1, "outcome")->str, "oom");
    ck_assert_str_eq(gs_json_get(gs_json_get(devs, "0"), "outcome")->str, "ok");
    int64_t v;
    ck_assert(gs_json_int(gs_json_get(j1, "peak_reserved_bytes"), &v) && v == 50 * MiB);
    ck_assert(gs_json_int(gs_json_get(gs_json_get(j1, "memory_stats"), "num_ooms"), &v) && v == 1);
    gs_json_free(j);
    free(buf);
    gs_result_clear(&r);

    /* several devices need simulated devices and one client */
    gs_trace_add_alloc(t, "cupy", 0, 4096);
    ck_assert(!gs_replay_run(t, p, &(gs_replay_opts){0}, &r, &err));
    ck_assert_ptr_nonnull(strstr(err->message, "several devices and several clients"));
    g_clear_error(&err);
    gs_policy_free(p);
    gs_trace_free(t);
}
END_TEST

START_TEST(report_says_what_the_trace_can_tell)
{
    gs_trace *t = oom_trace();
    gs_trace_set_meta(t, "synthesized_allocs", "1");
    gs_result r = replay(t, "pytorch", 100 * MiB, false);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    gs_report(f, GS_FMT_TABLE, "t", t, &r, 1, NULL, true);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "the recorded run died at event 4 (an OOM); \"survived\" "
                                      "means a run gets that far"));
    ck_assert_ptr_nonnull(strstr(buf, "recording started mid-run: 1 allocation synthesized, "
                                      "results below that point are approximate"));
    ck_assert_ptr_nonnull(strstr(buf, "1 OOM caught and gone past"));
    free(buf);
    f = open_memstream(&buf, &len);
    gs_report(f, GS_FMT_CSV, "t", t, &r, 1, NULL, true);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, ",recorded_fatal_oom_event,synthesized_allocs,caught_ooms\n"));
    ck_assert(g_str_has_suffix(buf, ",4,1,1\n"));
    free(buf);
    f = open_memstream(&buf, &len);
    gs_report(f, GS_FMT_JSON, "t", t, &r, 1, NULL, true);
    fclose(f);
    GError *err = NULL;
    gs_json *j = gs_json_parse("report", buf, len, &err);
    int64_t v;
    ck_assert(gs_json_int(gs_json_get(j, "recorded_fatal_oom_event"), &v) && v == 4);
    ck_assert(gs_json_int(gs_json_get(j, "synthesized_allocs"), &v) && v == 1);
    ck_assert(gs_json_int(gs_json_get(gs_json_get(j, "results")->items[0], "caught_ooms"), &v) &&
              v == 1);
    gs_json_free(j);
    free(buf);
    gs_result_clear(&r);
    gs_trace_free(t);
}
END_TEST

START_TEST(reference_per_device)
{
    char *dir = g_dir_make_tmp("gs-ref-XXXXXX", NULL);
    char *path = g_build_filename(dir, "r.json", NULL);
    g_file_set_contents(path,
        "{\"format\": \"gpusim-reference 1\", \"allocator_conf\": \"\", \"outcome\": \"oom\",\n"
        " \"outcome_event\": 7, \"device_events\": [],\n"
        " \"devices\": {\"0\": {\"cap_bytes\": 100, \"outcome\": \"ok\", \"device_events\": "
        "[[\"segment_alloc\", 4096, 2097152, 0]]},\n"
        "   \"1\": {\"cap_bytes\": 200, \"outcome\": \"oom\", \"outcome_event\": 7,"
        " \"device_events\": [[\"segment_free\", 4096, 2097152, 1]],"
        " \"memory_stats\": {\"num_ooms\": 1}}}}\n", -1, NULL);
    GError *err = NULL;
    gs_reference *r = gs_reference_load(path, &err);
    ck_assert_msg(r != NULL, "%s", err ? err->message : "");
    ck_assert(r->has_outcome_event && r->outcome_event == 7);
    ck_assert_uint_eq(r->n_devices, 2);
    const gs_reference *d1 = gs_reference_device(r, 1);
    ck_assert_ptr_nonnull(d1);
    ck_assert_uint_eq(d1->cap_bytes, 200);
    ck_assert_uint_eq(d1->n_device_free, 1);
    ck_assert(d1->has_outcome_event);
    int64_t v;
    ck_assert(gs_reference_stat(d1, "num_ooms", &v) && v == 1);
    ck_assert_uint_eq(gs_reference_device(r, 0)->n_segment_alloc, 1);
    ck_assert_ptr_null(gs_reference_device(r, 2));
    gs_reference_free(r);
    g_file_set_contents(path, "{\"format\": \"gpusim-reference 1\", \"device_events\": [],"
                              " \"devices\": {\"x\": {\"device_events\": []}}}", -1, NULL);
    ck_assert_ptr_null(gs_reference_load(path, &err));
    ck_assert_ptr_nonnull(strstr(err->message, "device numbers"));
    g_clear_error(&err);
    g_unlink(path);
    g_rmdir(dir);
    g_free(path);
    g_free(dir);
}
END_TEST

static const char *data_dir;

/* PyTorch's own case for expandable segments (traces/synth.py batch-alternate: 48 layers,
 * batch alternating 8 and 9): cudaMalloc segments cut for one batch size leave slivers the other
 * cannot use, so the default policy reserves far more than is ever live; one expandable segment
 * per pool coalesces and stays within a page of the peak. */
START_TEST(expandable_segments_do_not_strand_slivers)
{
    char *path = g_build_filename(data_dir, "batch-alternate.gstrace.gz", NULL);
    GError *err = NULL;
    gs_trace *t = gs_trace_load(path, 0, NULL, NULL, &err);
    ck_assert_msg(t != NULL, "%s", err ? err->message : "");
    gs_result def = replay(t, "pytorch", 0, false);
    gs_result mss = replay(t, "pytorch:max_split_size_mb:128", 0, false);
    gs_result exp = replay(t, "pytorch:expandable_segments:True", 0, false);
    int64_t live = def.stats.requested_bytes[GS_STAT_ALL].peak;
    int64_t r_def = def.stats.reserved_bytes[GS_STAT_ALL].peak;
    int64_t r_mss = mss.stats.reserved_bytes[GS_STAT_ALL].peak;
    int64_t r_exp = exp.stats.reserved_bytes[GS_STAT_ALL].peak;
    printf("batch-alternate: peak live %" G_GINT64_FORMAT ", reserved: default %" G_GINT64_FORMAT
           ", max_split_size_mb:128 %" G_GINT64_FORMAT ", expandable %" G_GINT64_FORMAT "\n",
           live, r_def, r_mss, r_exp);
    /* expandable: within one 20 MiB page of the live peak */
    ck_assert_int_lt(r_exp - live, 20 * MiB);
    /* the cudaMalloc policies strand more than 10% of the live peak in slivers */
    ck_assert_int_gt(r_def - r_exp, live / 10);
    ck_assert_int_gt(r_mss - r_exp, live / 10);
    ck_assert_int_eq(exp.stats.num_device_free, 0);
    ck_assert_uint_eq(exp.calls.n[GS_CALL_MALLOC], 0);
    ck_assert_uint_gt(exp.calls.n[GS_CALL_MAP], 0);
    ck_assert_uint_eq(exp.stats.num_device_alloc, exp.calls.n[GS_CALL_SET_ACCESS]);
    /* so with 5% headroom over the live peak, the default policy runs out even after
     * flushing its cache, and expandable segments finish */
    uint64_t cap = (uint64_t)(live + live / 20);
    gs_result def_cap = replay(t, "pytorch", cap, false);
    gs_result exp_cap = replay(t, "pytorch:expandable_segments:True", cap, false);
    ck_assert(def_cap.oom);
    ck_assert_int_ge(def_cap.stats.num_alloc_retries, 1);
    ck_assert(!exp_cap.oom);
    ck_assert_int_eq(exp_cap.stats.reserved_bytes[GS_STAT_ALL].peak, r_exp);
    gs_result_clear(&def);
    gs_result_clear(&mss);
    gs_result_clear(&exp);
    gs_result_clear(&def_cap);
    gs_result_clear(&exp_cap);
    gs_trace_free(t);
    g_free(path);
}
END_TEST

/* gpusim validate's comparison, with a simulated device standing in for the real one: the same
 * cost model must agree on every check; a device twice as slow must be flagged. */
static gs_validation validate_against(const gs_trace *t, const char *spec, const gs_calibration *dev_cal,
                                      GArray *samples)
{
    gs_sim_config sc = {.total_bytes = t->device_total, .cal = dev_cal};
    gs_backend *dev = gs_sim_backend_new(&sc);
    gs_policy *p = gs_policy_new(spec, NULL);
    gs_validate_opts o = {.device_total = t->device_total, .backend = dev, .runs = 3,
                          .samples = samples};
    gs_validation v;
    ck_assert(gs_validate_run(t, p, &o, &v, NULL));
    ck_assert_ptr_null(dev->observe); /* the observer is gone once the runs are done */
    gs_backend_destroy(dev);
    gs_policy_free(p);
    return v;
}

static char *report_text(const gs_trace *t, const gs_validation *v, gs_format fmt)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    gs_validation_report(m, fmt, "resnet50", t, v, true);
    fclose(m);
    return buf;
}

START_TEST(validate_agrees_with_itself_and_flags_a_slower_device)
{
    char *path = g_build_filename(data_dir, "resnet50.gstrace.gz", NULL);
    gs_trace *t = gs_trace_load(path, 0, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(t);
    gs_calibration *cal = gs_calibration_builtin();
    GArray *samples = gs_call_samples_new();
    /* cudaMalloc segments: the stand-in device, reused run after run, places as a fresh one */
    gs_validation v = validate_against(t, "pytorch", cal, NULL);
    ck_assert(gs_validation_ok(t, &v));
    gs_validation_clear(&v);
    v = validate_against(t, "pytorch:expandable_segments:True", cal, samples);
    ck_assert_uint_eq(v.runs, 3);
    ck_assert(v.runs_agree);
    ck_assert(gs_validation_ok(t, &v));
    /* the simulated device loses exactly the pages mapped at the peak */
    ck_assert_uint_eq(v.driver_peak, (uint64_t)v.real.stats.reserved_bytes[GS_STAT_ALL].peak);
    ck_assert_double_eq_tol(v.real_total_us, gs_devcalls_total_us(&v.sim.calls), 1e-6);
    char *table = report_text(t, &v, GS_FMT_TABLE);
    ck_assert_msg(strstr(table, "verdict: agrees within tolerance") && !strstr(table, "DIFFERS"),
                  "%s", table);
    ck_assert_msg(strstr(table, "cuMemSetAccess calls"), "%s", table);
    char *json = report_text(t, &v, GS_FMT_JSON);
    gs_json *j = gs_json_parse("validation", json, strlen(json), NULL);
    ck_assert_msg(j && gs_json_get(j, "ok")->b && gs_json_get(j, "runs_agree")->b, "%s", json);
    ck_assert_uint_gt(gs_json_get(j, "checks")->n, 10);
    gs_json_free(j);
    g_free(json);
    g_free(table);

    /* every timed call was kept: a table made from them gives back the model it came from */
    ck_assert_uint_gt(samples->len, 3 * v.real.calls.n[GS_CALL_MAP]);
    char *dir = g_dir_make_tmp("gpusim-cal-XXXXXX", NULL);
    char *csv = g_build_filename(dir, "measured.csv", NULL);
    char *msg = NULL;
    ck_assert(gs_calibration_save(csv, (gs_call_sample *)(void *)samples->data, samples->len, cal,
                                  &msg));
    gs_calibration *back = gs_calibration_load(csv, &msg);
    ck_assert_msg(back, "%s", msg);
    ck_assert_double_eq_tol(gs_calibration_us(back, GS_CALL_SET_ACCESS, 20 * MiB),
                            gs_calibration_us(cal, GS_CALL_SET_ACCESS, 20 * MiB), 0.01);
    /* kinds the runs never made (no cudaMalloc under expandable segments) keep the base rows */
    for (uint64_t sz = 512; sz <= 16 * GiB; sz *= 4)
        ck_assert_double_eq_tol(gs_calibration_us(back, GS_CALL_MALLOC, sz),
                                gs_calibration_us(cal, GS_CALL_MALLOC, sz), 0.01);
    gs_calibration_free(back);
    g_array_free(samples, TRUE);
    gs_validation_clear(&v);

    /* a device whose calls take twice the modelled time */
    GString *slow = g_string_new("op,size_bytes,median_us,p10_us,p90_us,n\n");
    for (int k = 0; k < GS_CALL_COUNT; k++)
        for (uint64_t sz = 2 * MiB; sz <= 4 * GiB; sz *= 8)
            g_string_append_printf(slow, "%s,%" G_GUINT64_FORMAT ",%.3f,0,0,1\n",
                                   gs_call_name((gs_call_kind)k), sz,
                                   2 * gs_calibration_us(cal, (gs_call_kind)k, sz));
    ck_assert(g_file_set_contents(csv, slow->str, -1, NULL));
    gs_calibration *slow_cal = gs_calibration_load(csv, &msg);
    ck_assert_msg(slow_cal, "%s", msg);
    v = validate_against(t, "pytorch:expandable_segments:True", slow_cal, NULL);
    ck_assert(!gs_validation_ok(t, &v));
    table = report_text(t, &v, GS_FMT_TABLE);
    ck_assert_msg(strstr(table, "device time ms") && strstr(table, "DIFFERS (within 25%)") &&
                      strstr(table, "verdict: DIFFERS"),
                  "%s", table);
    /* only the times differ: the counts and the peak still agree */
    ck_assert_msg(strstr(table, "cuMemMap calls") && !strstr(table, "DIFFERS (equal)"), "%s", table);
    g_free(table);
    gs_validation_clear(&v);
    gs_calibration_free(slow_cal);
    g_string_free(slow, TRUE);
    g_unlink(csv);
    g_rmdir(dir);
    g_free(csv);
    g_free(dir);
    gs_calibration_free(cal);
    gs_trace_free(t);
    g_free(path);
}
END_TEST

/* A binary trace changed on disk after it was loaded, in place (every event's slot index made
 * 0x7f7f7f7f) and then cut to its header, replays as loaded: its events were read, not used
 * where the file lay mapped (the mapped file gave SIGSEGV, the slot index out of range, then
 * SIGBUS). 140,000 allocations: more slots than the replay's prefetch starts at, and events
 * past the 2 MiB the reader asks in huge pages for. */
START_TEST(replay_binary_file_changed_after_loading)
{
    gs_trace *t = gs_trace_new();
    for (int k = 0; k < 140000; k++) {
        uint32_t a = gs_trace_add_alloc(t, "torch", 0, 512u * (1 + k % 64));
        if (k % 3) gs_trace_add_free(t, a);
    }
    char *dir = g_dir_make_tmp("test_replay.XXXXXX", NULL);
    char *path = g_build_filename(dir, "t.gsbin", NULL);
    GError *err = NULL;
    ck_assert_msg(gs_trace_save(t, path, &err), "%s", err ? err->message : "?");
    gs_trace *u = gs_trace_load(path, 0, NULL, NULL, &err);
    ck_assert_msg(u != NULL, "%s", err ? err->message : "?");
    gs_result want = replay(t, "pytorch", 0, false);

    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    ck_assert(fseek(f, 0, SEEK_END) == 0);
    long size = ftell(f);
    long events_at = size - (long)(t->n * sizeof(gs_event));
    static const unsigned char bad[4] = {0x7f, 0x7f, 0x7f, 0x7f};
    for (size_t i = 0; i < t->n; i++) {
        ck_assert(fseek(f, events_at + (long)(i * sizeof(gs_event) + 16), SEEK_SET) == 0);
        ck_assert_uint_eq(fwrite(bad, 1, sizeof bad, f), sizeof bad);
    }
    ck_assert(fclose(f) == 0);
    for (int pass = 0; pass < 2; pass++) {
        gs_result r = replay(u, "pytorch", 0, false);
        ck_assert_uint_eq(r.events, want.events);
        ck_assert_int_eq(r.stats.reserved_bytes[GS_STAT_ALL].peak,
                         want.stats.reserved_bytes[GS_STAT_ALL].peak);
        ck_assert_int_eq(r.stats.allocated_bytes[GS_STAT_ALL].peak,
                         want.stats.allocated_bytes[GS_STAT_ALL].peak);
        ck_assert_uint_eq(r.stats.num_device_alloc, want.stats.num_device_alloc);
        gs_result_clear(&r);
        ck_assert(truncate(path, 64) == 0); /* then cut short */
    }
    gs_result_clear(&want);
    gs_trace_free(u);
    gs_trace_free(t);
    g_unlink(path);
    g_rmdir(dir);
    g_free(path);
    g_free(dir);
}
END_TEST

static Suite *replay_suite(void)
{
    Suite *s = suite_create("replay");
    TCase *tc = tcase_create("engine");
    tcase_add_test(tc, replay_counts_like_the_heap);
    tcase_add_test(tc, replay_checkpoint_hook_done_and_stop);
    tcase_add_test(tc, first_oom_report_fields);
    tcase_add_test(tc, replay_stops_at_first_oom_unless_told);
    tcase_add_test(tc, replay_counts_teardown_failures);
    tcase_add_test(tc, replay_deferred_free_and_flush);
    tcase_add_test(tc, replay_repeat_multiplies_events);
    tcase_add_test(tc, parse_sizes);
    tcase_add_test(tc, format_sizes);
    tcase_add_test(tc, reference_files);
    tcase_add_test(tc, replay_oom_events);
    tcase_add_test(tc, replay_repeat_goes_past_the_death);
    tcase_add_test(tc, replay_several_devices);
    tcase_add_test(tc, report_says_what_the_trace_can_tell);
    tcase_add_test(tc, reference_per_device);
    tcase_add_test(tc, replay_binary_file_changed_after_loading);
    suite_add_tcase(s, tc);
    if (data_dir) {
        TCase *tt = tcase_create("traces");
        tcase_add_test(tt, expandable_segments_do_not_strand_slivers);
        tcase_add_test(tt, validate_agrees_with_itself_and_flags_a_slower_device);
        suite_add_tcase(s, tt);
    }
    return s;
}

int main(int argc, char **argv)
{
    data_dir = argc > 1 ? argv[1] : NULL;
    return run_suite(replay_suite());
}
