/* cmd_sweep.c - gpusim sweep: one trace over a grid of settings and capacities (sim/sweep.c),
 * one CSV row per cell (report/), optionally the sweep's plot.
 */
#include <string.h>

#include "cli.h"
#include "sweep.h"

static const char sweep_description[] =
    "Each brace list in --policy or --capacity is a parameter of the grid, named by the key in\n"
    "front of it (max_split_size_mb, garbage_collection_threshold, ...), 'capacity', or\n"
    "'policy_name' (a list in the policy's name); several --policy templates add a 'template'\n"
    "parameter. A list may hold ranges: {64..512..64}, {5.5..6.5..0.25}GiB (A..B, step 1 by\n"
    "default). Cells are the product of the lists, the first\n"
    "list outermost; they run in parallel (-j), and the CSV has one row per cell, in grid order:\n"
    "cell, one column per parameter, then the columns of 'gpusim replay --format csv'.\n"
    "A sweep has at most 10000 cells (a larger grid is refused: split it).\n"
    "\n"
    "On a cluster: --shard K/N replays only the cells i with i mod N = K (K from 0 to N-1), with\n"
    "the same header and each row's cell number the whole grid's; 'gpusim sweep --merge\n"
    "SHARD.csv...' checks that the headers agree and every cell is there once, and writes the\n"
    "single-machine CSV, in grid order (give the grid's --policy and --capacity too, and it\n"
    "also checks that no cell at the end is missing). A Slurm job array:\n"
    "  sbatch --array=0-7 --wrap 'gpusim sweep T -p ... --shard\n"
    "      $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT -o shard-$SLURM_ARRAY_TASK_ID.csv'\n"
    "  gpusim sweep --merge shard-*.csv -p ... -o sweep.csv\n"
    "GNU parallel: parallel gpusim sweep T -p ... --shard {}/8 -o shard-{}.csv ::: $(seq 0 7)\n"
    "--shard auto takes K and N from a Slurm job array (SLURM_ARRAY_TASK_ID less\n"
    "SLURM_ARRAY_TASK_MIN, SLURM_ARRAY_TASK_COUNT); --shard auto/N takes K from a Kubernetes\n"
    "Indexed Job's JOB_COMPLETION_INDEX (N: the Job's completions), or from Slurm. Refused when\n"
    "neither is set.\n"
    "\n"
    "Examples:\n"
    "  gpusim sweep traces/data/resnet50.gstrace.gz \\\n"
    "      --policy 'pytorch:max_split_size_mb:{64,128,256,512}' --capacity '{5.75,6.25}GiB' \\\n"
    "      -o sweep.csv --plot plots/        # 8 cells; plots/resnet50-sweep.png\n"
    "  gpusim sweep trace.gstrace -p 'pytorch:garbage_collection_threshold:{0.5,0.7,0.9}' \\\n"
    "      -p pytorch:expandable_segments:True --capacity 20GiB -j 4\n"
    "  gpusim plot sweep.csv                  # redraw the sweep's plot from its CSV\n"
    "\n"
    "--plot DIR draws NAME-sweep (.png, .svg, with its .gp and .dat): peak reserved, waste,\n"
    "retries and modelled device time against a parameter (the first numeric one every cell\n"
    "has, else the first), one line per value of the others, OOM cells marked; with a capacity\n"
    "list, NAME-matrix too: a row per policy setting, a column per capacity, each cell ok or OOM\n"
    "with its retries. A progress line goes to stderr when it is a terminal.\n"
    "\n"
    "Exit status: 0 the CSV was written (OOM outcomes included), 1 a cell stopped on a device\n"
    "error, 2 bad usage or bad input, or the host out of memory (the finished cells' rows are\n"
    "written, and sweep --merge names the others), 3 --plot could not draw (the CSV is written\n"
    "anyway), 4 with --fail-on-oom: some cell met an OOM (the CSV is written anyway).";

/* What a sweep's cells share with its progress callback and with the finisher that writes the
 * finished cells when host memory runs out (cli/nomem.c). */
