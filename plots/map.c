/* map.c - NAME-map-K-SPEC: the address space at the moment reserved memory peaked under
 * policy K, a row per segment (largest first), each block coloured by its state: allocated, free
 * (cached), freed but awaiting its stream, unmapped (expandable segments).
 *
 * NAME-map-K-SPEC.dat holds the blocks, a gnuplot index block per state, each row a block's
 * extent in its segment (MiB, or GiB for segments of 4 GiB and more) and its size in bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "plot-int.h"

static const char *const state_colours[] = {"#E8432E", "#3A6FB0", "#9DBFE3", "#D9D9D9"};
static const char *const state_legend[] = {"free (cached)",
                                           "allocated", "freed, awaiting its stream",
                                           "unmapped (expandable: no memory behind it)"};

typedef struct {
    const gs_plot_seg *seg;
    uint64_t extent; /* what is drawn: up to the end of the last block with memory behind it */
} map_row;

static int row_cmp(const void *a, const void *b)
{
    const map_row *x = a, *y = b;
    if (x->extent != y->extent) return x->extent > y->extent ? -1 : 1;
    if (x->seg->pool != y->seg->pool) return x->seg->pool < y->seg->pool ? -1 : 1;
    return x->seg->addr < y->seg->addr ? -1 : x->seg->addr > y->seg->addr;
}

/* What the map draws, and at what scale. */
typedef struct {
    GArray *rows;        /* map_row: the segments with memory behind them, largest first */
    uint64_t longest;    /* the longest row's extent (at least 1) */
    uint64_t totals[4];  /* bytes drawn, per gs_block_state */
    bool any_expandable;
    bool in_gib;         /* the axis in GiB (a row of 4 GiB or more), else in MiB */
    double unit;         /* bytes per unit of the axis */
} map_layout;

static const gs_plot_block *block_of(const gs_plot_series *s, const gs_plot_seg *g, guint k)
{
    return &g_array_index(s->blocks, gs_plot_block, g->first + k);
}

static void layout(map_layout *m, const gs_plot_series *s)
{
    memset(m, 0, sizeof *m);
    m->rows = g_array_new(FALSE, FALSE, sizeof(map_row));
    m->longest = 1;
    for (guint i = 0; i < s->segs->len; i++) {
        const gs_plot_seg *g = &g_array_index(s->segs, gs_plot_seg, i);
        map_row row = {.seg = g, .extent = 0};
        for (guint k = 0; k < g->n; k++) {
            const gs_plot_block *b = block_of(s, g, k);
            if (b->state != GS_BLOCK_UNMAPPED) row.extent = b->off + b->size;
        }
        if (!row.extent) continue; /* a reservation with nothing mapped */
        for (guint k = 0; k < g->n; k++) {
            const gs_plot_block *b = block_of(s, g, k);
            if (b->off < row.extent && b->state < 4) m->totals[b->state] += b->size;
        }
        m->longest = MAX(m->longest, row.extent);
        m->any_expandable |= g->expandable;
        g_array_append_val(m->rows, row);
    }
    qsort(m->rows->data, m->rows->len, sizeof(map_row), row_cmp);
    m->in_gib = m->longest >= 4 * GS_GiB;
    m->unit = m->in_gib ? (double)GS_GiB : (double)GS_MiB;
}

/* The .dat rows of the blocks in state st: row x_from x_to size_bytes segment_addr. */
static void state_rows(GString *out, const map_layout *m, const gs_plot_series *s, unsigned st)
{
    /* A free block narrower than a pixel would vanish, and stranded slivers are what this plot
     * is for: draw every free block at least 1/1000 of the axis wide (the .dat keeps its size). */
    double minw = (double)m->longest / m->unit / 1000.0;
    for (guint i = 0; i < m->rows->len; i++) {
        const map_row *row = &g_array_index(m->rows, map_row, i);
        for (guint k = 0; k < row->seg->n; k++) {
            const gs_plot_block *b = block_of(s, row->seg, k);
            if (b->state != st || b->off >= row->extent) continue;
            double x0 = (double)b->off / m->unit, x1 = (double)(b->off + b->size) / m->unit;
            if (st == GS_BLOCK_FREE && x1 - x0 < minw) x1 = x0 + minw;
            g_string_append_printf(out, "%u %.6f %.6f %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT "\n",
                                   i + 1, x0, x1, b->size, row->seg->addr);
        }
    }
}

/* NAME-map-K-SPEC.dat, an index block per state that has blocks, and the plot command's
 * clause for each, titled with the state's total. */
