/* test_fidelity.c - does the simulator reproduce what real PyTorch 2.11 did?
 *
 * For every reference run (NAME.pickle.gz with NAME.json) in the folders given - the shared
 * ones beside the checkout and the repository's own traces/references/ folders - convert the run's
 * own snapshot (traces/convert.py --reference), replay it under that run's policy and
 * truncated cap (each device its own, from the reference), and compare, device by device:
 * the contract is the outcome (with the event of a fatal OOM), peak reserved, segments, device
 * allocs and frees, retries and OOMs, all equal. Both address modes: reference addresses
 * (segment n at the real segment n's address, every segment finding it) and the driver
 * placement model alone. With reference addresses every key of torch.cuda.memory_stats()
 * must be equal too, and with the model too for expandable-segment runs, whose blocks only
 * compare addresses within one reservation.
 *
 * tests/data/fidelity-known.tsv lists the runs that do not meet all of it and why; those must
 * still keep the outcome, and must really differ (a listed run that became exact fails, so
 * the list stays true). For a run listed as differing only with the model, the test prints the
 * evidence: the first of the real run's segments that the driver rules, fed the real run's own
 * cudaMalloc and cudaFree sequence, put elsewhere.
 *
 * Usage: test_fidelity CONVERT_PY KNOWN_TSV WORK_DIR DIR... Exit 77 (skip) when no DIR holds a
 * run, or python3 is absent.
 */
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "testutil.h"

static const char *convert_py, *known_path, *work_dir;

typedef struct {
    char *dir, *name;
} run;

typedef struct {
    char *pattern, *what, *why;
} known;

static GArray *runs;   /* run, sorted by name */
static GArray *knowns; /* known */

/* Is run listed in tests/data/fidelity-known.tsv as what? *why: its reason. */
static bool is_known(const char *name, const char *what, const char **why)
{
    for (guint i = 0; i < knowns->len; i++) {
        const known *k = &g_array_index(knowns, known, i);
        if (strcmp(k->what, what) != 0 || !g_pattern_match_simple(k->pattern, name)) continue;
        if (why) *why = k->why;
        return true;
    }
    return false;
}

/* Convert DIR/NAME.pickle.gz to WORK/NAME.gstrace.gz and WORK/NAME.ref.json (once). */
static void convert(const run *r)
{
    char *out = g_strdup_printf("%s/%s.gstrace.gz", work_dir, r->name);
    char *ref = g_strdup_printf("%s/%s.ref.json", work_dir, r->name);
    char *in = g_strdup_printf("%s/%s.pickle.gz", r->dir, r->name);
    if (!g_file_test(ref, G_FILE_TEST_EXISTS)) {
        const char *argv[] = {"python3", convert_py, in, "-o", out, "--reference", ref, NULL};
        int status = 0;
        char *errout = NULL;
        GError *err = NULL;
        gboolean ok = g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL,
                                   NULL, &errout, &status, &err);
        ck_assert_msg(ok && g_spawn_check_wait_status(status, NULL), "convert %s failed: %s",
                      r->name, err ? err->message : errout);
        g_free(errout);
    }
    g_free(in);
    g_free(out);
    g_free(ref);
}

/* The contract, one device (or a one-device run): NULL when every number equals the real
 * run's, else what differs first (g_free it). */