typedef struct {
    const char *name; /* the trace's, as given */
    const gs_sweep *sw;
    const gs_trace *t;
    const gs_result *rs;
    gint *finished; /* per cell: its result is complete */
    gs_cli_out *out;
    bool progress;
} sweep_run;

static void sweep_progress(size_t cell, size_t done, size_t total, void *ud)
{
    sweep_run *r = ud;
    g_atomic_int_set(&r->finished[cell], 1);
    if (r->progress) gs_cli_progress_line(r->name, done, total, "cells");
}

/* Out of host memory: the finished cells' rows, in grid order, where -o says. */
static void sweep_write_finished(void *ud)
{
    sweep_run *r = ud;
    size_t n = r->sw->cells->len, k = 0;
    for (size_t i = 0; i < n; i++) k += g_atomic_int_get(&r->finished[i]) != 0;
    gs_sweep_csv(r->out->f, r->sw, r->name, r->t, r->rs, r->finished);
    gs_cli_close_output(r->out);
    fprintf(stderr, "gpusim: %zu of %zu cells finished; their rows are written%s\n", k, n,
            k < n ? " (sweep --merge names the missing ones)" : "");
}

/* Every cell of sw into rs, or exit 2; out of host memory meanwhile, the finished cells' rows
 * go to out before the exit. */
static void run_cells(const gs_cli *c, const char *name, const gs_sweep *sw, const gs_trace *t,
                      const gs_replay_opts *o, gs_result *rs, gs_cli_out *out)
{
    sweep_run run = {.name = name,
                     .sw = sw,
                     .t = t,
                     .rs = rs,
                     .finished = g_new0(gint, sw->cells->len),
                     .out = out,
                     .progress = c->progress};
    gs_cli_nomem nomem;
    char *work = g_strdup_printf("sweep of %s", name);
    gs_cli_nomem_arm(&nomem, work);
    gs_cli_nomem_finisher(&nomem, sweep_write_finished, &run);
    GError *err = NULL;
    gboolean ran = gs_sweep_run(sw, t, o, (unsigned)c->jobs, sweep_progress, &run, rs, &err);
    gs_cli_nomem_disarm(&nomem);
    g_free(work);
    g_free(run.finished);
    if (!ran) gs_cli_usage_error("%s", err->message);
    if (c->progress) fputs("\r\033[K", stderr);
}

/* An environment variable that must be a whole number (its name in the refusal). */
static guint64 env_number(const char *name, guint64 min)
{
    const char *v = g_getenv(name);
    guint64 x = 0;
    if (!v || !g_ascii_string_to_unsigned(v, 10, min, G_MAXUINT, &x, NULL))
        gs_cli_usage_error("--shard auto: %s is '%s', not a whole number", name, v ? v : "");
    return x;
}

/* --shard auto[/N]: the shard the scheduler gave this task. Slurm's job array: K is
 * SLURM_ARRAY_TASK_ID less SLURM_ARRAY_TASK_MIN (an --array=1-8 counts from 1), N
 * SLURM_ARRAY_TASK_COUNT unless given; a Kubernetes Indexed Job: K is JOB_COMPLETION_INDEX and N
 * must be given (the Job's completions: Kubernetes puts no count in the environment). */
static char *auto_shard(const char *s)
{
    const char *n_given = s[4] == '/' ? s + 5 : NULL;
    if (s[4] && !n_given) gs_cli_usage_error("--shard: '%s' is not auto or auto/N", s);
    guint64 k, n = 0;
    if (g_getenv("SLURM_ARRAY_TASK_ID")) {
        k = env_number("SLURM_ARRAY_TASK_ID", 0);
        guint64 min = g_getenv("SLURM_ARRAY_TASK_MIN") ? env_number("SLURM_ARRAY_TASK_MIN", 0) : 0;
        if (k < min) gs_cli_usage_error("--shard auto: SLURM_ARRAY_TASK_ID is below SLURM_ARRAY_TASK_MIN");
        k -= min;
        if (!n_given) n = env_number("SLURM_ARRAY_TASK_COUNT", 1);
    } else if (g_getenv("JOB_COMPLETION_INDEX")) {
        k = env_number("JOB_COMPLETION_INDEX", 0);
        if (!n_given)
            gs_cli_usage_error("--shard auto: a Kubernetes Indexed Job says which shard "
                               "(JOB_COMPLETION_INDEX) but not how many: give --shard auto/N, N "
                               "the Job's completions");
    } else {
        gs_cli_usage_error("--shard auto: neither Slurm's SLURM_ARRAY_TASK_ID nor Kubernetes' "
                           "JOB_COMPLETION_INDEX is set: give --shard K/N");
    }
    return n_given ? g_strdup_printf("%" G_GUINT64_FORMAT "/%s", k, n_given)
                   : g_strdup_printf("%" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT, k, n);
}

