/* replay.h - the replay engine, the reports, and the helpers of the gpusim command line.
 *
 * Data flows one way: trace (traces/) -> replay engine -> core + policy -> backend; the core's
 * statistics -> a gs_result -> report (table, CSV, JSON).
 */
#ifndef GS_REPLAY_H
#define GS_REPLAY_H

#include <glib.h>
#include <stdio.h>

#include "backend.h"
#include "core.h"
#include "policy.h"
#include "trace.h"

G_BEGIN_DECLS

/* What a reference file (traces/convert.py --reference) says the real allocator did. */
typedef struct {
    char *path;
    char *allocator_conf;    /* PYTORCH_CUDA_ALLOC_CONF of the real run */
    uint64_t device_total;   /* 0 if unknown */
    uint64_t cap_bytes;      /* PyTorch's truncated limit; 0 if the run had no cap */
    char *outcome;           /* "ok", "oom", or NULL if unknown */
    GArray *seg_addrs;       /* uint64_t: address of each segment_alloc, in order */
    GArray *seg_sizes;       /* uint64_t: its size */
    GHashTable *stats;       /* char* -> int64_t*: the run's torch.cuda.memory_stats(), or NULL */
    uint64_t peak_reserved;  /* from the segment events */
    uint64_t n_segment_alloc;
} gs_reference;

gs_reference *gs_reference_load(const char *path, GError **err);
void gs_reference_free(gs_reference *r);
/* A memory_stats value; FALSE if the reference has no such key. */
gboolean gs_reference_stat(const gs_reference *r, const char *key, int64_t *out);

typedef void (*gs_progress_fn)(size_t done, size_t total, void *ud);
/* Called after every event with the heap as that event left it (e: the event; index: events
 * replayed before it, over all repetitions). For plots (plots/plot.h): the timeline, the retry
 * and OOM markers, the address map at peak reserved. Must not change the heap. */
typedef void (*gs_observe_fn)(const gs_heap *h, const gs_event *e, size_t index, void *ud);

typedef struct {
    uint64_t capacity;            /* the allocator's limit in bytes; 0 = none */
    uint64_t device_total;        /* the simulated device's physical memory */
    const gs_calibration *cal;    /* NULL: the built-in table */
    bool continue_on_oom;         /* count and skip OOMs instead of stopping at the first */
    const gs_reference *ref;      /* optional: segment addresses from the real run */
    gs_backend *backend;          /* optional: run on this backend instead of a new sim device */
    gs_progress_fn progress;      /* optional, called every 2^20 events */
    void *progress_ud;
    unsigned repeat;              /* replay the trace this many times (benchmarks); 0 = 1 */
    bool touch;                   /* write every allocation once (real memory: --touch) */
    gs_observe_fn observe;        /* optional: see gs_observe_fn; NULL costs one branch */
    void *observe_ud;
} gs_replay_opts;

typedef struct {
    char *policy;                 /* the spec */
    const char *backend;          /* the device's name: "sim", "cuda" (static string) */
    uint64_t capacity;
    bool oom;                     /* at least one OOM the program could not recover from */
    size_t first_oom_event;       /* event index (seq) of the first OOM */
    uint64_t first_oom_size;      /* its requested size */
    gs_status error;              /* GS_OK, or a device failure that stopped the replay */
    char *error_msg;              /* the backend's words for it (call, size, driver message) */
    size_t error_event;
    size_t events;                /* events replayed */
    size_t skipped_frees;         /* frees of allocations that had failed (continue-on-oom) */
    gs_stats stats;
    gs_devcalls calls;
    double host_seconds;          /* replay loop only: no parsing, no setup */
    size_t script_used;           /* segments placed at the reference's addresses */
    /* The device's free bytes before the replay and after the allocator let go of everything:
     * equal when every byte went back. */
    uint64_t dev_free_before, dev_free_after;
    /* More members for this result's JSON object, already formatted (", \"timeline\": ...":
     * the plot series of plots/plot.c), or NULL; g_free'd by gs_result_clear. */
    char *json_extra;
} gs_result;

/* Replay t under policy p. Returns FALSE only for setup errors (err set); an OOM or a device
 * failure during the replay is an outcome, recorded in r. */
gboolean gs_replay_run(const gs_trace *t, const gs_policy *p, const gs_replay_opts *o,
                       gs_result *r, GError **err);
void gs_result_clear(gs_result *r);

/* ---- metrics (DESIGN.md "Metrics") ---- */
double gs_result_frag_peak(const gs_result *r);
double gs_result_internal_frag(const gs_result *r);
double gs_result_external_frag(const gs_result *r);

/* ---- reports ---- */
typedef enum { GS_FMT_TABLE, GS_FMT_CSV, GS_FMT_JSON } gs_format;

/* refs: one per result (entries may be NULL), or NULL. first: this is the first trace of the
 * output (CSV prints its header once; JSON callers wrap several traces in an array). */
void gs_report(FILE *out, gs_format fmt, const char *trace_name, const gs_trace *t,
               const gs_result *results, size_t n, const gs_reference *const *refs, bool first);

/* ---- sizes: "18.2GiB", "512MiB", "4096", "1.5GB" (decimal units) ---- */
gboolean gs_parse_size(const char *s, uint64_t *out, GError **err);
/* "5.45 GiB", "20.00 MiB", "512 B": for tables */
char *gs_format_size(uint64_t bytes);

G_END_DECLS

#endif