static char *contract(const gs_result *r, const gs_reference *ref)
{
    int64_t real[7] = {0};
    real[0] = (int64_t)ref->peak_reserved;
    real[1] = real[2] = (int64_t)ref->n_segment_alloc;
    real[3] = (int64_t)ref->n_device_free;
    gs_reference_stat(ref, "reserved_bytes.all.peak", &real[0]);
    gs_reference_stat(ref, "segment.all.allocated", &real[1]);
    gs_reference_stat(ref, "num_device_alloc", &real[2]);
    gs_reference_stat(ref, "num_device_free", &real[3]);
    ck_assert(gs_reference_stat(ref, "num_alloc_retries", &real[4]));
    ck_assert(gs_reference_stat(ref, "num_ooms", &real[5]));
    const int64_t sim[7] = {r->stats.reserved_bytes[GS_STAT_ALL].peak,
                            r->stats.segment[GS_STAT_ALL].allocated,
                            (int64_t)r->stats.num_device_alloc, (int64_t)r->stats.num_device_free,
                            (int64_t)r->stats.num_alloc_retries, (int64_t)r->stats.num_ooms};
    static const char *const names[6] = {"peak reserved", "segments", "device allocs",
                                         "device frees", "retries", "OOMs"};
    const char *outcome = r->error != GS_OK ? "error" : r->oom ? "oom" : "ok";
    if (!ref->outcome || strcmp(ref->outcome, outcome) != 0)
        return g_strdup_printf("outcome %s, real %s", outcome, ref->outcome ? ref->outcome : "?");
    if (ref->has_outcome_event && r->oom && r->first_oom_event != ref->outcome_event)
        return g_strdup_printf("died at event %zu, real %zu", r->first_oom_event, ref->outcome_event);
    for (int i = 0; i < 6; i++)
        if (sim[i] != real[i])
            return g_strdup_printf("%s %" G_GINT64_FORMAT ", real %" G_GINT64_FORMAT, names[i],
                                   sim[i], real[i]);
    return NULL;
}

/* Every key of the real run's torch.cuda.memory_stats() against the simulated one, read back
 * from the JSON report as a user would (devices: under "devices"). Returns the keys compared;
 * the first that differs in *why. */
static size_t memory_stats_equal(const char *name, const gs_trace *t, const gs_result *r,
                                 const gs_reference *ref, char **why)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    gs_report(f, GS_FMT_JSON, name, t, r, 1, NULL, true);
    fclose(f);
    GError *err = NULL;
    gs_json *j = gs_json_parse("report", buf, len, &err);
    ck_assert_msg(j != NULL, "report JSON: %s", err ? err->message : "");
    const gs_json *res = gs_json_get(j, "results")->items[0];
    size_t n = 0;
    size_t nd = r->n_devices ? r->n_devices : 1;
    for (size_t d = 0; d < nd; d++) {
        const gs_reference *dref = r->n_devices ? gs_reference_device(ref, r->devices[d].device) : ref;
        const gs_json *dres = res;
        if (r->n_devices) {
            char id[16];
            g_snprintf(id, sizeof id, "%u", r->devices[d].device);
            dres = gs_json_get(gs_json_get(res, "devices"), id);
        }
        ck_assert_ptr_nonnull(dref && dref->stats ? dres : NULL);
        const gs_json *ms = gs_json_get(dres, "memory_stats");
        GHashTableIter it;
        gpointer k, v;
        g_hash_table_iter_init(&it, dref->stats);
        while (g_hash_table_iter_next(&it, &k, &v)) {
            int64_t sim;
            const gs_json *x = gs_json_get(ms, k);
            ck_assert_msg(x && gs_json_int(x, &sim), "%s: memory_stats lacks %s", name, (char *)k);
            if (sim != *(int64_t *)v && !*why)
                *why = g_strdup_printf("%s is %" G_GINT64_FORMAT ", real %" G_GINT64_FORMAT,
                                       (char *)k, sim, *(int64_t *)v);
            n++;
        }
    }
    gs_json_free(j);
    free(buf);
    return n;
}

/* The evidence for a run that differs only with the placement model: the real run's own
 * segment_alloc/segment_free sequence (its device_events) through the driver rules, X fitted
 * to its first segment; the first segment placed elsewhere than the real one, as a sentence
 * (g_free it), or NULL when every one lands at its real offset. */
