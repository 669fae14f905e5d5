/* map.c - NAME-map-K-SPEC: the address space at the moment reserved memory peaked under
 * policy K, a row per segment (largest first), each block coloured by its state: allocated, free
 * (cached), freed but awaiting its stream, unmapped (expandable segments).
 *
 * NAME-oom-map-K-SPEC: the same at policy K's first OOM, the heap as the failed request left it
 * (after the allocator's own flush and retry), with the largest free block of the request's pool
 * outlined and named, and below the map the request drawn beside it: the request as rounded, the
 * largest free block of its pool (and on its stream), all the pool's free bytes, and the room
 * left under the cap.
 *
 * NAME-map-K-SPEC.dat holds the blocks, a gnuplot index block per state, each row a block's
 * extent in its segment (MiB, or GiB for segments of 4 GiB and more) and its size in bytes; an
 * OOM map's .dat then has the outlined block and the bars below the map as two more blocks.
 */
#include <stdlib.h>
#include <string.h>

#include "plot-int.h"

static const char *const state_colours[] = {"#E8432E", "#3A6FB0", "#9DBFE3", "#D9D9D9"};
/* The largest free block of the failed request's pool, in the map and in the bars below it. */
static const char *const largest_colour = "#9E1B0F";
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
    /* the ordinary pools' segments first, then each private pool's, by its id */
    if (x->seg->pool_id != y->seg->pool_id) return x->seg->pool_id < y->seg->pool_id ? -1 : 1;
    if (x->extent != y->extent) return x->extent > y->extent ? -1 : 1;
    if (x->seg->pool != y->seg->pool) return x->seg->pool < y->seg->pool ? -1 : 1;
    return x->seg->addr < y->seg->addr ? -1 : x->seg->addr > y->seg->addr;
}

/* What the map draws, and at what scale. */
typedef struct {
    const gs_plot_heapmap *hm;
    GArray *rows;        /* map_row: the segments with memory behind them, largest first */
    uint64_t longest;    /* the longest row's extent (at least 1) */
    uint64_t totals[4];  /* bytes drawn, per gs_block_state */
    bool any_expandable;
    bool any_private;    /* some row is a private pool's: rows grouped by pool */
    bool in_gib;         /* the axis in GiB (a row of 4 GiB or more), else in MiB */
    double unit;         /* bytes per unit of the axis */
} map_layout;

static const gs_plot_block *block_of(const gs_plot_heapmap *hm, const gs_plot_seg *g, guint k)
{
    return &g_array_index(hm->blocks, gs_plot_block, g->first + k);
}

static void layout(map_layout *m, const gs_plot_heapmap *hm)
{
    memset(m, 0, sizeof *m);
    m->hm = hm;
    m->rows = g_array_new(FALSE, FALSE, sizeof(map_row));
    m->longest = 1;
    for (guint i = 0; i < hm->segs->len; i++) {
        const gs_plot_seg *g = &g_array_index(hm->segs, gs_plot_seg, i);
        map_row row = {.seg = g, .extent = 0};
        for (guint k = 0; k < g->n; k++) {
            const gs_plot_block *b = block_of(hm, g, k);
            if (b->state != GS_BLOCK_UNMAPPED) row.extent = b->off + b->size;
        }
        if (!row.extent) continue; /* a reservation with nothing mapped */
        for (guint k = 0; k < g->n; k++) {
            const gs_plot_block *b = block_of(hm, g, k);
            if (b->off < row.extent && b->state < 4) m->totals[b->state] += b->size;
        }
        m->longest = MAX(m->longest, row.extent);
        m->any_expandable |= g->expandable;
        m->any_private |= g->pool_id != 0;
        g_array_append_val(m->rows, row);
    }
    qsort(m->rows->data, m->rows->len, sizeof(map_row), row_cmp);
    m->in_gib = m->longest >= 4 * GS_GiB;
    m->unit = m->in_gib ? (double)GS_GiB : (double)GS_MiB;
}

/* The smallest width a free block is drawn: 1/1000 of the axis. */
static double min_free_width(const map_layout *m)
{
    return (double)m->longest / m->unit / 1000.0;
}

