/* whatif.c - NAME-whatif (gpusim whatif --plot): the survival chart. A row per candidate
 * setting, in the verdict's order: its minimum capacity as a bar against the cap (a
 * dashed line), coloured by its outcome at the cap (completes, fails; a setting with no minimum
 * up to the device's memory hatched across), and beside it, on an axis of its own, the modelled
 * device time of its replay at the cap.
 *
 * NAME-whatif.dat holds a row per setting (GiB and ms), then the rows with no minimum as a block
 * of their own.
 */
#include <math.h>
#include <string.h>

#include "plot-int.h"

/* Colours by outcome at the cap: completes (the palette's blue), fails (its vermillion), a
 * device error (grey). */
static const char *row_colour(const gs_plot_whatif_row *r)
{
    if (gs_plot_outcome_through(r->outcome)) return "#0072B2";
    if (strcmp(r->outcome, "oom") == 0) return "#D55E00";
    return "#8C8C8C";
}

/* A tic step for a span: 1, 2, 2.5 or 5 times a power of ten, 4 to 10 tics across. */
static double nice_step(double span)
{
    double p = pow(10.0, floor(log10(span)));
    static const double m[] = {0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10};
    for (size_t i = 0; i < G_N_ELEMENTS(m); i++)
        if (span / (m[i] * p) <= 8) return m[i] * p;
    return 10 * p;
}

/* The minimum-capacity axis: from a little below the smallest value to a little above the
 * largest (the cap among them), so differences of a few MiB on many GiB show; the bars start
 * at its left end, a tic of its own, so the axis says where they start. */
static void cap_range(const gs_plot_whatif_row *rows, size_t n, uint64_t cap, double *lo, double *hi,
                      double *step)
{
    double a = cap ? gib((int64_t)cap) : INFINITY, b = cap ? a : 0;
    for (size_t i = 0; i < n; i++) {
        if (!rows[i].found) continue;
        a = MIN(a, gib((int64_t)rows[i].min_capacity));
        b = MAX(b, gib((int64_t)rows[i].min_capacity));
    }
    if (!isfinite(a)) a = b = 0; /* no cap and no minimum: an axis from 0 */
    double span = b - a > 1e-6 ? b - a : MAX(b * 0.05, 0.01);
    *lo = MAX(0.0, a - 0.6 * span);
    *hi = b + 0.45 * span; /* room for the labels at the bars' ends */
    *step = nice_step(*hi - *lo);
    *lo = floor(*lo / *step) * *step;
}

/* "5.588 GiB", "6.357 GiB !", "none up to 80 GiB": the label at a bar's end. */
static char *cap_label(const gs_plot_whatif_row *r, uint64_t device_total)
{
    if (!r->found) {
        char *d = gs_format_capacity(device_total, " ");
        char *l = g_strdup_printf("no minimum: fails at every capacity up to %s", d);
        g_free(d);
        return l;
    }
    char *m = gs_format_size(r->min_capacity);
    const char *ge = r->lower_bound ? ">= " : "";
    char *l = r->fails_above ? g_strdup_printf("%s%s  (!)", ge, m) : g_strdup_printf("%s%s", ge, m);
    g_free(m);
    return l;
}

static char *time_label(const gs_plot_whatif_row *r)
{
    GString *l = g_string_new(NULL);
    g_string_append_printf(l, "%.2f ms", r->device_us / 1000.0);
    if (r->vs_default > 0) g_string_append_printf(l, " (%+.0f%%)", 100.0 * (r->vs_default - 1.0));
    if (!gs_plot_outcome_through(r->outcome)) g_string_append(l, ", to its failure");
    return g_string_free(l, FALSE);
}

