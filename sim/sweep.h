/* sweep.h - gpusim sweep: expand a grid of policy settings and capacities written with brace
 * lists, replay one trace in every cell in parallel, and report one CSV row per cell.
 *
 *   --policy 'pytorch:max_split_size_mb:{64,128,256,512}' --capacity '{5.75,6.25}GiB'
 *
 * is 8 cells; a list may hold ranges, A..B or A..B..STEP ('{64..512..64}', '{5.5..6.5..0.25}GiB').
 * Each brace list is a parameter, named by the key in front of it
 * (max_split_size_mb), "capacity" for the capacity, "policy_name" for a list in the policy
 * name's place, and "template" for the template itself when several --policy templates are
 * given. (None is "policy": the CSV's own policy column, the expanded spec, has that name.)
 */
#ifndef GS_SWEEP_H
#define GS_SWEEP_H

#include <glib.h>
#include <stdio.h>

#include "replay.h"

G_BEGIN_DECLS

/* The most cells one sweep may have: each holds a policy, a result and, while it runs, a heap
 * and a device (10^6 cells took 2.5 GB). A grid past it is GS_SWEEP_ERROR_INPUT when expanded,
 * before anything is allocated for its cells. */
#define GS_SWEEP_MAX_CELLS 10000u

#define GS_SWEEP_ERROR (gs_sweep_error_quark())
GQuark gs_sweep_error_quark(void);
typedef enum {
    GS_SWEEP_ERROR_INPUT, /* a template, a brace list or a capacity that cannot be expanded */
} gs_sweep_error_code;

typedef struct {
    char *policy;       /* the expanded spec */
    gs_policy *pol;     /* parsed from it */
    uint64_t capacity;  /* bytes; 0: no limit */
    char **values;      /* one per parameter, "" where the parameter does not apply */
    size_t index;       /* its place in the whole grid (the CSV's "cell"), kept by a shard */
} gs_sweep_cell;

typedef struct {
    GPtrArray *params;  /* char*: parameter names, the CSV's columns after "cell" */
    GArray *cells;      /* gs_sweep_cell, in grid order: templates in the order given, brace
                         * lists left to right (the first outermost, as a shell expands them),
                         * the capacity innermost */
} gs_sweep;

/* Expand and parse every cell (a bad setting fails here, before anything runs). policies is
 * NULL-terminated (NULL or empty: "pytorch"); capacity may be NULL (no limit). */
gs_sweep *gs_sweep_new(const char *const *policies, const char *capacity, GError **err);
void gs_sweep_free(gs_sweep *s);

/* Keep only shard k of n (0 <= k < n): the cells whose index i has i mod n == k, in grid order,
 * each keeping its index. Round robin rather than contiguous blocks, so a grid whose costly
 * cells sit together (the no-limit or expandable ones) still spreads them over the shards, and
 * a shard is known from (k, n) alone, without the grid's size. A shard may be left empty. */
void gs_sweep_shard(gs_sweep *s, unsigned k, unsigned n);

/* Replay t in every cell on up to jobs threads (0: one per processor), base giving everything
 * but the policy and capacity. results has one slot per cell, filled by cell index whatever
 * order the cells finish in. progress (may be NULL) is called, serialised, as each cell
 * finishes: cell is its index in s->cells, its result complete by then. */
typedef void (*gs_sweep_progress_fn)(size_t cell, size_t done, size_t total, void *ud);
gboolean gs_sweep_run(const gs_sweep *s, const gs_trace *t, const gs_replay_opts *base,
                      unsigned jobs, gs_sweep_progress_fn progress, void *ud, gs_result *results,
                      GError **err);

G_END_DECLS

#endif