/* The .dat rows of the blocks in state st: row x_from x_to size_bytes segment_addr. */
static void state_rows(GString *out, const map_layout *m, unsigned st)
{
    /* A free block narrower than a pixel would vanish, and stranded slivers are what this plot
     * is for: draw every free block at least 1/1000 of the axis wide (the .dat keeps its size). */
    double minw = min_free_width(m);
    for (guint i = 0; i < m->rows->len; i++) {
        const map_row *row = &g_array_index(m->rows, map_row, i);
        for (guint k = 0; k < row->seg->n; k++) {
            const gs_plot_block *b = block_of(m->hm, row->seg, k);
            if (b->state != st || b->off >= row->extent) continue;
            double x0 = (double)b->off / m->unit, x1 = (double)(b->off + b->size) / m->unit;
            if (st == GS_BLOCK_FREE && x1 - x0 < minw) x1 = x0 + minw;
            g_string_append_printf(out, "%u %.6f %.6f %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT "\n",
                                   i + 1, x0, x1, b->size, row->seg->addr);
        }
    }
}

/* NAME-map-K-SPEC.dat, an index block per state that has blocks, and the plot command's
 * clause for each, titled with the state's total. Returns the number of index blocks written. */
static int map_data(GString *dat, GString *plots, const map_layout *m, const char *trace,
                    const char *stem, const gs_plot_run *r, bool at_oom)
{
    const char *u = m->in_gib ? "GiB" : "MiB";
    g_string_append(dat, "# ");
    gs_dat_text(dat, trace);
    g_string_append(dat, " under ");
    gs_dat_text(dat, r->policy);
    g_string_append_printf(dat, ": every segment %s (after event %" G_GUINT64_FORMAT
                                "), largest first\n"
                                "# blocks in index blocks by state (free, allocated, pending, unmapped; "
                                "empty ones left out, named below)\n"
                                "# row x_from_%s x_to_%s size_bytes segment_addr\n",
                           at_oom ? "as the first OOM left it" : "at the peak of reserved memory",
                           m->hm->at.event, u, u);
    char *datname = g_strdup_printf("%s.dat", stem), *dat_lit = gs_gp_lit(datname);
    GString *rows = g_string_new(NULL);
    int block = 0;
    for (unsigned st = 0; st < 4; st++) {
        g_string_truncate(rows, 0);
        state_rows(rows, m, st);
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
    return block;
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
        /* a private pool's id is a number: no text of the trace reaches the script */
        char *pid = row->seg->pool_id ? g_strdup_printf("pool %" G_GUINT32_FORMAT ": ", row->seg->pool_id)
                                      : g_strdup("");
        g_string_append_printf(g, "%s'%s%s%s' %u", i ? ", " : "", pid, sz,
                               row->seg->expandable ? " mapped" : "", i + 1);
        g_free(pid);
        g_free(sz);
    }
    g_string_append(g, ") nomirror\n");
}

/* The map's axes: labels, ranges, tics, the key. */
static void map_axes(GString *g, const map_layout *m)
{
    g_string_append_printf(g, "set xlabel 'offset in the segment%s (%s)'\nset ylabel '%u segments, largest first%s'\n"
                              "set xrange [0:%.6g]\nset yrange [%u.5:0.5]\nset key above center horizontal Left reverse\n"
                              "set grid xtics\nset xtics nomirror\nset mxtics\n",
                           m->any_expandable ? " or mapped reservation" : "", m->in_gib ? "GiB" : "MiB",
                           m->rows->len, m->any_private ? " (by pool)" : m->any_expandable ? " (unmapped tails not drawn)" : "",
                           (double)m->longest / m->unit * 1.01, m->rows->len ? m->rows->len : 1);
    row_tics(g, m);
    if (!m->any_private) return;
    /* private pools apart: a dashed line above each pool's first row, named at the right */
    for (guint i = 0; i < m->rows->len; i++) {
        const gs_plot_seg *g0 = g_array_index(m->rows, map_row, i).seg;
        if (i && g_array_index(m->rows, map_row, i - 1).seg->pool_id == g0->pool_id) continue;
        if (i)
            g_string_append_printf(g, "set arrow from graph 0, first %u.5 to graph 1, first %u.5 "
                                      "nohead dt 2 lc rgb '#555555' front\n", i, i);
        if (g0->pool_id)
            g_string_append_printf(g, "set label 'private pool %" G_GUINT32_FORMAT "' at graph 0.99, "
                                      "first %u right front\n", g0->pool_id, i + 1);
        else
            g_string_append_printf(g, "set label 'ordinary pools' at graph 0.99, first %u right front\n",
                                   i + 1);
    }
}

