/* cmd_frontier.c - gpusim frontier: every family and setting as a point of memory against device
 * time, per trace, and the Pareto front (sim/frontier.h). */
#include "cli.h"

static const char frontier_description[] =
    "Each setting is a point: its minimum capacity (the least memory at which the whole trace\n"
    "completes, found as gpusim whatif finds it, to 2 MiB) over the trace's lower bound (the\n"
    "peak of its live requests: no allocator needs less), against its modelled device time with\n"
    "no cap over PyTorch default's. The front is the settings no other one beats on both: each\n"
    "is worth choosing for some budget of memory and time; the others are not.\n"
    "\n"
    "The settings: PyTorch's default, expandable_segments:True, max_split_size_mb 64/128/256/\n"
    "512, roundup_power2_divisions:4 and garbage_collection_threshold:0.8 (as whatif tries\n"
    "them), one of each other family at its defaults (cupy, bfc, tlsf, rmm-pool, rmm-arena,\n"
    "cuda-async) and gpusim's own, stitch, marked; then each --policy. A trace of several\n"
    "clients replays them as --clients says (separate, the default, shared or cooperative).\n"
    "\n"
    "The table marks the front with '*' and says where stitch stands. --format csv gives a row\n"
    "per trace and setting: trace, policy, family, ours, uncapped_outcome, min_capacity_bytes,\n"
    "lower_bound_bytes, memory_over_bound, device_time_us, time_over_default, pareto, replays,\n"
    "uncapped_peak_reserved_bytes (its peak reserved with no cap).\n"
    "--plot DIR draws NAME-frontier per trace: the points, numbered and keyed, the front's\n"
    "staircase through those on it, stitch marked.\n"
    "\n"
    "Examples:\n"
    "  gpusim frontier traces/data/resnet50.gstrace.gz traces/data/gpt2.gstrace.gz\n"
    "  gpusim frontier traces/data/gpt2.gstrace.gz -p 'stitch:max_handle_mb:20' --plot plots/\n"
    "  gpusim frontier traces/data/*.gstrace.gz --format csv -o frontier.csv\n"
    "\n"
    "A snapshot is converted first: gpusim-convert SNAPSHOT -o TRACE.gstrace.gz (traces/convert.py\n"
    "in the source tree).\n"
    "Exit status: 0 written, 2 bad usage, bad input or the host out of memory, 3 --plot could\n"
    "not draw (gnuplot missing or failed; the report and the plots' data are written all the\n"
    "same).";

static void frontier_progress(size_t done, size_t total, void *ud)
{
    gs_cli_progress_line(ud, done, total, "settings");
}

/* NAME-frontier for f of the trace named name. */
static void plot_frontier(gs_plotter *pl, const char *name, const gs_frontier *f)
{
    gs_plot_frontier_point *pp = g_new0(gs_plot_frontier_point, f->n ? f->n : 1);
    for (size_t i = 0; i < f->n; i++) {
        const gs_frontier_point *q = &f->pts[i];
        pp[i] = (gs_plot_frontier_point){
            .policy = q->row->pol->spec,
            .drawn = q->found && q->completes && q->memory > 0 && q->time > 0,
            .why_not = !q->completes ? "fails with no cap"
                       : !q->found   ? "no minimum capacity"
                                     : "no bound or no default to compare",
            .time = q->time,
            .memory = q->memory,
            .pareto = q->pareto,
            .ours = q->ours,
        };
    }
    GError *err = NULL;
    if (!gs_plot_frontier(pl, name, pp, f->n, &err)) gs_cli_usage_error("--plot: %s", err->message);
    g_free(pp);
}

