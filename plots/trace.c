/* trace.c - a trace's plots: gs_plot_trace, which writes its timeline, bars and address maps
 * (timeline.c, bars.c, map.c), and the address map at an OOM.
 */
#include "plot-int.h"

/* STEM-KIND-K-SPEC: a map's name. */
static char *map_stem(gs_plotter *p, const char *trace, const char *kind, size_t k,
                      const char *policy)
{
    char *stem = gs_plotter_stem(p, trace), *pol = gs_plot_file_part(policy);
    char *s = g_strdup_printf("%s-%s-%zu-%s", stem, kind, k, pol);
    g_free(pol);
    g_free(stem);
    return s;
}

gboolean gs_plot_oom_map(gs_plotter *p, const char *trace, size_t k, const gs_plot_run *r,
                         GError **err)
{
    if (!r->series || !r->series->oom.have) return TRUE;
    char *ms = map_stem(p, trace, "oom-map", k, r->policy);
    gboolean ok = gs_plot_map(p, trace, ms, r, true, err);
    g_free(ms);
    return ok;
}

gboolean gs_plot_trace(gs_plotter *p, const char *trace, const gs_plot_run *runs, size_t n,
                       GError **err)
{
    char *stem = gs_plotter_stem(p, trace);
    char *ts = g_strdup_printf("%s-timeline", stem), *bs = g_strdup_printf("%s-bars", stem);
    gboolean ok = gs_plot_timeline(p, trace, ts, runs, n, err) && gs_plot_bars(p, trace, bs, runs, n, err);
    for (size_t i = 0; ok && i < n; i++) {
        if (!runs[i].series || !runs[i].series->peak.have) continue;
        char *ms = map_stem(p, trace, "map", i + 1, runs[i].policy);
        ok = gs_plot_map(p, trace, ms, &runs[i], false, err) &&
             gs_plot_oom_map(p, trace, i + 1, &runs[i], err);
        g_free(ms);
    }
    g_free(ts);
    g_free(bs);
    g_free(stem);
    return ok;
}