/* "K/N" of --shard: 0 <= K < N, plain decimal digits; "auto" or "auto/N": auto_shard. */
static void parse_shard(const char *given, unsigned *k, unsigned *n)
{
    char *s_own = g_str_has_prefix(given, "auto") ? auto_shard(given) : NULL;
    const char *s = s_own ? s_own : given;
    guint64 kk = 0, nn = 0;
    const char *slash = strchr(s, '/');
    char *ks = slash ? g_strndup(s, (gsize)(slash - s)) : NULL;
    gboolean ok = slash && g_ascii_string_to_unsigned(ks, 10, 0, G_MAXUINT, &kk, NULL) &&
                  g_ascii_string_to_unsigned(slash + 1, 10, 1, G_MAXUINT, &nn, NULL);
    g_free(ks);
    if (!ok) gs_cli_usage_error("--shard: '%s' is not K/N (e.g. 0/4: the first of 4 shards)", s);
    if (kk >= nn)
        gs_cli_usage_error("--shard %s: K runs from 0 to N-1 (Slurm: --array=0-%" G_GUINT64_FORMAT
                           ")", s, nn - 1);
    *k = (unsigned)kk;
    *n = (unsigned)nn;
    g_free(s_own);
}

/* gpusim sweep --merge FILE...: the shards' CSVs as one (report/sweep_merge.c). */
static int merge_shards(gs_cli *c, int argc, char **argv, const gs_sweep *grid)
{
    size_t n = (size_t)argc - 1;
    for (size_t i = 1; i < n; i++) /* (else: "cell 0 again (it is also at the same file)") */
        for (size_t j = 0; j < i; j++)
            if (gs_cli_same_file(argv[i + 1], argv[j + 1]))
                gs_cli_usage_error("sweep --merge: %s is given twice (as %s too)", argv[i + 1],
                                   argv[j + 1]);
    char **texts = g_new0(char *, n + 1);
    size_t *lens = g_new0(size_t, n);
    for (size_t i = 0; i < n; i++) {
        GError *err = NULL;
        size_t len = 0;
        if (!gs_read_text(argv[i + 1], &texts[i], &len, &err)) {
            g_strfreev(texts);
            g_free(lens);
            gs_cli_usage_error("%s", err->message);
        }
        lens[i] = len;
    }
    gs_cli_out out;
    gs_cli_open_output(&out, c, (const char *const *)argv + 1, c->output);
    GError *err = NULL;
    bool any_oom = false;
    gboolean ok = gs_sweep_csv_merge(out.f, (const char *const *)argv + 1,
                                     (const char *const *)texts, lens, n, grid, &any_oom, &err);
    g_strfreev(texts); /* before exiting on a refusal too: the leak checker sees no stack then */
    g_free(lens);
    if (!ok) gs_cli_usage_error("%s", err->message);
    gs_cli_close_output(&out);
    return c->fail_on_oom && any_oom ? GS_EXIT_OOM : GS_EXIT_OK;
}

/* The sweep's plot: each cell's bars-style numbers against its parameters; with a capacity
 * list, the policy x capacity matrix too. */
