/* whatif.h - gpusim whatif: which allocator setting would have saved a run, and what it costs.
 *
 * For each candidate setting: the replay at the recorded run's cap (its outcome, retries, device
 * calls and time), and the minimum capacity at which the whole trace completes with no OOM,
 * found by bisection in steps of GS_WHATIF_STEP. A bisection assumes that more memory never
 * hurts; gpusim does not take that on trust: the answer and one step below are both replayed;
 * the GS_WHATIF_NEAR steps below that and a coarse grid further down are replayed, and a success
 * there restarts the search below it; the steps just above the answer and a grid up to the
 * largest capacity are replayed too; and any failure at a capacity above the answer is reported
 * (the setting survives at some capacity and fails at a larger one). A failure between the
 * points replayed can still go unseen: only a replay at every step would rule it out. A setting
 * for which no point replayed completes is replayed at the other settings' minimum capacities
 * (gs_whatif_run), where a window of success narrower than the grid's step may lie.
 */
#ifndef GS_WHATIF_H
#define GS_WHATIF_H

#include <glib.h>

#include "replay.h"

G_BEGIN_DECLS

#define GS_WHATIF_STEP (2 * GS_MiB)  /* the resolution of a minimum capacity: one device page */
#define GS_WHATIF_GRID 8             /* grid points replayed below and above the answer */
#define GS_WHATIF_NEAR 8             /* and steps replayed next to it, on either side */

/* ---- the search, apart from replays (so it can be tested on any predicate) ---- */

/* Does the trace complete at this capacity (bytes)? same comes in as [capacity, capacity + 1);
 * the probe may widen it to capacities known to answer as this one does, [same[0], same[1])
 * (a replay under any of them is this one: gs_result.same_lo), which the search then answers
 * without asking again. */
typedef bool (*gs_whatif_probe_fn)(uint64_t capacity, void *ud, uint64_t same[2]);

typedef struct {
    bool found;             /* some capacity <= hi completes */
    uint64_t min_capacity;  /* the smallest that completes, a multiple of step (found) */
    bool below_fails;       /* min_capacity - step was replayed and fails (or is below lo) */
    /* A capacity above min_capacity at which the trace fails (0: none seen): more memory hurt. */
    uint64_t fails_above;
    unsigned probes; /* replays made (a capacity a replay answered for too: none) */
} gs_whatif_search;

/* Bisection over multiples of step in (lo, hi]: lo is known to fail (e.g. below the trace's
 * bound, which no allocator can do without), hi is the largest capacity considered. Then the
 * checks below and above the answer. */
void gs_whatif_bisect(gs_whatif_probe_fn probe, void *ud, uint64_t lo, uint64_t hi, uint64_t step,
                      gs_whatif_search *out);
/* The same, the bisection started from from (>= lo), a capacity likely to fail but not known
 * to (the uncapped replay's peak of allocated bytes): the checks below an answer stop at from,
 * as a search from it did, but from itself is replayed where the answer is the step above it,
 * and where it completes the search and its checks go on below it, down to lo. A from at or
 * above hi is no hint (the search is gs_whatif_bisect's). */
void gs_whatif_bisect_from(gs_whatif_probe_fn probe, void *ud, uint64_t lo, uint64_t from,
                           uint64_t hi, uint64_t step, gs_whatif_search *out);

/* ---- the candidates and their replays ---- */

typedef struct {
    gs_policy *pol;
    bool recorded;          /* the setting the recorded run had */
    bool given;             /* asked for with --policy */
    gs_result at_cap;       /* the replay at the cap */
    unsigned replays;       /* replays besides the search's probes: at the cap, and uncapped
                             * where there is a cap (without one it is the one at the cap), and
                             * the checkpoints' trunk */
    uint64_t replayed_events; /* events all of them replayed, the search's included */
    gs_whatif_search search;
    /* With no cap, the replay at the cap is the uncapped one the search starts from: made
     * through the search's probes (sim/probe.h), which the search then takes. Internal. */
    struct gs_probes *probes;
} gs_whatif_row;

typedef struct {
    uint64_t capacity;      /* the cap the replays at the cap have; 0: none (the run had the
                             * whole device) */
    uint64_t device_total;  /* the simulated device's memory; no search goes above it */
    /* Optional: the recorded run's segment addresses, for the recorded setting's replay at the
     * cap (the recorded run at its own limit, placed as it was placed) */
    const gs_reference *ref;
    const gs_calibration *cal;
    gs_clients_mode clients; /* a trace of several clients: their arrangement (opts.h) */
    unsigned jobs;          /* settings replayed at once; 0: one per processor */
    /* Every replay of a search from the trace's first event, none from a checkpoint of the
     * uncapped replay (sim/probe.h), none skipped where the cap cannot bind and none answered
     * by another replay's span (gs_result.same_lo): the same answers at more cost, for
     * comparison. */
    bool full_replays;
    void (*progress)(size_t done, size_t total, void *ud); /* settings finished; serialised */
    void *progress_ud;
} gs_whatif_opts;

/* The standard candidates: the recorded setting (recorded_conf, PYTORCH_CUDA_ALLOC_CONF; may be
 * NULL or ""), PyTorch's default, expandable_segments:True, max_split_size_mb at 64, 128, 256
 * and 512, roundup_power2_divisions:4, garbage_collection_threshold:0.8; then every spec in
 * extra (NULL-terminated; may be NULL). A setting named twice appears once. NULL and err for a
 * bad extra spec. */
GPtrArray *gs_whatif_candidates(const char *recorded_conf, const char *const *extra, GError **err);
void gs_whatif_rows_free(GPtrArray *rows);

/* Replay every row at the cap and search its minimum capacity, rows in parallel: the replays at
 * the cap on threads, then, on a trace long enough for checkpoints, each row's search in a
 * process of its own (its checkpoints are forks, sim/probe.h; a search that cannot be forked
 * runs in this process); a shorter trace's searches run on the threads. A search starts with the
 * row's uncapped replay and goes no higher than its peak reserved (rounded up to a step; its
 * largest device's, the capacity being each device's limit), where a replay is the uncapped one
 * and completes. A setting whose choices read the limit may fail there: its search goes on up
 * to the device's memory. Call it where the process has one thread. */
void gs_whatif_run(GPtrArray *rows, const gs_trace *t, const gs_whatif_opts *o);

/* The row of PyTorch's default setting, or NULL. */
const gs_whatif_row *gs_whatif_default(const GPtrArray *rows);
/* The row of the recorded run's setting, or NULL. */
const gs_whatif_row *gs_whatif_recorded(const GPtrArray *rows);
/* Sort: most memory saved first (smallest minimum capacity; none found last). */
void gs_whatif_sort(GPtrArray *rows);

G_END_DECLS

#endif
