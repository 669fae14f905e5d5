/* test_fidelity.c - does the simulator reproduce what real PyTorch 2.11 did?
 *
 * For every reference run in shared/traces/pytorch-2.11-h100/ (the real allocator's events and
 * memory_stats under one policy and cap), replay the workload's `default` `nocap` trace under
 * that run's policy and truncated cap, and compare:
 *   - uncapped runs: segments cudaMalloc'd, device allocations (num_device_alloc) and peak
 *     reserved equal the real run's exactly;
 *   - capped runs: same outcome, peak reserved within 0.5%, and num_alloc_retries equal.
 * Both address modes are checked: reference addresses (segment n at the real segment n's
 * address), which must be exact everywhere, down to every key of torch.cuda.memory_stats(),
 * and the driver placement model, which must meet the contract above.
 *
 * Expandable-segment runs (expandable_segments:True) must be exact in both modes, every
 * memory_stats key included: their blocks only ever compare addresses within one virtual
 * reservation, so where the driver puts cudaMalloc segments cannot matter to them.
 *
 * Usage: test_fidelity CONVERT_PY TRACES_DIR WORK_DIR. Exit 77 (skip) when TRACES_DIR or
 * python3 is absent.
 */
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "testutil.h"

static const char *convert_py, *traces_dir, *work_dir;

/* Convert NAME.pickle.gz to WORK/NAME.gstrace.gz and WORK/NAME.ref.json (once). */
static void convert(const char *name)
{
    char *out = g_strdup_printf("%s/%s.gstrace.gz", work_dir, name);
    char *ref = g_strdup_printf("%s/%s.ref.json", work_dir, name);
    char *in = g_strdup_printf("%s/%s.pickle.gz", traces_dir, name);
    if (!g_file_test(ref, G_FILE_TEST_EXISTS)) {
        const char *argv[] = {"python3", convert_py, in, "-o", out, "--reference", ref, NULL};
        int status = 0;
        char *errout = NULL;
        GError *err = NULL;
        gboolean ok = g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL,
                                   NULL, &errout, &status, &err);
        ck_assert_msg(ok && g_spawn_check_wait_status(status, NULL), "convert %s failed: %s", name,
                      err ? err->message : errout);
        g_free(errout);
    }
    g_free(in);
    g_free(out);
    g_free(ref);
}

/* With reference addresses, the simulated run must match the real one in every key of
 * torch.cuda.memory_stats(), read back from the JSON report as a user would. Returns the number
 * of keys compared. */
static size_t check_memory_stats(const char *name, const gs_trace *t, const gs_result *r,
                                 const gs_reference *ref)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    gs_report(f, GS_FMT_JSON, name, t, r, 1, NULL, true);
    fclose(f);
    GError *err = NULL;
    gs_json *j = gs_json_parse("report", buf, len, &err);
    ck_assert_msg(j != NULL, "report JSON: %s", err ? err->message : "");
    const gs_json *results = gs_json_get(j, "results");
    ck_assert(results && results->n == 1);
    const gs_json *ms = gs_json_get(results->items[0], "memory_stats");
    ck_assert_ptr_nonnull(ms);
    GHashTableIter it;
    gpointer k, v;
    size_t n = 0;
    g_hash_table_iter_init(&it, ref->stats);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        int64_t sim;
        const gs_json *x = gs_json_get(ms, k);
        ck_assert_msg(x && gs_json_int(x, &sim), "%s: memory_stats lacks %s", name, (char *)k);
        ck_assert_msg(sim == *(int64_t *)v, "%s: %s is %" G_GINT64_FORMAT ", real %" G_GINT64_FORMAT,
                      name, (char *)k, sim, *(int64_t *)v);
        n++;
    }
    gs_json_free(j);
    free(buf);
    return n;
}