/* NAME-whatif.dat: a row per setting; the rows with no minimum again as their own block. */
static void whatif_dat(GString *dat, const char *trace, uint64_t cap, const gs_plot_whatif_row *rows,
                       size_t n)
{
    g_string_append(dat, "# ");
    gs_dat_text(dat, trace);
    char *cw = gs_format_capacity(cap, " ");
    g_string_append_printf(dat, ": each setting's minimum capacity and its replay at the cap of %s, "
                                "in the verdict's order\n"
                                "# row min_capacity_GiB device_ms colour outcome recorded "
                                "fails_above_GiB policy (NaN: none)\n",
                           cw);
    g_free(cw);
    GString *none = g_string_new(NULL);
    for (size_t i = 0; i < n; i++) {
        const gs_plot_whatif_row *r = &rows[i];
        GString *row = g_string_new(NULL);
        g_string_append_printf(row, "%zu ", i + 1);
        if (r->found) g_string_append_printf(row, "%.6f", gib((int64_t)r->min_capacity));
        else g_string_append(row, "NaN");
        g_string_append_printf(row, " %.4f 0x%s ", r->device_us / 1000.0, row_colour(r) + 1);
        gs_dat_text(row, r->outcome);
        g_string_append_printf(row, " %d ", r->recorded);
        if (r->fails_above) g_string_append_printf(row, "%.6f", gib((int64_t)r->fails_above));
        else g_string_append(row, "NaN");
        g_string_append_c(row, ' ');
        gs_dat_text(row, r->policy);
        g_string_append_c(row, '\n');
        g_string_append(dat, row->str);
        if (!r->found) g_string_append(none, row->str);
        g_string_free(row, TRUE);
    }
    if (none->len) g_string_append_printf(dat, "\n\n# the settings with no minimum capacity\n%s", none->str);
    g_string_free(none, TRUE);
}

/* The rows' names: the setting, "(recorded)" after the recorded one. */
static void row_tics(GString *g, const gs_plot_whatif_row *rows, size_t n)
{
    g_string_append(g, "set ytics (");
    for (size_t i = 0; i < n; i++) {
        char *l = g_strdup_printf("%s%s", rows[i].policy, rows[i].recorded ? " (recorded)" : "");
        if (i) g_string_append(g, ", ");
        gs_gp_str(g, l);
        g_string_append_printf(g, " %zu", i + 1);
        g_free(l);
    }
    g_string_append(g, ") nomirror scale 0\n");
}

