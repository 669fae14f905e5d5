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

/* How the clients of a trace with several (libraries on one GPU) share the device. A trace
 * with one client replays the same way under each. */
typedef enum {
    GS_CLIENTS_SEPARATE = 0, /* an allocator per client; they compete for the device's memory */
    GS_CLIENTS_SHARED,       /* one allocator serves every client (as RMM's hooks do) */
    GS_CLIENTS_COOPERATIVE,  /* an allocator per client; one the device refuses asks the others
                              * to release their cached segments, then tries again */
    GS_CLIENTS_COUNT
} gs_clients_mode;

const char *gs_clients_mode_name(gs_clients_mode m);
/* "separate", "shared", "cooperative"; FALSE for anything else. */
gboolean gs_clients_mode_parse(const char *s, gs_clients_mode *out);

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
    /* Each time reserved memory reaches a new peak, ask the device how much memory it has lost
     * since the start (cudaMemGetInfo, not counted as the allocator's call): the driver's view
     * of peak reserved, for gpusim validate. It costs a call per new peak, so timed runs leave
     * it off. */
    bool probe_driver;
    /* Traces with several clients: the arrangement, and optionally a policy per client
     * (indexed like gs_trace.clients; a NULL array or entry means the policy given to
     * gs_replay_run). The shared arrangement runs one allocator under that policy. Every
     * allocator may reserve up to capacity; together they have the device's memory. */
    gs_clients_mode clients;
    const gs_policy *const *client_policy;
    gs_observe_fn observe;        /* optional: see gs_observe_fn; NULL costs one branch */
    void *observe_ud;
} gs_replay_opts;

/* One client's part of a replay of a trace with several clients. */
typedef struct {
    char *name;                   /* the trace's client name */
    char *policy;                 /* the spec of the allocator that served it */
    bool oom;                     /* it met an OOM it could not recover from */
    size_t first_oom_event;
    uint64_t first_oom_size;
    /* separate, cooperative: its allocator's statistics. shared: its part of the one
     * allocator's: allocations and allocated/requested bytes by request; reserved bytes and
     * segments by the segment's maker (the client whose request made it; an expandable
     * segment's pages go to the client that made the reservation); retries, OOMs, syncs,
     * device calls and their time by the client whose request caused them. The additive
     * numbers (current, allocated, freed, counts) of all clients sum to the device's. */
    gs_stats stats;
    gs_devcalls calls;
    uint64_t released_for_others; /* cooperative: cached bytes it released when asked */
    /* What it held when the run met its first OOM (any client's), if it did. */
    uint64_t reserved_at_oom, allocated_at_oom;
} gs_client_result;

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
    double touch_seconds;         /* of which writing allocations (--touch) */
    size_t script_used;           /* segments placed at the reference's addresses */
    /* The device's free bytes before the replay and after the allocator let go of everything:
     * equal when every byte went back. */
    uint64_t dev_free_before, dev_free_after;
    /* probe_driver: the most device memory gone at a peak of reserved (free before minus free
     * then); 0 when not probed. */
    uint64_t driver_peak_used;
    /* Several clients (NULL/0 for a trace with one; its result is exactly as before). stats
     * and calls above are then the whole device's: the allocator's in the shared arrangement,
     * else the sums over the clients' allocators, with peaks of the sums over time. */
    const char *arrangement;      /* gs_clients_mode_name(), static */
    gs_client_result *clients;    /* in the trace's client order */
    size_t n_clients;
    size_t first_oom_client;      /* index into clients, when oom */
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
/* As gs_report; client_columns: CSV gets the columns of several clients (arrangement, client,
 * ...) and a row per client after each result's. Set it for every trace of one output when any
 * trace has several clients, so the columns stay the same; gs_report sets it when t has. */
void gs_report_ex(FILE *out, gs_format fmt, const char *trace_name, const gs_trace *t,
                  const gs_result *results, size_t n, const gs_reference *const *refs, bool first,
                  bool client_columns);

/* A CSV field for s: as it is, or quoted with inner quotes doubled when it holds a comma, a
 * quote or a line break (RFC 4180). g_free the result. */
char *gs_csv_quote(const char *s);

/* A JSON string literal for s (quotes, escapes). */
void gs_json_str(FILE *out, const char *s);

/* ---- validation: the simulator beside the real device (sim/validate.c) ---- */

/* Tolerances, stated in gpusim validate --help and the README. */
#define GS_VALIDATE_TIME_TOL 0.25    /* modelled device time within 25% of the measured */
#define GS_VALIDATE_KIND_SHARE 0.10  /* a call kind's time is judged from 10% of the total */
#define GS_VALIDATE_DRIVER_TOL 0.02  /* driver's view of peak reserved within 2% */

typedef struct {
    uint64_t capacity, device_total; /* as gs_replay_opts, for both sides */
    const gs_calibration *cal;       /* the simulator's cost model; NULL: built-in */
    gs_backend *backend;             /* the real device */
    unsigned runs;                   /* timed runs after the warm-up; 0 = 1 */
    bool touch;
    GArray *samples;                 /* optional: every timed call, for gs_calibration_write */
} gs_validate_opts;

typedef struct {
    gs_result sim;                 /* the simulator's prediction */
    gs_result real;                /* the first timed run: outcome, statistics, call counts */
    double real_us[GS_CALL_COUNT]; /* median over the timed runs of each kind's time */
    double real_total_us;          /* median of the runs' total device time */
    double real_host_s;            /* median host seconds of the replay loop, touches excluded */
    unsigned runs;                 /* timed runs done */
    bool runs_agree;               /* every timed run made the same calls, same peak */
    uint64_t driver_peak;          /* the driver's view of peak reserved (warm-up run) */
} gs_validation;

/* FALSE on a setup error (err set); a device failure is in v->real.error. */
gboolean gs_validate_run(const gs_trace *t, const gs_policy *p, const gs_validate_opts *o,
                         gs_validation *v, GError **err);
void gs_validation_clear(gs_validation *v);
/* Every judged check within its tolerance, every timed run alike, no device failure. */
bool gs_validation_ok(const gs_trace *t, const gs_validation *v);
/* Table, or JSON (one object per validation; first: no separating comma). CSV is not offered. */
void gs_validation_report(FILE *out, gs_format fmt, const char *name, const gs_trace *t,
                          const gs_validation *v, bool first);
/* An empty array of gs_call_sample for gs_validate_opts.samples (gs_calibration_save). */
GArray *gs_call_samples_new(void);

/* ---- sizes: "18.2GiB", "512MiB", "4096", "1.5GB" (decimal units) ---- */
gboolean gs_parse_size(const char *s, uint64_t *out, GError **err);
/* "5.45 GiB", "20.00 MiB", "512 B": for tables */
char *gs_format_size(uint64_t bytes);

G_END_DECLS

#endif