static void check_run(const char *name, bool reference_addresses)
{
    char workload[64];
    g_strlcpy(workload, name, sizeof workload);
    *strstr(workload, "__") = '\0';
    char *input_name = g_strdup_printf("%s__default__nocap", workload);
    convert(input_name);
    convert(name);
    char *input = g_strdup_printf("%s/%s.gstrace.gz", work_dir, input_name);
    char *refpath = g_strdup_printf("%s/%s.ref.json", work_dir, name);
    GError *err = NULL;
    gs_trace *t = gs_trace_load(input, 0, NULL, NULL, &err);
    ck_assert_msg(t != NULL, "%s", err ? err->message : "");
    gs_reference *ref = gs_reference_load(refpath, &err);
    ck_assert_msg(ref != NULL, "%s", err ? err->message : "");
    char *spec = g_strdup_printf("pytorch:%s", ref->allocator_conf);
    gs_policy *p = gs_policy_new(spec, &err);
    ck_assert_msg(p != NULL, "%s", err ? err->message : "");
    gs_replay_opts o = {.capacity = ref->cap_bytes, .device_total = ref->device_total,
                        .ref = reference_addresses ? ref : NULL};
    gs_result r;
    ck_assert(gs_replay_run(t, p, &o, &r, &err));

    int64_t real_peak = 0, real_segs = 0, real_retries = 0, real_devalloc = 0;
    ck_assert(gs_reference_stat(ref, "reserved_bytes.all.peak", &real_peak));
    ck_assert(gs_reference_stat(ref, "segment.all.allocated", &real_segs));
    ck_assert(gs_reference_stat(ref, "num_alloc_retries", &real_retries));
    ck_assert(gs_reference_stat(ref, "num_device_alloc", &real_devalloc));
    int64_t sim_peak = r.stats.reserved_bytes[GS_STAT_ALL].peak;
    int64_t sim_segs = r.stats.segment[GS_STAT_ALL].allocated;
    int64_t sim_devalloc = (int64_t)r.stats.num_device_alloc;
    bool expandable = strstr(ref->allocator_conf, "expandable_segments:True") != NULL;
    const char *mode = reference_addresses ? "reference addresses" : "placement model";
    printf("%-40s %-20s peak %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT " segments %" G_GINT64_FORMAT
           "/%" G_GINT64_FORMAT " device allocs %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT
           " retries %" G_GINT64_FORMAT "/%" G_GUINT64_FORMAT "\n",
           name, mode, real_peak, sim_peak, real_segs, sim_segs, real_devalloc, sim_devalloc,
           real_retries, r.stats.num_alloc_retries);
    ck_assert_str_eq(r.oom ? "oom" : "ok", ref->outcome);
    ck_assert_int_eq(r.error, GS_OK);
    ck_assert_msg((int64_t)r.stats.num_alloc_retries == real_retries, "%s (%s): retries %" G_GUINT64_FORMAT " vs real %" G_GINT64_FORMAT,
                  name, mode, r.stats.num_alloc_retries, real_retries);
    if (ref->cap_bytes == 0 || reference_addresses || expandable) {
        ck_assert_msg(sim_devalloc == real_devalloc, "%s (%s): num_device_alloc %" G_GINT64_FORMAT " vs real %" G_GINT64_FORMAT,
                      name, mode, sim_devalloc, real_devalloc);
        ck_assert_msg(sim_peak == real_peak, "%s (%s): peak reserved %" G_GINT64_FORMAT " vs real %" G_GINT64_FORMAT,
                      name, mode, sim_peak, real_peak);
        ck_assert_msg(sim_segs == real_segs, "%s (%s): segments %" G_GINT64_FORMAT " vs real %" G_GINT64_FORMAT,
                      name, mode, sim_segs, real_segs);
    } else {
        double rel = (double)(sim_peak - real_peak) / (double)real_peak;
        ck_assert_msg(rel < 0.005 && rel > -0.005, "%s (%s): peak reserved off by %.3f%%", name,
                      mode, 100 * rel);
    }
    if (reference_addresses) /* every segment must have found its real address */
        ck_assert_uint_eq(r.script_used, ref->n_segment_alloc);
    if (reference_addresses || expandable) {
        size_t keys = check_memory_stats(name, t, &r, ref);
        ck_assert_uint_ge(keys, 100);
        printf("%-40s %-20s all %zu memory_stats keys equal\n", name, mode, keys);
    }

    gs_result_clear(&r);
    gs_policy_free(p);
    g_free(spec);
    gs_reference_free(ref);
    gs_trace_free(t);
    g_free(input);
    g_free(refpath);
    g_free(input_name);
}

static GPtrArray *runs; /* reference run names (NAME of NAME.pickle.gz), sorted */

static gint by_name(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

START_TEST(reference_addresses)
{
    check_run(runs->pdata[_i], true);
}
END_TEST

START_TEST(placement_model)
{
    check_run(runs->pdata[_i], false);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s CONVERT_PY TRACES_DIR WORK_DIR\n", argv[0]);
        return 2;
    }
    convert_py = argv[1];
    traces_dir = argv[2];
    work_dir = argv[3];
    GDir *d = g_dir_open(traces_dir, 0, NULL);
    if (!d) {
        printf("SKIP: no reference traces at %s\n", traces_dir);
        return 77;
    }
    char *py = g_find_program_in_path("python3");
    if (!py) {
        printf("SKIP: python3 not found (needed to convert the reference snapshots)\n");
        return 77;
    }
    g_free(py);
    g_mkdir_with_parents(work_dir, 0755);
    runs = g_ptr_array_new_with_free_func(g_free);
    const char *f;
    while ((f = g_dir_read_name(d))) {
        if (!g_str_has_suffix(f, ".pickle.gz")) continue;
        g_ptr_array_add(runs, g_strndup(f, strlen(f) - strlen(".pickle.gz")));
    }
    g_dir_close(d);
    g_ptr_array_sort(runs, by_name);
    if (runs->len == 0) {
        printf("SKIP: no reference runs in %s\n", traces_dir);
        return 77;
    }
    Suite *s = suite_create("fidelity");
    TCase *tc = tcase_create("pytorch-2.11-h100");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, reference_addresses, 0, (int)runs->len);
    tcase_add_loop_test(tc, placement_model, 0, (int)runs->len);
    suite_add_tcase(s, tc);
    int rc = run_suite_forking(s, false); /* the conversions of one test serve the next */
    g_ptr_array_free(runs, TRUE);
    return rc;
}