/* NAME-map-K-SPEC.gp: the title (policy, capacity, reserved and allocated at the peak), axes,
 * row tics, then the clauses. */
static void map_script(GString *g, const map_layout *m, const char *trace, const char *stem,
                       const gs_plot_run *r, const GString *plots)
{
    const gs_plot_heapmap *hm = m->hm;
    char *base = g_path_get_basename(trace);
    char *cw = gs_plot_cap_words(r->capacity);
    char *res = gs_format_size((uint64_t)hm->at.reserved), *al = gs_format_size((uint64_t)hm->at.allocated);
    char *title = g_strdup_printf("%s under %s, %s\naddress space at peak reserved (%s reserved, %s "
                                  "allocated, after event %" G_GUINT64_FORMAT ")",
                                  base, r->policy, cw, res, al, hm->at.event);
    gs_gp_begin(g, stem, "the address space at peak reserved", 1280, 800);
    g_string_append(g, "set title ");
    gs_gp_str(g, title);
    g_string_append_c(g, '\n');
    map_axes(g, m);
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

/* ---- the map at the first OOM ---- */

/* The bars under an OOM map, in its .dat's last block: what the request needed beside what its
 * pool had. */
typedef struct {
    const char *colour;
    uint64_t bytes;
    char *label;
} oom_bar;

/* The bars: the request as rounded, the largest free block of its pool (and on its stream
 * when that is smaller), every free byte of the pool, and the room left under the cap. */
static guint oom_bars(oom_bar bars[5], const gs_plot_oom_req *q, const gs_plot_heapmap *hm)
{
    const char *pool = gs_plot_pool_words(q);
    guint n = 0;
    char *rq = gs_format_size(q->request), *rd = gs_format_size(q->rounded);
    bars[n++] = (oom_bar){"#222222", q->rounded,
                          q->rounded == q->request
                              ? g_strdup_printf("the failed request: %s", rq)
                              : g_strdup_printf("the failed request: %s, rounded to %s", rq, rd)};
    g_free(rq);
    g_free(rd);
    char *lg = gs_format_size(q->largest_in_pool);
    bars[n++] = (oom_bar){largest_colour, q->largest_in_pool,
                          q->largest_in_pool
                              ? g_strdup_printf("the largest free block in %s: %s (dark red above)", pool, lg)
                              : g_strdup_printf("no free block in %s", pool)};
    g_free(lg);
    if (q->largest_on_stream < q->largest_in_pool) {
        char *ls = gs_format_size(q->largest_on_stream);
        bars[n++] = (oom_bar){"#F08A7A", q->largest_on_stream,
                              g_strdup_printf("the largest on the request's stream: %s", ls)};
        g_free(ls);
    }
    char *fr = gs_format_size(q->free_in_pool);
    bars[n++] = (oom_bar){"#F6B8AE", q->free_in_pool,
                          g_strdup_printf("all free in %s: %s in %" G_GUINT64_FORMAT " block%s", pool,
                                          fr, q->n_free_in_pool, q->n_free_in_pool == 1 ? "" : "s")};
    g_free(fr);
    if (q->limit) {
        uint64_t reserved = (uint64_t)MAX(hm->at.reserved, 0);
        uint64_t room = q->limit > reserved ? q->limit - reserved : 0;
        char *rm = gs_format_size(room), *lim = gs_format_size(q->limit), *res = gs_format_size(reserved);
        bars[n++] = (oom_bar){"#8C8C8C", room,
                              g_strdup_printf("room under the cap: %s (%s reserved of %s)", rm, res, lim)};
        g_free(rm);
        g_free(lim);
        g_free(res);
    }
    return n;
}

/* The row of the map where the largest free block of the request's pool lies (0: none). */
static guint largest_row(const map_layout *m, const gs_plot_oom_req *q)
{
    if (!q->largest_in_pool) return 0;
    for (guint i = 0; i < m->rows->len; i++) {
        const map_row *row = &g_array_index(m->rows, map_row, i);
        if (row->seg->addr == q->largest_seg && q->largest_off < row->extent) return i + 1;
    }
    return 0;
}

/* NAME-oom-map-K-SPEC.gp: a multiplot of the map (the largest free block of the request's pool
 * outlined, with a labelled arrow) above the bars of the request and its pool. */
static void oom_script(GString *g, GString *dat, const map_layout *m, const char *trace,
                       const char *stem, const gs_plot_run *r, const GString *plots, int n_blocks)
{
    const gs_plot_heapmap *hm = m->hm;
    const gs_plot_oom_req *q = &r->series->oom_req;
    const char *pool = gs_plot_pool_words(q);
    char *base = g_path_get_basename(trace);
    char *cw = gs_plot_cap_words(r->capacity);
    char *rq = gs_format_size(q->request);
    char *res = gs_format_size((uint64_t)hm->at.reserved), *al = gs_format_size((uint64_t)hm->at.allocated);
    /* several clients: the map is the allocator that served the failed request */
    char *whose = r->oom_client ? g_strdup_printf("%s's request", r->oom_client) : g_strdup("a request");
    char *title = g_strdup_printf("%s under %s, %s\n%saddress space at the first OOM (event %" G_GUINT64_FORMAT
                                  "): %s of %s in %s failed%s%s reserved, %s allocated",
                                  base, r->policy, cw, r->oom_client ? "the failing allocator's " : "",
                                  hm->at.event, whose, rq, pool, r->oom_client ? "\n" : "; ", res, al);
    g_free(whose);
    char *datname = g_strdup_printf("%s.dat", stem), *dat_lit = gs_gp_lit(datname);
    const char *u = m->in_gib ? "GiB" : "MiB";
    gs_gp_begin(g, stem, "the address space at the first OOM", 1280, 960);
    g_string_append(g, "set multiplot\n");

    /* the map, with the largest free block of the request's pool outlined */
    g_string_append(g, "set origin 0,0.27\nset size 1,0.73\nset lmargin at screen 0.1\n"
                       "set rmargin at screen 0.97\nset title ");
    gs_gp_str(g, title);
    g_string_append_c(g, '\n');
    map_axes(g, m);
    GString *pl = g_string_new(plots->len ? plots->str : "plot NaN notitle");
    guint row = largest_row(m, q);
    g_string_append_printf(dat, "# the largest free block in %s, drawn dark and outlined\n"
                                "# row x_from_%s x_to_%s size_bytes segment_addr\n", pool, u, u);
    if (row) {
        double x0 = (double)q->largest_off / m->unit;
        double x1 = MAX((double)(q->largest_off + q->largest_in_pool) / m->unit, x0 + min_free_width(m));
        g_string_append_printf(dat, "%u %.6f %.6f %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT "\n",
                               row, x0, x1, q->largest_in_pool, q->largest_seg);
        g_string_append_printf(pl, ", \\\n     %s index %d using 2:1:2:3:($1-0.5):($1+0.5) with boxxyerror "
                                   "fs solid 1.0 border lc rgb '#000000' lw 1.5 lc rgb '%s' notitle",
                               dat_lit, n_blocks, largest_colour);
        /* the arrow's label on the roomier side of the block (an opaque box over the rows) */
        double xmax = (double)m->longest / m->unit * 1.01;
        bool right = xmax - x1 >= x0;
        char *lg = gs_format_size(q->largest_in_pool);
        char *text = g_strdup_printf("largest free block in %s: %s", pool, lg);
        double tx = right ? x1 + 0.06 * xmax : x0 - 0.06 * xmax;
        g_string_append_printf(g, "set arrow 1 from %.6f,%u to %.6f,%u lw 2 lc rgb '#000000' front\n"
                                  "set label 1 ", tx, row, right ? x1 : x0, row);
        gs_gp_str(g, text);
        g_string_append_printf(g, " at %.6f,%u %s offset %d,0 front font 'Sans,10' boxed\n"
                                  "set style textbox opaque fc rgb '#FFFFFF' noborder\n",
                               tx, row, right ? "left" : "right", right ? 1 : -1);
        g_free(text);
        g_free(lg);
    }
    g_string_append(dat, "\n\n");
    g_string_append_len(g, pl->str, (gssize)pl->len);
    g_string_append(g, "\nunset arrow 1\nunset label 1\n");
    g_string_free(pl, TRUE);

    /* the request beside its pool's free memory, bars on one scale */
    oom_bar bars[5];
    guint nb = oom_bars(bars, q, hm);
    uint64_t top = 1;
    for (guint i = 0; i < nb; i++) top = MAX(top, bars[i].bytes);
    bool gib_axis = top >= 4 * GS_GiB;
    double bu = gib_axis ? (double)GS_GiB : (double)GS_MiB;
    g_string_append(dat, "# the request beside its pool, a bar each (drawn below the map)\n"
                         "# row bar_");
    g_string_append(dat, gib_axis ? "GiB" : "MiB");
    g_string_append(dat, " bytes colour\n");
    for (guint i = 0; i < nb; i++)
        g_string_append_printf(dat, "%u %.6f %" G_GUINT64_FORMAT " 0x%s\n", i + 1,
                               (double)bars[i].bytes / bu, bars[i].bytes, bars[i].colour + 1);
    /* the longest bar takes half the width, so every label fits to the right of its bar */
    double xmax = (double)top / bu / 0.5;
    char *ptitle = g_strdup_printf("the failed request beside the free memory of %s", pool);
    g_string_append_printf(g, "set origin 0,0\nset size 1,0.25\nset lmargin at screen 0.1\n"
                              "set rmargin at screen 0.97\nset tmargin 2.5\nset bmargin 4\nset title ");
    gs_gp_str(g, ptitle);
    g_string_append_printf(g, "\nunset key\nunset ylabel\nunset ytics\nunset mxtics\nset grid xtics\n"
                              "set xlabel '%s'\nset xrange [0:%.6g]\nset yrange [%u.6:0.4]\n"
                              "set style fill solid 0.9 noborder\n",
                           gib_axis ? "GiB" : "MiB", xmax, nb);
    for (guint i = 0; i < nb; i++) {
        g_string_append_printf(g, "set label %u ", i + 10);
        gs_gp_str(g, bars[i].label);
        g_string_append_printf(g, " at %.6f,%u left offset 1,0 font 'Sans,10'\n",
                               (double)bars[i].bytes / bu, i + 1);
        g_free(bars[i].label);
    }
    /* gnuplot numbers only the index blocks that hold data: the largest block's is one only
     * when the pool has a free block */
    g_string_append_printf(g, "plot %s index %d using 2:1:(0):2:($1-0.34):($1+0.34):4 with boxxyerror "
                              "lc rgb variable\n",
                           dat_lit, n_blocks + (row ? 1 : 0));
    g_string_append(g, "unset multiplot\n");
    gs_gp_end(g);
    g_free(ptitle);
    g_free(dat_lit);
    g_free(datname);
    g_free(title);
    g_free(res);
    g_free(al);
    g_free(rq);
    g_free(cw);
    g_free(base);
}

gboolean gs_plot_map(gs_plotter *p, const char *trace, const char *stem, const gs_plot_run *r,
                     bool at_oom, GError **err)
{
    map_layout m;
    layout(&m, at_oom ? &r->series->oom : &r->series->peak);
    GString *dat = g_string_new(NULL), *plots = g_string_new(NULL), *g = g_string_new(NULL);
    int n_blocks = map_data(dat, plots, &m, trace, stem, r, at_oom);
    if (at_oom) oom_script(g, dat, &m, trace, stem, r, plots, n_blocks);
    else map_script(g, &m, trace, stem, r, plots);
    char *datname = g_strdup_printf("%s.dat", stem);
    gboolean ok = gs_plotter_write(p, datname, dat, err) && gs_plotter_add_script(p, stem, g, err);
    g_free(datname);
    g_array_free(m.rows, TRUE);
    g_string_free(plots, TRUE);
    g_string_free(dat, TRUE);
    g_string_free(g, TRUE);
    return ok;
}
