/* test_replay.c - the replay engine on built traces (outcomes, first OOM, continue-on-oom,
 * deferred frees, empty_cache, repeat), size parsing, reference files, and the bundled
 * synthetic batch-alternate trace that expandable segments exist for.
 *
 * Usage: test_replay [TRACE_DATA_DIR] (traces/data; the trace-file tests need it). */
#include <glib/gstdio.h>
#include <string.h>

#include "replay.h"
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

START_TEST(format_sizes)
{
    char *s = gs_format_size(20 * MiB);
    ck_assert_str_eq(s, "20.00 MiB");
    g_free(s);
    s = gs_format_size(512);
    ck_assert_str_eq(s, "512 B");
    g_free(s);
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

static Suite *replay_suite(void)
{
    Suite *s = suite_create("replay");
    TCase *tc = tcase_create("engine");
    tcase_add_test(tc, replay_counts_like_the_heap);
    tcase_add_test(tc, replay_stops_at_first_oom_unless_told);
    tcase_add_test(tc, replay_deferred_free_and_flush);
    tcase_add_test(tc, replay_repeat_multiplies_events);
    tcase_add_test(tc, parse_sizes);
    tcase_add_test(tc, format_sizes);
    tcase_add_test(tc, reference_files);
    suite_add_tcase(s, tc);
    if (data_dir) {
        TCase *tt = tcase_create("traces");
        tcase_add_test(tt, expandable_segments_do_not_strand_slivers);
        suite_add_tcase(s, tt);
    }
    return s;
}

int main(int argc, char **argv)
{
    data_dir = argc > 1 ? argv[1] : NULL;
    return run_suite(replay_suite());
}