static int plot_sweep(const char *dir, const char *path, const char *report, const gs_sweep *sw,
                      const gs_result *rs)
{
    GError *err = NULL;
    gs_plotter *plotter = gs_plotter_new(dir, &err);
    if (!plotter) gs_cli_usage_error("--plot: %s", err->message);
    gs_plotter_keep(plotter, path);
    gs_plotter_keep_report(plotter, report);
    size_t n = sw->cells->len;
    gs_plot_run *runs = g_new0(gs_plot_run, n);
    const char **values = g_new0(const char *, n * sw->params->len + 1);
    for (size_t i = 0; i < n; i++) {
        const gs_sweep_cell *c = &g_array_index(sw->cells, gs_sweep_cell, i);
        gs_plot_run_from_result(&runs[i], &rs[i], NULL);
        for (guint k = 0; k < sw->params->len; k++) values[i * sw->params->len + k] = c->values[k];
    }
    if (!gs_plot_sweep(plotter, path, (const char *const *)sw->params->pdata, sw->params->len,
                       values, runs, n, &err) ||
        !gs_plot_matrix(plotter, path, (const char *const *)sw->params->pdata, sw->params->len,
                        values, runs, n, &err))
        gs_cli_usage_error("--plot: %s", err->message);
    int rc = gs_cli_render_plots(plotter) ? GS_EXIT_OK : GS_EXIT_PLOT;
    for (size_t i = 0; i < n; i++) gs_plot_run_clear(&runs[i]);
    g_free(runs);
    g_free(values);
    gs_plotter_free(plotter);
    return rc;
}