static char *first_misplaced(const char *refpath, uint64_t total)
{
    GError *err = NULL;
    gs_json *j = gs_json_load(refpath, &err);
    ck_assert_ptr_nonnull(j);
    const gs_json *evs = gs_json_get(j, "device_events");
    gs_sim_config sc = {.total_bytes = total, .align_512m = gs_sim_h200_like(total)};
    gs_backend *be = NULL;
    GHashTable *sim_of = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
    uint64_t x = 0;
    size_t n = 0;
    char *why = NULL;
    for (size_t i = 0; i < evs->n && !why; i++) {
        const gs_json *e = evs->items[i];
        uint64_t addr = 0, size = 0, a = 0;
        gs_json_uint(e->items[1], &addr);
        gs_json_uint(e->items[2], &size);
        if (strcmp(e->items[0]->str, "segment_alloc") == 0) {
            if (!be) { /* X: where the rules say the first segment goes */
                gs_backend *probe = gs_sim_backend_new(&sc);
                ck_assert_int_eq(gs_dev_malloc(probe, NULL, size, &a), GS_OK);
                x = addr - (a - gs_sim_origin(probe));
                gs_backend_destroy(probe);
                sc.origin = x;
                be = gs_sim_backend_new(&sc);
            }
            ck_assert_int_eq(gs_dev_malloc(be, NULL, size, &a), GS_OK);
            if (a != addr)
                why = g_strdup_printf("the real run's segment #%zu (%" G_GUINT64_FORMAT " MiB) is at "
                                      "X%+.0f MiB, the driver rules put it at X%+.0f MiB", n,
                                      size / GS_MiB, ((double)addr - (double)x) / GS_MiB,
                                      ((double)a - (double)x) / GS_MiB);
            uint64_t *k = g_new(uint64_t, 1), *v = g_new(uint64_t, 1);
            *k = addr;
            *v = a;
            g_hash_table_insert(sim_of, k, v);
            n++;
        } else if (strcmp(e->items[0]->str, "segment_free") == 0) {
            uint64_t *v = g_hash_table_lookup(sim_of, &addr);
            if (v) ck_assert_int_eq(gs_dev_free(be, NULL, *v, size), GS_OK);
            g_hash_table_remove(sim_of, &addr);
        }
    }
    g_hash_table_destroy(sim_of);
    if (be) gs_backend_destroy(be);
    gs_json_free(j);
    return why;
}

