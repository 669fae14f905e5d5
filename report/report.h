/* report.h - results as a table for people, CSV and JSON for scripts (report.c), the CSV of a
 * sweep (report.c) and the merge of its shards' CSVs (sweep_merge.c). Every format carries the
 * same numbers under the names of the README's "Metrics".
 */
#ifndef GS_REPORT_H
#define GS_REPORT_H

#include <glib.h>
#include <stdio.h>

#include "replay.h"
#include "sweep.h"
#include "validate.h"
#include "frontier.h"
#include "whatif.h"

G_BEGIN_DECLS

/* refs: one per result (entries may be NULL), or NULL. first: this is the first trace of the
 * output (CSV prints its header once; JSON callers wrap the traces, one or several, in an array). */
void gs_report(FILE *out, gs_format fmt, const char *trace_name, const gs_trace *t,
               const gs_result *results, size_t n, const gs_reference *const *refs, bool first);
/* CSV column groups beyond the plain ones; a trace that needs none prints as it always did. */
enum {
    /* the columns of several clients (arrangement, client, ...), a row per client after each
     * result's */
    GS_REPORT_CLIENT_COLUMNS = 1u << 0,
    /* what the trace can tell: recorded_fatal_oom_event, synthesized_allocs, caught_ooms */
    GS_REPORT_CAVEAT_COLUMNS = 1u << 1,
    /* a device column, and a row per device after each result's (the totals) */
    GS_REPORT_DEVICE_COLUMNS = 1u << 2,
    /* the pool columns (pool, pool_reserved_at_peak_bytes, ...), and a row per pool after each
     * result's (a trace with private pools; docs/cli.md) */
    GS_REPORT_POOL_COLUMNS = 1u << 3,
    /* with GS_REPORT_CLIENT_COLUMNS: the columns, without the rows per client (a sweep's cell
     * is one row: the whole run's) */
    GS_REPORT_NO_CLIENT_ROWS = 1u << 4,
};
/* The column groups t needs. */
unsigned gs_report_columns(const gs_trace *t);
/* s as torch.cuda.memory_stats() gives it: one JSON object of its flat dotted keys (the
 * "memory_stats" of gpusim replay --format json). */
void gs_report_memory_stats(gs_jw *w, const gs_stats *s);
/* As gs_report; columns: the CSV's GS_REPORT_* groups. Give every trace of one output the
 * union of what its traces need, so the columns stay the same; gs_report gives t's own. */
void gs_report_ex(FILE *out, gs_format fmt, const char *trace_name, const gs_trace *t,
                  const gs_result *results, size_t n, const gs_reference *const *refs, bool first,
                  unsigned columns);

/* One CSV row per cell: "cell", the parameters, then the columns of gpusim replay --format csv.
 * finished (NULL: every cell) leaves out the cells whose flag is 0: a sweep cut short writes
 * the cells it finished, and sweep --merge names the others as missing. */
void gs_sweep_csv(FILE *out, const gs_sweep *s, const char *trace_name, const gs_trace *t,
                  const gs_result *results, const gint *finished);

/* gpusim sweep --merge (sweep_merge.c): the CSVs of a sweep's shards (texts[i], lens[i] bytes,
 * read from paths[i]) as the single-machine CSV: one header (every file's must be the same),
 * then every cell's row, copied byte for byte, in cell order. Each cell must be in exactly one
 * file and the cells must run from 0 without a gap; every row has the header's fields and the
 * first row's trace; grid (NULL: not given) is the sweep's, whose parameters and cells' values
 * the rows must have, and whose size also catches the last cells missing. *any_oom: some row's
 * outcome is oom. FALSE with "FILE:LINE: message" (or, for a missing cell, a message naming
 * it), nothing written. */
gboolean gs_sweep_csv_merge(FILE *out, const char *const *paths, const char *const *texts,
                            const size_t *lens, size_t n, const gs_sweep *grid, bool *any_oom,
                            GError **err);

/* ---- gpusim replay --export-snapshot (snapshot.c) ----
 * A simulated run as torch.cuda.memory._snapshot() writes it, for pytorch.org/memory_viz:
 * "segments" (with their blocks) as the run ended or stopped at its OOM, "device_traces" (alloc,
 * free_requested, free_completed, segment_alloc, segment_free, segment_map, segment_unmap, oom,
 * snapshot), "allocator_settings". A recorder serves one replay of one allocator: give it to
 * the replay as export_ud with gs_snapshot_observe (or call it from your own observer),
 * gs_snapshot_observe_alloc, gs_snapshot_observe_end and gs_snapshot_observe_reserve. */
