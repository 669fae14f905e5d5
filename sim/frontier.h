/* frontier.h - memory against time, every family and setting as a point, and the Pareto front.
 *
 * For one trace, each candidate setting (PyTorch's standard ones as whatif tries them, one of
 * each other family at its defaults, gpusim's own stitch, and any given) is a point: its
 * minimum capacity (whatif's search, sim/whatif.h) over the trace's lower bound (sim/bound.h),
 * and its modelled device time with no cap over PyTorch default's. A point is on the front when
 * no other point is at least as good on both and better on one: the settings worth choosing
 * between. docs/policy-families.md, "The frontier".
 */
#ifndef GS_FRONTIER_H
#define GS_FRONTIER_H

#include <stdbool.h>

#include "whatif.h"

G_BEGIN_DECLS

/* The family of gpusim's own policy: its point is marked. */
#define GS_FRONTIER_OURS "stitch"

typedef struct {
    const gs_whatif_row *row;
    const char *family;    /* the policy's name: "pytorch", "cupy", ... (static) */
    bool ours;             /* gpusim's own (GS_FRONTIER_OURS) */
    bool found;            /* a minimum capacity up to the search's ceiling */
    uint64_t min_capacity; /* when found */
    double memory;         /* min_capacity / the bound (the largest device's lower bound) */
    double device_us;      /* modelled device time with no cap */
    double time;           /* device_us / the default's (0 when the default's is 0) */
    bool completes;        /* the uncapped replay completes (no OOM, no device error) */
    bool pareto;           /* on the front: found, completes, and no other point dominates */
} gs_frontier_point;

typedef struct {
    GPtrArray *rows;        /* gs_whatif_row, owned */
    gs_frontier_point *pts; /* one per row, in the rows' order */
    size_t n;
    uint64_t bound;    /* the largest device's lower_bound_bytes: the capacity is per device */
    double default_us; /* PyTorch default's device time with no cap */
} gs_frontier;

/* The candidates: whatif's standard PyTorch settings, every other family at its defaults
 * (cupy, bfc, tlsf, rmm-pool, rmm-arena, cuda-async, stitch), then each spec of extra
 * (NULL-terminated; may be NULL), a setting named twice once. NULL and err for a bad spec. */
GPtrArray *gs_frontier_candidates(const char *const *extra, GError **err);

/* Search every row of rows (taken) on t with no cap (o->capacity is ignored) and place the
 * points. */
gs_frontier *gs_frontier_run(GPtrArray *rows, const gs_trace *t, const gs_whatif_opts *o);
void gs_frontier_free(gs_frontier *f);

/* The front among pts[0..n): sets each pareto flag. Exposed for the tests. */
void gs_frontier_mark(gs_frontier_point *pts, size_t n);

G_END_DECLS

#endif