int gs_cmd_frontier(int argc, char **argv)
{
    char **policies = NULL, *plot_dir = NULL, *clients = NULL;
    const GOptionEntry own[] = {
        {"policy", 'p', 0, G_OPTION_ARG_STRING_ARRAY, &policies,
         "A setting to place besides the standard ones; repeat for several", "SPEC"},
        {"plot", 0, 0, G_OPTION_ARG_FILENAME, &plot_dir,
         "Also draw each trace's points and front into DIR with gnuplot", "DIR"},
        {"clients", 0, 0, G_OPTION_ARG_STRING, &clients,
         "Traces of several clients: separate (an allocator each, the default), shared (one for "
         "all) or cooperative (an allocator each; on OOM the others release their cache)",
         "MODE"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    static const char *const formats[] = {"table", "csv", "json", NULL};
    gs_cli c;
    gs_cli_init(&c, "frontier", "TRACE... - memory against device time, every setting a point",
                "Find each allocator setting's minimum capacity and device time on each trace, "
                "and which\nsettings are on the Pareto front of the two.",
                frontier_description,
                GS_CLI_DEVICE_TOTAL | GS_CLI_FORMAT | GS_CLI_OUTPUT | GS_CLI_CALIBRATION |
                    GS_CLI_QUIET | GS_CLI_JOBS,
                own, formats);
    gs_cli_parse(&c, &argc, &argv, 1, "TRACE");
    size_t n = (size_t)argc - 1;
    gs_clients_mode mode = gs_cli_clients_mode("frontier", clients);
    GPtrArray *ins = g_ptr_array_new();
    for (size_t i = 0; i < n; i++) g_ptr_array_add(ins, argv[i + 1]);
    g_ptr_array_add(ins, c.calibration);
    g_ptr_array_add(ins, NULL);
    const char *const *inputs = (const char *const *)ins->pdata;
    gs_cli_check_output(&c, inputs, c.output, "--output", plot_dir);
    GError *err = NULL;
    gs_plotter *plotter = gs_cli_plotter(&c, inputs, plot_dir);

    /* every input read and every setting parsed before the first replay: each trace its own
     * rows, which its search fills */
    gs_trace **ts = g_new0(gs_trace *, n);
    GPtrArray **rows = g_new0(GPtrArray *, n);
    for (size_t i = 0; i < n; i++) {
        ts[i] = gs_cli_load_trace(&c, argv[i + 1]);
        gs_cli_check_replayable(ts[i], argv[i + 1]);
        rows[i] = gs_frontier_candidates((const char *const *)policies, &err);
        if (!rows[i]) gs_cli_usage_error("frontier: %s", err->message);
        for (guint k = 0; k < rows[i]->len; k++)
            gs_cli_check_release(((gs_whatif_row *)rows[i]->pdata[k])->pol, ts[i], argv[i + 1]);
    }
    if (plotter && !gs_plotter_make(plotter, &err)) gs_cli_usage_error("--plot: %s", err->message);

    gs_frontier **fs = g_new0(gs_frontier *, n);
    for (size_t i = 0; i < n; i++) {
        gs_whatif_opts o = {
            .device_total = c.total               ? c.total
                            : ts[i]->device_total ? ts[i]->device_total
                                                  : gs_cli_unknown_device_total(ts[i], 0, NULL),
            .cal = c.cal,
            .clients = mode,
            .jobs = (unsigned)c.jobs,
            .progress = c.progress ? frontier_progress : NULL,
            .progress_ud = argv[i + 1],
        };
        fs[i] = gs_frontier_run(rows[i], ts[i], &o); /* (takes the rows) */
        if (c.progress) fputs("\r\033[K", stderr);
    }

    gs_cli_out out;
    gs_cli_open_output(&out, &c, inputs, c.output);
    gs_frontier_report(out.f, c.fmt, (const char *const *)argv + 1, (const gs_trace *const *)ts, fs,
                       n);
    gs_cli_close_output(&out);
    int rc = GS_EXIT_OK;
    if (plotter) {
        gs_plotter_keep_report(plotter, c.output);
        for (size_t i = 0; i < n; i++) plot_frontier(plotter, argv[i + 1], fs[i]);
        if (!gs_cli_render_plots(plotter)) rc = GS_EXIT_PLOT;
        gs_plotter_free(plotter);
    }
    for (size_t i = 0; i < n; i++) {
        gs_frontier_free(fs[i]);
        gs_trace_free(ts[i]);
    }
    g_free(fs);
    g_free(rows);
    g_free(ts);
    g_ptr_array_free(ins, TRUE);
    g_strfreev(policies);
    g_free(plot_dir);
    g_free(clients);
    gs_cli_clear(&c);
    return rc;
}
