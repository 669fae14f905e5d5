/* bound.h - what no allocator can beat, and what an offline planner reaches, for a trace.
 *
 * Every replay's waste is measured against two numbers of the trace itself (docs/metrics.md,
 * "The bound"), computed once per trace, independent of any policy:
 *   lower_bound_bytes  the peak, over the trace, of the sum of the live requests' sizes as the
 *                      program asked for them, rounded up to the device's 2 MiB page: no
 *                      allocator can hold the live bytes in less, and the driver hands out
 *                      memory in whole pages;
 *   offline_bytes      the peak of an offline planner that knows every request's size and
 *                      lifetime in advance and places each once, for its whole life, in one
 *                      address range (the better of greedy by size and first fit in time
 *                      order; past a work budget, requests live beside all others stacked at
 *                      the bottom and first fit above them), requests aligned to 512 bytes,
 *                      rounded up to 2 MiB. An achievable layout: the optimum lies between the
 *                      two numbers.
 * Per device: a trace naming several devices gets a bound per device (each device's memory is
 * its own) and the totals are their sums. Every client of a device counts together: the bound
 * is the device's, whatever the arrangement.
 */
#ifndef GS_BOUND_H
#define GS_BOUND_H

#include <glib.h>
#include <stdint.h>

#include "trace.h"

G_BEGIN_DECLS

typedef struct {
    uint32_t device;
    uint64_t peak_live_bytes;   /* the peak of the live requested bytes, not rounded */
    uint64_t lower_bound_bytes; /* peak_live_bytes rounded up to 2 MiB */
    uint64_t offline_bytes;     /* the planner's peak, rounded up to 2 MiB; always computed
                                 * (0 only for a device with no request) */
} gs_bound_dev;

typedef struct {
    /* Totals over the devices (sums). */
    uint64_t peak_live_bytes, lower_bound_bytes, offline_bytes;
    size_t n_devices;           /* at least 1 (device 0 for a trace with no allocation) */
    gs_bound_dev *devices;      /* ascending device order */
} gs_bound;

/* How the offline planner places requests (docs/metrics.md, "The bound"). */
typedef enum {
    GS_PLAN_AUTO,      /* the better of greedy by size and first fit where greedy's work fits
                        * a budget; past it, the band then the same for the rest */
    GS_PLAN_GREEDY,    /* greedy by size whatever its cost (quadratic in the overlap) */
    GS_PLAN_FIRST_FIT, /* first fit in time order, O(n log n) */
    GS_PLAN_BANDED,    /* what AUTO does past the budget: the band, then the rest */
} gs_plan_method;

/* One request for the planner: live over [start, end) (start < end, any time unit), size
 * bytes (size > 0); off is the planner's answer. */
typedef struct {
    uint64_t start, end;
    uint64_t size;
    uint64_t off;
} gs_plan_req;

/* Place r[0..n) (fills each off) so that no two whose lifetimes meet overlap in address;
 * returns the highest end, the layout's peak. */
uint64_t gs_bound_plan(gs_plan_req *r, size_t n, gs_plan_method m);

/* What planner gs_bound_compute runs, as stored beside its figures in a trace's header
 * (offline_planner): change it whenever a change to the planner may change a figure, so no
 * trace keeps an older planner's answer. */
#define GS_BOUND_PLANNER "gpusim-auto-3"

/* The bound of t; never fails. Where t's header holds this planner's figures (gs_bound_store),
 * they are taken instead of planning again, each checked against the lower bound. O(n log n)
 * plus, where greedy by size runs (its pairs of requests whose lifetimes overlap within a
 * budget, bound.c), the lesser of those pairs and the unions it reads; past it O(n log n). */
gs_bound *gs_bound_compute(const gs_trace *t);
/* The same with a chosen planner, always planning (bench_bound compares them). */
gs_bound *gs_bound_compute_with(const gs_trace *t, gs_plan_method m);
/* Put b's offline figures into t's header (offline_bytes_by_device, offline_planner), so that
 * a replay of the trace as written need not plan again: `gpusim convert` does. */
void gs_bound_store(const gs_bound *b, gs_trace *t);
/* Plan t's bound and store it (gs_bound_store), as a writer of traces does (gpusim convert,
 * write-rows): a figure stored with the count of events it was planned over is this trace's and
 * taken; one from before that count was written is planned again, not passed on as checked. */
void gs_bound_plan_and_store(gs_trace *t);
void gs_bound_free(gs_bound *b);
/* The entry for device (NULL if the trace has none). */
const gs_bound_dev *gs_bound_device(const gs_bound *b, uint32_t device);

G_END_DECLS

#endif