static void check_run(const run *run_, bool reference_addresses)
{
    const char *name = run_->name;
    convert(run_);
    char *input = g_strdup_printf("%s/%s.gstrace.gz", work_dir, name);
    char *refpath = g_strdup_printf("%s/%s.ref.json", work_dir, name);
    GError *err = NULL;
    gs_trace *t = gs_trace_load(input, 0, NULL, NULL, &err);
    ck_assert_msg(t != NULL, "%s", err ? err->message : "");
    gs_reference *ref = gs_reference_load(refpath, &err);
    ck_assert_msg(ref != NULL, "%s", err ? err->message : "");
    char *spec = g_strdup_printf("pytorch:%s", ref->allocator_conf ? ref->allocator_conf : "");
    gs_policy *p = gs_policy_new(spec, &err);
    ck_assert_msg(p != NULL, "%s", err ? err->message : "");
    gs_device_opts *dev = g_new0(gs_device_opts, ref->n_devices + 1);
    for (size_t k = 0; k < ref->n_devices; k++)
        dev[k] = (gs_device_opts){.device = ref->device_ids[k],
                                  .capacity = ref->devices[k]->cap_bytes,
                                  .device_total = ref->devices[k]->device_total};
    gs_replay_opts o = {.capacity = ref->n_devices ? 0 : ref->cap_bytes,
                        .device_total = ref->device_total,
                        .ref = reference_addresses ? ref : NULL,
                        .devices = dev, .n_devices = ref->n_devices};
    gs_result r;
    ck_assert_msg(gs_replay_run(t, p, &o, &r, &err), "%s", err ? err->message : "");
    ck_assert_int_eq(r.error, GS_OK);
    const char *mode = reference_addresses ? "reference addresses" : "placement model";
    const char *why = NULL;
    bool scope = is_known(name, "scope", &why);
    bool expandable = ref->allocator_conf && strstr(ref->allocator_conf, "expandable_segments:True");
    bool expect_differ = is_known(name, "both", &why) ||
                         (!reference_addresses && is_known(name, "model", &why));

    /* the contract, device by device */
    char *differs = NULL;
    size_t nd = r.n_devices ? r.n_devices : 1;
    for (size_t d = 0; d < nd && !differs; d++) {
        const gs_result *dr = r.n_devices ? &r.devices[d] : &r;
        const gs_reference *dref = r.n_devices ? gs_reference_device(ref, dr->device) : ref;
        ck_assert_msg(dref, "%s: no reference for device %u", name, dr->device);
        differs = contract(dr, dref);
        if (differs && r.n_devices) {
            char *w = g_strdup_printf("device %u: %s", dr->device, differs);
            g_free(differs);
            differs = w;
        }
        if (reference_addresses && !scope && !expect_differ) /* every segment at its address */
            ck_assert_uint_eq(dr->script_used, dref->n_segment_alloc);
    }
    printf("%-40s %-20s %s%s%s\n", name, mode, differs ? "differs: " : "exact",
           differs ? differs : "", scope ? " (not in scope)" : "");
    if (scope) {
        /* another issue's: it converts and replays, that is all */
    } else if (expect_differ) {
        ck_assert_msg(differs, "%s (%s) is exact now: take it off tests/data/fidelity-known.tsv", name,
                      mode);
        /* still: the outcome, and where a fatal OOM came */
        ck_assert_msg(!strstr(differs, "outcome") && !strstr(differs, "died at"), "%s (%s): %s",
                      name, mode, differs);
        if (!reference_addresses && is_known(name, "model", NULL)) {
            char *ev = first_misplaced(refpath, ref->device_total ? ref->device_total : 80 * GiB);
            ck_assert_msg(ev, "%s: listed as misplaced, but the rules place every segment", name);
            printf("%-40s %-20s evidence: %s\n", name, mode, ev);
            g_free(ev);
        }
    } else {
        ck_assert_msg(!differs, "%s (%s): %s", name, mode, differs);
    }
    /* every memory_stats key: with reference addresses, and with expandable segments */
    bool all_keys = !scope && !expect_differ && !is_known(name, "stats", NULL) &&
                    (reference_addresses || (expandable && !is_known(name, "model", NULL)));
    if (all_keys) {
        char *kwhy = NULL;
        size_t keys = memory_stats_equal(name, t, &r, ref, &kwhy);
        ck_assert_msg(!kwhy, "%s (%s): %s", name, mode, kwhy);
        ck_assert_uint_ge(keys, 100);
        printf("%-40s %-20s all %zu memory_stats keys equal\n", name, mode, keys);
    } else if (!scope && is_known(name, "stats", NULL) && reference_addresses) {
        char *kwhy = NULL;
        memory_stats_equal(name, t, &r, ref, &kwhy);
        ck_assert_msg(kwhy, "%s: every memory_stats key is equal now: take its 'stats' line off "
                            "tests/data/fidelity-known.tsv", name);
        printf("%-40s %-20s memory_stats differ as listed: %s\n", name, mode, kwhy);
        g_free(kwhy);
    }
    g_free(differs);
    gs_result_clear(&r);
    g_free(dev);
    gs_policy_free(p);
    g_free(spec);
    gs_reference_free(ref);
    gs_trace_free(t);
    g_free(input);
    g_free(refpath);
}

START_TEST(reference_addresses)
{
    check_run(&g_array_index(runs, run, _i), true);
}
END_TEST

START_TEST(placement_model)
{
    check_run(&g_array_index(runs, run, _i), false);
}
END_TEST

static gint by_name(gconstpointer a, gconstpointer b)
{
    return strcmp(((const run *)a)->name, ((const run *)b)->name);
}

/* The runs in dir (NAME.pickle.gz), and, one level down, in its folders (traces/references/). */
static void add_runs(const char *dir, bool descend)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    if (!d) return;
    const char *f;
    while ((f = g_dir_read_name(d))) {
        char *path = g_build_filename(dir, f, NULL);
        if (g_str_has_suffix(f, ".pickle.gz")) {
            run r = {g_strdup(dir), g_strndup(f, strlen(f) - strlen(".pickle.gz"))};
            g_array_append_val(runs, r);
        } else if (descend && g_file_test(path, G_FILE_TEST_IS_DIR)) {
            add_runs(path, false);
        }
        g_free(path);
    }
    g_dir_close(d);
}