typedef struct gs_snapshot_rec gs_snapshot_rec;
gs_snapshot_rec *gs_snapshot_rec_new(const gs_trace *t);
void gs_snapshot_rec_free(gs_snapshot_rec *r);
void gs_snapshot_observe(const gs_heap *h, const gs_event *e, size_t index, void *rec);
void gs_snapshot_observe_alloc(const gs_heap *h, const gs_event *e, const gs_block *b, void *rec);
void gs_snapshot_observe_end(const gs_heap *h, void *rec);
void gs_snapshot_observe_reserve(const gs_segment *s, uint64_t addr, int64_t bytes, void *rec);
/* The pickle (protocol 2), written whole to path. Its "gpusim" dict says what it is: the
 * trace, the policy, the capacity (0: none) and the simulated device's memory, which the
 * converter takes as the device total of a trace made back from it. */
gboolean gs_snapshot_write(const gs_snapshot_rec *r, const char *path, const char *trace_name,
                           const char *policy, uint64_t capacity, uint64_t device_total,
                           GError **err);

/* PyTorch's words for an OOM: "Tried to allocate 516.00 MiB; ... allocated by PyTorch, and ...
 * reserved by PyTorch but unallocated". g_free it. */
char *gs_oom_message(const gs_oom_report *o);

/* What the trace can tell, a line each (indented): where the recorded run died (an OOM), where
 * its recording began (a cut log). Nothing for a complete recording. */
void gs_report_caveats(FILE *out, const gs_trace *t);
/* The trace's bound (sim/bound.h) as r carries it, under the first line: "  bound: ...", and a
 * line per device of a trace that names several; the first line's figures are the devices' sum,
 * or with per_device the largest device's (a capacity is each device's own limit). */
void gs_report_bound(FILE *out, const gs_result *r, bool per_device);
/* Where r's clients were each capped alone (gs_result_capacity_per_client), the words that say
 * the bound is theirs together, which one client's allocator may need less than; else NULL. */
const char *gs_report_bound_of_clients(const gs_result *r);

/* ---- gpusim frontier (frontier.c) ---- */
/* Each trace's points (fs[i] for traces[i], named names[i]): a table per trace, or one CSV or
 * JSON for all. */
void gs_frontier_report(FILE *out, gs_format fmt, const char *const *names,
                        const gs_trace *const *traces, gs_frontier *const *fs, size_t n);

/* ---- gpusim whatif (whatif.c) ---- */
/* The cap a verdict is drawn at, and where it comes from (every format names it). */
typedef struct {
    uint64_t capacity;      /* 0: no cap (a run that completed, its device's size unknown) */
    uint64_t device_total;  /* the device's memory; 0: not known */
    const char *source;     /* "cap given" (--capacity), "recorded cap" (the run's NAME.json),
                             * "device memory"; NULL with no cap */
    /* --assume-repeat: what the trace was continued by (its "assumed_repeat"), else NULL */
    const char *assumption;
    /* A trace that ends where its run died: the period of its requests (0: none found) and,
     * when none, why (for the verdict's next steps) */
    size_t period;
    const char *no_period;
    /* A trace of several clients replayed separate where no candidate completes: the
     * arrangements under which the recorded setting completes with no cap ("shared,
     * cooperative"), NULL when none or not asked */
    const char *clients_complete;
} gs_whatif_cap;
/* The verdict: a row per candidate (rows sorted by gs_whatif_sort), the cap, the
 * recommendation; table, CSV or JSON. Of a trace that ends where its recorded run died, a
 * row that gets past that point "survived" and its minimum capacity is a lower bound (">="):
 * the rest of the program is not in the trace. */
void gs_whatif_report(FILE *out, gs_format fmt, const char *name, const gs_trace *t,
                      const GPtrArray *rows, const gs_whatif_cap *cap);
/* The recommendation in words, with what to do next. g_free it. */
char *gs_whatif_recommendation(const GPtrArray *rows, const gs_trace *t, const gs_whatif_cap *cap);
/* A row's outcome at the cap in the verdict's words: "ok", "survived", "oom", "error". */
const char *gs_whatif_outcome(const gs_whatif_row *r);
/* r's device time at the cap over the default row's (1.0: the same); 0 when there is no default,
 * or the two replays did not get as far (one died sooner: a time to a failure is no cost). */
double gs_whatif_vs_default(const gs_whatif_row *r, const gs_whatif_row *dflt);

/* gpusim validate's report (validate.c). Every judged check within its tolerance, every timed
 * run alike, no device failure. */
bool gs_validation_ok(const gs_trace *t, const gs_validation *v);
/* Table, or JSON (one object per validation; first: no separating comma). CSV is not offered. */
void gs_validation_report(FILE *out, gs_format fmt, const char *name, const gs_trace *t,
                          const gs_validation *v, bool first);

G_END_DECLS

#endif