static void map_data(GString *dat, GString *plots, const map_layout *m, const char *trace,
                     const char *stem, const gs_plot_run *r)
{
    const gs_plot_series *s = r->series;
    const char *u = m->in_gib ? "GiB" : "MiB";
    g_string_append(dat, "# ");
    gs_dat_text(dat, trace);
    g_string_append(dat, " under ");
    gs_dat_text(dat, r->policy);
    g_string_append_printf(dat, ": every segment at the peak of reserved memory (after "
                                "event %" G_GUINT64_FORMAT "), largest first\n"
                                "# blocks in index blocks by state (free, allocated, pending, unmapped; "
                                "empty ones left out, named below)\n"
                                "# row x_from_%s x_to_%s size_bytes segment_addr\n",
                           s->map_at.event, u, u);
    char *datname = g_strdup_printf("%s.dat", stem), *dat_lit = gs_gp_lit(datname);
    GString *rows = g_string_new(NULL);
    int block = 0;
    for (unsigned st = 0; st < 4; st++) {
        g_string_truncate(rows, 0);
        state_rows(rows, m, s, st);
        if (!rows->len) continue;
        g_string_append_printf(dat, "# %s\n%s\n\n", gs_plot_state_name(st), rows->str);
        char *sz = gs_format_size(m->totals[st]);
        char *t = g_strdup_printf("%s: %s", state_legend[st], sz);
        g_string_append_printf(plots, "%s%s index %d using 2:1:2:3:($1-0.42):($1+0.42) "
                                      "with boxxyerror fs solid 1.0 noborder lc rgb '%s' title ",
                               plots->len ? ", \\\n     " : "plot ", dat_lit, block++, state_colours[st]);
        gs_gp_str(plots, t);
        g_free(t);
        g_free(sz);
    }
    g_string_free(rows, TRUE);
    g_free(dat_lit);
    g_free(datname);
}

/* The rows' tics: with few rows, each named by its size (an expandable one by what is mapped). */
static void row_tics(GString *g, const map_layout *m)
{
    if (m->rows->len > 40) {
        g_string_append(g, "set ytics nomirror\n");
        return;
    }
    g_string_append(g, "set ytics (");
    for (guint i = 0; i < m->rows->len; i++) {
        const map_row *row = &g_array_index(m->rows, map_row, i);
        char *sz = gs_format_size(row->seg->expandable ? row->extent : row->seg->size);
        g_string_append_printf(g, "%s'%s%s' %u", i ? ", " : "", sz, row->seg->expandable ? " mapped" : "", i + 1);
        g_free(sz);
    }
    g_string_append(g, ") nomirror\n");
}

/* NAME-map-K-SPEC.gp: the title (policy, capacity, reserved and allocated at the peak), axes,
 * row tics, then the clauses. */
static void map_script(GString *g, const map_layout *m, const char *trace, const char *stem,
                       const gs_plot_run *r, const GString *plots)
{
    const gs_plot_series *s = r->series;
    char *base = g_path_get_basename(trace);
    char *cw = gs_plot_cap_words(r->capacity);
    char *res = gs_format_size((uint64_t)s->map_at.reserved), *al = gs_format_size((uint64_t)s->map_at.allocated);
    char *title = g_strdup_printf("%s under %s, %s\naddress space at peak reserved (%s reserved, %s "
                                  "allocated, after event %" G_GUINT64_FORMAT ")",
                                  base, r->policy, cw, res, al, s->map_at.event);
    gs_gp_begin(g, stem, "the address space at peak reserved", 1280, 800);
    g_string_append(g, "set title ");
    gs_gp_str(g, title);
    g_string_append_printf(g, "\nset xlabel 'offset in the segment%s (%s)'\nset ylabel '%u segments, largest first%s'\n"
                              "set xrange [0:%.6g]\nset yrange [%u.5:0.5]\nset key above center horizontal Left reverse\n"
                              "set grid xtics\nset xtics nomirror\nset mxtics\n",
                           m->any_expandable ? " or mapped reservation" : "", m->in_gib ? "GiB" : "MiB",
                           m->rows->len, m->any_expandable ? " (unmapped tails not drawn)" : "",
                           (double)m->longest / m->unit * 1.01, m->rows->len ? m->rows->len : 1);
    row_tics(g, m);
    if (plots->len) g_string_append_len(g, plots->str, (gssize)plots->len);
    else g_string_append(g, "plot NaN notitle");
    g_string_append_c(g, '\n');
    gs_gp_end(g);
    g_free(title);
    g_free(res);
    g_free(al);
    g_free(cw);
    g_free(base);
}

gboolean gs_plot_map(gs_plotter *p, const char *trace, const char *stem, const gs_plot_run *r,
                     GError **err)
{
    map_layout m;
    layout(&m, r->series);
    GString *dat = g_string_new(NULL), *plots = g_string_new(NULL), *g = g_string_new(NULL);
    map_data(dat, plots, &m, trace, stem, r);
    map_script(g, &m, trace, stem, r, plots);
    char *datname = g_strdup_printf("%s.dat", stem);
    gboolean ok = gs_plotter_write(p, datname, dat, err) && gs_plotter_add_script(p, stem, g, err);
    g_free(datname);
    g_array_free(m.rows, TRUE);
    g_string_free(plots, TRUE);
    g_string_free(dat, TRUE);
    g_string_free(g, TRUE);
    return ok;
}