/* A fresh work folder: conversions are cached within one run of the test only (a converter
 * changed since must not be met by its old output). */
static void clear_work_dir(void)
{
    g_mkdir_with_parents(work_dir, 0755);
    GDir *d = g_dir_open(work_dir, 0, NULL);
    const char *f;
    while (d && (f = g_dir_read_name(d))) {
        if (!g_str_has_suffix(f, ".gstrace.gz") && !g_str_has_suffix(f, ".ref.json")) continue;
        char *p = g_build_filename(work_dir, f, NULL);
        g_unlink(p);
        g_free(p);
    }
    if (d) g_dir_close(d);
}

static void load_known(void)
{
    knowns = g_array_new(FALSE, FALSE, sizeof(known));
    char *text = NULL;
    if (!g_file_get_contents(known_path, &text, NULL, NULL)) {
        fprintf(stderr, "test_fidelity: cannot read %s\n", known_path);
        exit(1);
    }
    char **lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l; l++) {
        if (**l == '#' || !**l) continue;
        char **f = g_strsplit(*l, "\t", 3);
        if (g_strv_length(f) != 3) {
            fprintf(stderr, "test_fidelity: %s: not RUN<TAB>WHAT<TAB>WHY: %s\n", known_path, *l);
            exit(1);
        }
        known k = {f[0], f[1], f[2]};
        g_array_append_val(knowns, k);
        g_free(f); /* the strings live in k */
    }
    g_strfreev(lines);
    g_free(text);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s CONVERT_PY KNOWN_TSV WORK_DIR DIR...\n", argv[0]);
        return 2;
    }
    convert_py = argv[1];
    known_path = argv[2];
    work_dir = argv[3];
    runs = g_array_new(FALSE, FALSE, sizeof(run));
    for (int a = 4; a < argc; a++) {
        if (!g_file_test(argv[a], G_FILE_TEST_IS_DIR)) {
            printf("no reference traces at %s\n", argv[a]);
            continue;
        }
        add_runs(argv[a], true);
    }
    if (runs->len == 0) {
        printf("SKIP: no reference runs in the folders given\n");
        return 77;
    }
    char *py = g_find_program_in_path("python3");
    if (!py) {
        printf("SKIP: python3 not found (needed to convert the reference snapshots)\n");
        return 77;
    }
    g_free(py);
    g_array_sort(runs, by_name);
    /* a run is known by its name alone (its conversions in the work folder, the known list,
     * the bench scripts that gather every folder's runs into one): two folders must not hold
     * one name */
    for (guint i = 1; i < runs->len; i++) {
        const run *a = &g_array_index(runs, run, i - 1), *b = &g_array_index(runs, run, i);
        if (strcmp(a->name, b->name) == 0) {
            fprintf(stderr, "test_fidelity: %s.pickle.gz is in %s and in %s: rename one\n", a->name,
                    a->dir, b->dir);
            return 1;
        }
    }
    load_known();
    clear_work_dir();
    Suite *s = suite_create("fidelity");
    TCase *tc = tcase_create("pytorch-2.11");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, reference_addresses, 0, (int)runs->len);
    tcase_add_loop_test(tc, placement_model, 0, (int)runs->len);
    suite_add_tcase(s, tc);
    int rc = run_suite_forking(s, false); /* the conversions of one test serve the next */
    for (guint i = 0; i < runs->len; i++) {
        g_free(g_array_index(runs, run, i).dir);
        g_free(g_array_index(runs, run, i).name);
    }
    g_array_free(runs, TRUE);
    for (guint i = 0; i < knowns->len; i++) {
        known *k = &g_array_index(knowns, known, i);
        g_free(k->pattern);
        g_free(k->what);
        g_free(k->why);
    }
    g_array_free(knowns, TRUE);
    return rc;
}