gboolean gs_plot_whatif(gs_plotter *p, const char *trace, uint64_t cap, const char *cap_words,
                        uint64_t device_total, const gs_plot_whatif_row *rows, size_t n,
                        const char *assumption, GError **err)
{
    if (n == 0) return TRUE;
    gs_plot_files f;
    gs_plot_files_begin(&f, p, trace, "whatif");
    GString *dat = f.dat, *g = f.g;
    const char *stem = f.stem, *dat_lit = f.dat_lit;
    whatif_dat(dat, trace, cap, rows, n);

    bool any_fail = false, any_oom = false, any_error = false, any_none = false, any_nonmono = false;
    bool dies = false; /* the trace ends where its recorded run died: minima are lower bounds */
    double tmax = 0;
    for (size_t i = 0; i < n; i++) {
        any_fail |= !gs_plot_outcome_through(rows[i].outcome);
        any_oom |= strcmp(rows[i].outcome, "oom") == 0;
        any_error |= !gs_plot_outcome_through(rows[i].outcome) && strcmp(rows[i].outcome, "oom") != 0;
        any_none |= !rows[i].found;
        any_nonmono |= rows[i].fails_above != 0;
        dies |= rows[i].lower_bound || strcmp(rows[i].outcome, "survived") == 0;
        tmax = MAX(tmax, rows[i].device_us / 1000.0);
    }
    /* the notes under the axes, a line each: what (!) and "to its failure" mean */
    GPtrArray *notes = g_ptr_array_new_with_free_func(g_free);
    if (any_nonmono) {
        GString *l = g_string_new("(!) fails at a larger capacity than its minimum:");
        for (size_t i = 0; i < n; i++) {
            if (!rows[i].fails_above) continue;
            char *fa = gs_format_size(rows[i].fails_above);
            g_string_append_printf(l, " %s at %s;", rows[i].policy, fa);
            g_free(fa);
        }
        l->str[l->len - 1] = '.';
        g_ptr_array_add(notes, g_string_free(l, FALSE));
    }
    if (any_fail)
        g_ptr_array_add(notes, g_strdup("A setting that fails at the cap stopped at its first OOM "
                                        "(or device error): its device time is up to there."));
    if (assumption)
        g_ptr_array_add(notes, g_strdup_printf("Assumed, not recorded: %s.", assumption));
    if (dies)
        g_ptr_array_add(notes,
                        g_strdup("The trace ends where the recorded run died, or before: each "
                                 "minimum (>=) is the memory to get that far, a lower bound."));
    /* pixels: the title and key above, a row per setting, the axes and notes below */
    int top_px = 92, row_px = 40, bottom_px = 72 + 20 * (int)notes->len;
    int h = top_px + row_px * (int)n + bottom_px;
    double T = 1.0 - (double)top_px / h, B = (double)bottom_px / h;
    double lo, hi, step;
    cap_range(rows, n, cap, &lo, &hi, &step);

    char *base = g_path_get_basename(trace);
    char *cw = gs_format_capacity(cap, " ");
    char *title = !cap ? g_strdup_printf("%s: the least memory each setting %s, with no cap",
                                         base, dies ? "gets past the recorded death with"
                                                    : "completes the trace with")
                       : g_strdup_printf("%s: the least memory each setting %s, against the %s "
                                         "of %s", base, dies ? "gets past the recorded death with"
                                                             : "completes the trace with",
                                         cap_words, cw);
    gs_gp_begin(g, stem, "the minimum capacity per setting (gpusim whatif)", 1280, h);
    g_string_append(g, "set multiplot title ");
    gs_gp_str(g, title);
    g_string_append(g, " font 'Sans,13'\n");

    /* the key: one strip above both panels */
    g_string_append_printf(g,
        "set lmargin at screen 0.02\nset rmargin at screen 0.97\nset tmargin at screen %.4f\n"
        "set bmargin at screen %.4f\nunset border\nunset tics\nset xrange [0:1]\nset yrange [0:1]\n"
        "set key at screen 0.64,%.4f center center horizontal Left reverse samplen 3 width 1 maxrows 2\n"
        "set style fill solid 0.9 noborder\n"
        "plot NaN with boxes lc rgb '#0072B2' title '%s'",
        T, T - 0.001, 1.0 - 62.0 / h,
        dies ? "gets past the recorded death at the cap" : cap ? "completes at the cap" : "completes");
    if (any_oom) g_string_append(g, ", \\\n     NaN with boxes lc rgb '#D55E00' title 'fails at the cap'");
    if (any_error)
        g_string_append(g, ", \\\n     NaN with boxes lc rgb '#8C8C8C' title 'a device error at the cap'");
    if (any_none)
        g_string_append(g, ", \\\n     NaN with boxes lc rgb '#555555' fs pattern 4 border title "
                           "'no minimum up to the device memory'");
    if (cap) {
        g_string_append(g, ", \\\n     NaN with lines dt 2 lw 2 lc rgb '#000000' title ");
        char *capt = g_strdup_printf("%s %s", cap_words, cw);
        gs_gp_str(g, capt);
        g_free(capt);
    }
    g_string_append(g, "\n");

    /* left: the minimum capacities */
    g_string_append_printf(g,
        "set lmargin at screen 0.31\nset rmargin at screen 0.72\nset tmargin at screen %.4f\n"
        "set bmargin at screen %.4f\nunset key\nset border 3\nset xtics %.6g,%.6g nomirror out\n"
        "set mxtics\nset grid xtics mxtics lc rgb '#DDDDDD'\nset xrange [%.6g:%.6g]\n"
        "set yrange [%zu.5:0.5]\nset xlabel 'minimum capacity (GiB)'\n",
        T, B, lo, step, lo, hi, n);
    row_tics(g, rows, n);
    if (cap)
        g_string_append_printf(g, "set arrow 1 from %.6f,graph 0 to %.6f,graph 1 nohead dt 2 lw 2 "
                                  "lc rgb '#000000' front\n",
                               gib((int64_t)cap), gib((int64_t)cap));
    for (size_t i = 0; i < n; i++) {
        char *l = cap_label(&rows[i], device_total);
        double x = rows[i].found ? gib((int64_t)rows[i].min_capacity) : lo;
        /* a label the cap's line would cross starts right of the line instead */
        double c = gib((int64_t)cap);
        if (cap && rows[i].found && x <= c && c < x + 0.16 * (hi - lo)) x = c;
        g_string_append_printf(g, "set label %zu ", i + 10);
        gs_gp_str(g, l);
        g_string_append_printf(g, " at %.6f,%zu left offset %d,0 font 'Sans,10' front boxed\n", x,
                               i + 1, rows[i].found ? 1 : 2);
        g_free(l);
    }
    g_string_append(g, "set style textbox opaque fc rgb '#FFFFFF' noborder\n");
    g_string_append_printf(g,
        "plot %s index 0 using (%.6g):1:(%.6g):2:($1-0.34):($1+0.34):4 with boxxyerror "
        "fs solid 0.9 noborder lc rgb variable, \\\n"
        "     '' index 0 using (%.6g):1:(%.6g):($6 == 0 ? NaN : $2):($1-0.34):($1+0.34) "
        "with boxxyerror fs empty lw 2.5 lc rgb '#000000'",
        dat_lit, lo, lo, lo, lo);
    if (any_none)
        /* (a row with no minimum has NaN in column 2: gnuplot skips a row whose used columns
         * hold NaN, so these name only the columns they draw) */
        g_string_append_printf(g, ", \\\n     '' index 1 using (%.6g):1:(%.6g):(%.6g):($1-0.34):($1+0.34):4 "
                                  "with boxxyerror lc rgb variable fs pattern 4 border, \\\n"
                                  "     '' index 1 using (%.6g):1:(%.6g):($6 == 0 ? NaN : %.6g):($1-0.34):($1+0.34) "
                                  "with boxxyerror fs empty lw 2.5 lc rgb '#000000'",
                               lo, lo, hi, lo, lo, hi);
    g_string_append(g, "\n");
    for (size_t i = 0; i < n; i++) g_string_append_printf(g, "unset label %zu\n", i + 10);
    g_string_append(g, "unset arrow 1\n");

    /* right: the modelled device time at the cap */
    double tx = tmax > 0 ? tmax * 1.9 : 1.0;
    /* ... wide enough that each bar's label ends inside the panel (7 pixels a character at
     * Sans 10, 8 from the bar, 8 to spare): a long one ("2.37 ms (+782%), to its failure") ran past
     * it */
    const double area = (0.97 - 0.74) * 1280;
    for (size_t i = 0; i < n; i++) {
        char *l = time_label(&rows[i]);
        double room = MAX(area - 16 - 7.0 * (double)gs_plot_text_chars(l), 20.0);
        tx = MAX(tx, rows[i].device_us / 1000.0 * area / room);
        g_free(l);
    }
    g_string_append_printf(g,
        "set lmargin at screen 0.74\nset rmargin at screen 0.97\nunset ytics\nset xrange [0:%.6g]\n"
        "set xtics autofreq nomirror out\nunset mxtics\nunset grid\nset grid xtics lc rgb '#DDDDDD'\n"
        "set xlabel 'modelled device time at the cap (ms)'\n",
        tx);
    for (size_t i = 0; i < n; i++) {
        char *l = time_label(&rows[i]);
        g_string_append_printf(g, "set label %zu ", i + 10);
        gs_gp_str(g, l);
        g_string_append_printf(g, " at %.6f,%zu left offset 1,0 font 'Sans,10' front\n",
                               rows[i].device_us / 1000.0, i + 1);
        g_free(l);
    }
    g_string_append_printf(g,
        "plot %s index 0 using (0):1:(0):3:($1-0.34):($1+0.34):4 with boxxyerror "
        "fs solid 0.5 noborder lc rgb variable\n",
        dat_lit);
    for (size_t i = 0; i < n; i++) g_string_append_printf(g, "unset label %zu\n", i + 10);

    /* the notes, a line each from the bottom up */
    for (guint i = 0; i < notes->len; i++) {
        g_string_append_printf(g, "set label %u ", i + 1);
        gs_gp_str(g, notes->pdata[i]);
        g_string_append_printf(g, " at screen 0.02,screen %.4f left font 'Sans,10'\n",
                               (14.0 + 20.0 * (double)(notes->len - 1 - i)) / h);
    }
    if (notes->len)
        g_string_append(g, "unset border\nunset tics\nunset xlabel\nunset grid\nset xrange [0:1]\n"
                           "set yrange [0:1]\nplot NaN notitle\n");
    g_ptr_array_free(notes, TRUE);
    g_string_append(g, "unset multiplot\n");
    gs_gp_end(g);

    gboolean ok = gs_plot_files_finish(&f, p, err);
    g_free(title);
    g_free(cw);
    g_free(base);
    return ok;
}