int gs_cmd_sweep(int argc, char **argv)
{
    char **policies = NULL, *capacity = NULL, *plot_dir = NULL, *shard = NULL;
    gboolean merge = FALSE;
    const GOptionEntry own[] = {
        {"policy", 'p', 0, G_OPTION_ARG_STRING_ARRAY, &policies,
         "Policy template with brace lists, e.g. 'pytorch:max_split_size_mb:{64,128}'; repeat "
         "for several (default: pytorch)", "SPEC"},
        {"capacity", 'c', 0, G_OPTION_ARG_STRING, &capacity,
         "Memory the allocator may reserve, with brace lists, e.g. '{5.75,6.25}GiB' "
         "(default: no limit)", "SIZE"},
        {"plot", 0, 0, G_OPTION_ARG_FILENAME, &plot_dir,
         "Also plot the sweep into DIR with gnuplot", "DIR"},
        {"shard", 0, 0, G_OPTION_ARG_STRING, &shard,
         "Replay only shard K of N: the cells i with i mod N = K (0 <= K < N); the CSV has the "
         "same header, and shards merge with --merge; auto or auto/N: from Slurm's job array or a "
         "Kubernetes Indexed Job", "K/N"},
        {"merge", 0, 0, G_OPTION_ARG_NONE, &merge,
         "The arguments are the CSVs of a sweep's shards: check them and write the "
         "single-machine CSV (with --policy and --capacity: also check the grid's size)", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    gs_cli c;
    gs_cli_init(&c, "sweep", "TRACE - replay one trace over a grid of settings",
                "Replay a trace under every combination of policy settings and capacities written as\n"
                "brace lists, in parallel, and write one CSV row per combination.",
                sweep_description,
                GS_CLI_DEVICE_TOTAL | GS_CLI_OUTPUT | GS_CLI_CONTINUE | GS_CLI_LENIENT |
                    GS_CLI_CALIBRATION | GS_CLI_QUIET | GS_CLI_JOBS | GS_CLI_FAIL_ON_OOM,
                own, NULL);
    gs_cli_parse(&c, &argc, &argv, 0, NULL); /* what is missing depends on --merge */
    if (argc < 2) gs_cli_usage_error("sweep: no %s given (try 'gpusim sweep --help')",
                                     merge ? "SHARD.csv" : "TRACE");
    if (merge && (shard || plot_dir))
        gs_cli_usage_error("--merge takes the shards' CSVs only (no --%s; 'gpusim plot' draws "
                           "the merged CSV)", shard ? "shard" : "plot");
    /* what acts on the replays ran with the shards: given to --merge, it would do nothing */
    const char *unused = c.device_total ? "--device-total" : c.calibration ? "--calibration"
                         : c.continue_on_oom ? "--continue-on-oom" : c.lenient ? "--lenient"
                         : c.jobs ? "--jobs" : NULL;
    if (merge && unused)
        gs_cli_usage_error("--merge replays nothing: %s belongs to each 'sweep --shard K/N'", unused);
    if (!merge && argc > 2) gs_cli_usage_error("sweep: one TRACE at a time (got %d)", argc - 1);
    if (shard && plot_dir)
        gs_cli_usage_error("--plot draws the whole grid: plot the merged CSV with 'gpusim plot'");
    unsigned shard_k = 0, shard_n = 1;
    if (shard) parse_shard(shard, &shard_k, &shard_n);
    GError *err = NULL;
    gs_sweep *sw = NULL;
    if (merge) { /* the grid, when given, to check the rows against */
        if (policies || capacity) {
            sw = gs_sweep_new((const char *const *)policies, capacity, &err);
            if (!sw) gs_cli_usage_error("%s", err->message);
        }
        int rc = merge_shards(&c, argc, argv, sw);
        gs_sweep_free(sw);
        g_strfreev(policies);
        g_free(capacity);
        gs_cli_clear(&c);
        return rc;
    }
    sw = gs_sweep_new((const char *const *)policies, capacity, &err);
    if (!sw) gs_cli_usage_error("%s", err->message);
    if (shard) gs_sweep_shard(sw, shard_k, shard_n);
    gs_calibration *builtin = c.cal ? NULL : gs_calibration_builtin(); /* one table, every cell */
    gs_trace *t = gs_cli_load_trace(&c, argv[1]);
    gs_cli_check_replayable(t, argv[1]);
    for (guint i = 0; i < sw->cells->len; i++)
        gs_cli_check_release(g_array_index(sw->cells, gs_sweep_cell, i).pol, t, argv[1]);
    const char *inputs[] = {argv[1], NULL};
    gs_cli_check_output(&c, inputs, c.output, "--output", plot_dir); /* before the plot directory is made */
    /* a directory that cannot be made fails now, before the cells run; it is made once they
     * have (a sweep stopped meanwhile leaves none behind), before -o, which may name a file in
     * it, is written */
    gs_plotter *probe = plot_dir ? gs_plotter_new(plot_dir, &err) : NULL;
    if (plot_dir && !probe) gs_cli_usage_error("--plot: %s", err->message);
    char *out_dir = c.output ? g_path_get_dirname(c.output) : NULL;
    if (probe && out_dir && !g_file_test(out_dir, G_FILE_TEST_IS_DIR) && !gs_plotter_make(probe, &err))
        gs_cli_usage_error("--plot: %s", err->message); /* -o is in it: made before -o is opened */
    g_free(out_dir);

    gs_cli_out out;
    gs_cli_open_output(&out, &c, inputs, c.output); /* refused now, not after the cells */
    size_t n = sw->cells->len;
    gs_result *rs = g_new0(gs_result, n);
    gs_replay_opts o = {
        .device_total = c.total ? c.total : t->device_total,
        .cal = c.cal ? c.cal : builtin,
        .continue_on_oom = c.continue_on_oom,
    };
    run_cells(&c, argv[1], sw, t, &o, rs, &out);
    if (probe && !gs_plotter_make(probe, &err)) gs_cli_usage_error("--plot: %s", err->message);
    gs_plotter_free(probe);
    int rc = GS_EXIT_OK;
    for (size_t i = 0; i < n; i++) {
        if (rs[i].error != GS_OK) rc = GS_EXIT_DEVICE;
        char *what = g_strdup_printf("%s [cell %zu]", argv[1], i);
        gs_cli_warn_teardown(what, &rs[i]);
        g_free(what);
    }

    rc = gs_cli_oom_status(&c, rc, rs, n);
    gs_sweep_csv(out.f, sw, argv[1], t, rs, NULL);
    gs_cli_close_output(&out);
    if (plot_dir && plot_sweep(plot_dir, argv[1], c.output, sw, rs) != GS_EXIT_OK) rc = GS_EXIT_PLOT;

    for (size_t i = 0; i < n; i++) gs_result_clear(&rs[i]);
    g_free(rs);
    gs_trace_free(t);
    gs_sweep_free(sw);
    gs_calibration_free(builtin);
    g_strfreev(policies);
    g_free(capacity);
    g_free(plot_dir);
    g_free(shard);
    gs_cli_clear(&c);
    return rc;
}
