/* cmd_plot.c - gpusim plot: the plots of a saved report, drawn again (plots/). */
#include <string.h>

#include "cli.h"

static const char plot_description[] =
    "RESULT is a report of 'gpusim replay --format json|csv' or the CSV of 'gpusim sweep'. JSON\n"
    "saved from a replay run with --plot carries the timeline and the address map, and gives\n"
    "every plot again; a replay's CSV (or JSON without them) gives the comparison bars; a sweep's\n"
    "CSV gives the sweep's plot (and, with a capacity list, its policy x capacity matrix). Each\n"
    "plot is NAME.png and NAME.svg beside NAME.gp and its .dat.\n"
    "\n"
    "Examples:\n"
    "  gpusim replay traces/data/resnet50.gstrace.gz -p pytorch -p pytorch:expandable_segments:True \\\n"
    "      --format json -o run.json --plot plots/\n"
    "  gpusim plot run.json -o other-plots/\n"
    "  gpusim sweep trace.gstrace -p 'pytorch:max_split_size_mb:{64,128}' -o sweep.csv\n"
    "  gpusim plot sweep.csv                   # plots beside sweep.csv\n"
    "\n"
    "gnuplot is $GPUSIM_GNUPLOT, else gnuplot in PATH.\n"
    "Exit status: 0 plots drawn, 2 bad usage or a RESULT that is not a gpusim report, 3 gnuplot\n"
    "missing or failed (the data files and scripts are written anyway).";

int gs_cmd_plot(int argc, char **argv)
{
    char *dir = NULL;
    const GOptionEntry own[] = {
        {"output", 'o', 0, G_OPTION_ARG_FILENAME, &dir,
         "Write the plots into DIR (default: the directory of each RESULT)", "DIR"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    gs_cli c;
    gs_cli_init(&c, "plot", "RESULT... - plot saved results",
                "Draw gpusim's plots from a saved report, with gnuplot.", plot_description,
                GS_CLI_QUIET, own, NULL);
    gs_cli_parse(&c, &argc, &argv, 1, "RESULT");
    GError *err = NULL;
    int rc = GS_EXIT_OK;
    /* every RESULT read (once: it may be a pipe) and checked first: a bad one later on leaves no
     * directory and no plot */
    char **texts = g_new0(char *, (size_t)argc);
    size_t *lens = g_new0(size_t, (size_t)argc);
    for (int a = 1; a < argc; a++) {
        GError *e = NULL;
        if (!gs_read_text(argv[a], &texts[a], &lens[a], &e)) gs_cli_usage_error("%s", e->message);
        if (!gs_plot_saved_text(NULL, argv[a], texts[a], lens[a], &err))
            gs_cli_usage_error("%s", err->message);
    }
    /* a plotter per directory (the RESULTs' with no -o), so that two RESULTs of traces of one
     * name plotted into one directory get names of their own (gs_plotter_stem) */
    GPtrArray *plotters = g_ptr_array_new_with_free_func((GDestroyNotify)gs_plotter_free);
    for (int a = 1; a < argc; a++) {
        /* one directory, however named (a and ./a): canonical, against the working directory */
        char *given = dir ? g_strdup(dir) : g_path_get_dirname(argv[a]);
        char *d = g_canonicalize_filename(given, NULL);
        g_free(given);
        gs_plotter *p = NULL;
        for (guint i = 0; i < plotters->len && !p; i++)
            if (strcmp(gs_plotter_dir(plotters->pdata[i]), d) == 0) p = plotters->pdata[i];
        if (!p && (p = gs_plotter_new(d, &err))) {
            for (int k = 1; k < argc; k++) gs_plotter_keep(p, argv[k]);
            g_ptr_array_add(plotters, p);
        }
        g_free(d);
        if (!p || !gs_plot_saved_text(p, argv[a], texts[a], lens[a], &err))
            break; /* a plot refused: the rest too */
    }
    for (int a = 1; a < argc; a++) g_free(texts[a]);
    g_free(texts);
    g_free(lens);
    for (guint i = 0; i < plotters->len; i++)
        if (!gs_cli_render_plots(plotters->pdata[i])) rc = GS_EXIT_PLOT;
    g_ptr_array_free(plotters, TRUE);
    if (err) gs_cli_usage_error("%s", err->message);
    g_free(dir);
    gs_cli_clear(&c);
    return rc;
}
