/* frontier.c - every family and setting as a point of memory against time (frontier.h). */
#include <string.h>

#include "frontier.h"

/* One of each family besides PyTorch's, at its defaults (docs/policy-families.md); the
 * preallocating family is left out: it reserves a fraction of whatever capacity it is given,
 * so its minimum says nothing of its packing. */
static const char *const families[] = {
    "cupy", "bfc", "tlsf", "rmm-pool", "rmm-arena", "cuda-async", GS_FRONTIER_OURS,
};

GPtrArray *gs_frontier_candidates(const char *const *extra, GError **err)
{
    GPtrArray *all = g_ptr_array_new();
    for (size_t i = 0; i < G_N_ELEMENTS(families); i++) g_ptr_array_add(all, (char *)families[i]);
    for (const char *const *e = extra; e && *e; e++) g_ptr_array_add(all, (char *)*e);
    g_ptr_array_add(all, NULL);
    GPtrArray *rows = gs_whatif_candidates(NULL, (const char *const *)all->pdata, err);
    g_ptr_array_free(all, TRUE);
    return rows;
}

void gs_frontier_mark(gs_frontier_point *pts, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        gs_frontier_point *a = &pts[i];
        a->pareto = a->found && a->completes;
        for (size_t j = 0; j < n && a->pareto; j++) {
            const gs_frontier_point *b = &pts[j];
            if (j == i || !b->found || !b->completes) continue;
            bool no_worse = b->min_capacity <= a->min_capacity && b->device_us <= a->device_us;
            bool better = b->min_capacity < a->min_capacity || b->device_us < a->device_us;
            if (no_worse && better) a->pareto = false;
        }
    }
}

/* The trace's lower bound, the largest device's: every replay's result carries it, so it is
 * read from the first row's, not planned again. */
static uint64_t largest_bound(const GPtrArray *rows)
{
    if (!rows->len) return 0;
    const gs_result *r = &((const gs_whatif_row *)rows->pdata[0])->at_cap;
    return (uint64_t)gs_result_per_allocator(r, GS_FIG_LOWER_BOUND);
}

gs_frontier *gs_frontier_run(GPtrArray *rows, const gs_trace *t, const gs_whatif_opts *o)
{
    gs_whatif_opts uncapped = *o;
    uncapped.capacity = 0;
    uncapped.ref = NULL;
    gs_whatif_run(rows, t, &uncapped);

    gs_frontier *f = g_new0(gs_frontier, 1);
    f->rows = rows;
    f->n = rows->len;
    f->pts = g_new0(gs_frontier_point, f->n ? f->n : 1);
    f->bound = largest_bound(rows);
    const gs_whatif_row *dflt = gs_whatif_default(rows);
    f->default_us = dflt ? gs_devcalls_total_us(&dflt->at_cap.calls) : 0;
    for (size_t i = 0; i < f->n; i++) {
        const gs_whatif_row *r = rows->pdata[i];
        gs_frontier_point *p = &f->pts[i];
        p->row = r;
        p->family = r->pol->ops->name;
        p->ours = strcmp(p->family, GS_FRONTIER_OURS) == 0;
        p->found = r->search.found;
        p->min_capacity = r->search.min_capacity;
        p->memory = p->found && f->bound ? (double)p->min_capacity / (double)f->bound : 0;
        p->device_us = gs_devcalls_total_us(&r->at_cap.calls);
        p->time = f->default_us > 0 ? p->device_us / f->default_us : 0;
        p->completes = !r->at_cap.oom && r->at_cap.error == GS_OK;
    }
    gs_frontier_mark(f->pts, f->n);
    return f;
}

void gs_frontier_free(gs_frontier *f)
{
    if (!f) return;
    g_free(f->pts);
    gs_whatif_rows_free(f->rows);
    g_free(f);
}
