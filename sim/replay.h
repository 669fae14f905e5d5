/* replay.h - the replay engine: a trace replayed under a policy on a device, and its result.
 *
 * Data flows one way: trace (traces/) -> replay engine -> core + policy -> backend; the core's
 * statistics -> a gs_result -> report (report/: table, CSV, JSON) -> plots (plots/).
 */
#ifndef GS_REPLAY_H
#define GS_REPLAY_H

#include <glib.h>
#include <stdio.h>

#include "backend.h"
#include "bound.h"
#include "core.h"
#include "policies.h"
#include "util.h"
#include "trace.h"

G_BEGIN_DECLS

#define GS_REPLAY_ERROR (gs_replay_error_quark())
GQuark gs_replay_error_quark(void);
typedef enum {
    GS_REPLAY_ERROR_REFERENCE, /* a reference file that cannot be read or is not one */
    GS_REPLAY_ERROR_SETUP,     /* a replay that cannot start (a policy the device cannot run) */
} gs_replay_error_code;

/* What a reference file (traces/convert.py --reference) says the real allocator did. With
 * several devices, the file's "devices" object holds one such reference per device (devices,
 * device_ids), and the top level is the run as a whole (its outcome; memory_stats of device 0
 * as PyTorch's memory_stats() gives by default). */
typedef struct gs_reference {
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
    uint64_t n_device_free;  /* segment_free and segment_unmap events */
    bool has_outcome_event;  /* the run died: at trace event outcome_event */
    size_t outcome_event;
    size_t n_devices;        /* 0: a one-device run */
    uint32_t *device_ids;    /* n_devices, ascending */
    struct gs_reference **devices;
} gs_reference;

gs_reference *gs_reference_load(const char *path, GError **err);
void gs_reference_free(gs_reference *r);
/* A memory_stats value; FALSE if the reference has no such key. */
gboolean gs_reference_stat(const gs_reference *r, const char *key, int64_t *out);
/* The reference of one device of a several-device run; NULL if it has none. */
const gs_reference *gs_reference_device(const gs_reference *r, uint32_t device);

typedef void (*gs_progress_fn)(size_t done, size_t total, void *ud);
/* Called after every event with the heap as that event left it (e: the event; index: events
 * replayed before it, over all repetitions). For plots (plots/plot.h): the timeline, the retry
 * and OOM markers, the address map at peak reserved. Must not change the heap. */
typedef void (*gs_observe_fn)(const gs_heap *h, const gs_event *e, size_t index, void *ud);
/* For the memory_viz export (report.h, gs_snapshot_*): called right after an alloc event is
 * served, with the block serving it (its address and rounded size), before gs_observe_fn; and
 * once at the end of a one-allocator replay, with the heap as the last event replayed left it
 * (the end of the trace, or the OOM it stopped at), before the allocator lets go of it. */
typedef void (*gs_observe_alloc_fn)(const gs_heap *h, const gs_event *e, const gs_block *b, void *ud);
typedef void (*gs_observe_end_fn)(const gs_heap *h, void *ud);

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

/* One device's own settings, for a trace whose events name several devices. */
typedef struct {
    uint32_t device;
    uint64_t capacity;            /* 0: gs_replay_opts.capacity */
    uint64_t device_total;        /* 0: gs_replay_opts.device_total */
} gs_device_opts;

typedef struct {
    uint64_t capacity;            /* the allocator's limit in bytes; 0 = none */
    uint64_t device_total;        /* the simulated device's physical memory */
    const gs_calibration *cal;    /* NULL: the built-in table */
    bool continue_on_oom;         /* count and skip OOMs instead of stopping at the first */
    const gs_reference *ref;      /* optional: segment addresses from the real run */
    gs_backend *backend;          /* optional: run on this backend instead of a new sim device */
    gs_progress_fn progress;      /* optional, called every 2^20 events */
    void *progress_ud;
    unsigned repeat;              /* replay the trace this many times (benchmarks); 0 = 1;
                                   * a trace that ends in the OOM its run died of is
                                   * replayed to that end each time */
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
    /* optional (see gs_observe_alloc_fn): one branch per alloc, and one per replay, when NULL;
     * a trace of several clients or devices calls neither */
    gs_observe_alloc_fn observe_alloc;
    gs_observe_end_fn observe_end;
    void *export_ud;
    /* Traces with several devices: each device is its own allocator on its own simulated
     * device, with capacity and device_total above unless an entry here names it. A reference
     * (ref) gives each device its own segment addresses. */
    const gs_device_opts *devices;
    size_t n_devices;
    /* Optional: the trace's bound (bound.h), computed once by a caller that replays it many
     * times; NULL: gs_replay_run computes it for this replay. */
    const gs_bound *bound;
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

/* What the allocator held when a request first failed: what PyTorch's OOM message says (the
 * request, allocated, reserved but unallocated) and what it does not (where the free memory
 * was, and how much of it lay in pieces too small for the request). */
typedef struct {
    uint64_t request;             /* the size the program asked for */
    uint64_t rounded;             /* as the policy rounded it */
    unsigned pool;                /* the pool it went to (the policy's pool number) */
    uint32_t private_pool;        /* the private pool it was routed to, by the trace's id;
                                   * 0: the ordinary pools */
    uint64_t stream;              /* its stream, as the trace names it */
    uint64_t allocated, reserved; /* the allocator's, then */
    uint64_t limit;               /* the allocator's limit (0: none) */
    uint64_t free_total;          /* cached free bytes, every pool and stream */
    uint64_t free_too_small;      /* of which in blocks smaller than the rounded request */
    uint64_t largest_free;        /* the largest cached free block anywhere */
    uint64_t largest_in_pool;     /* the largest in the request's pool (any stream; within
                                   * its private pool when it was routed to one) */
    uint64_t largest_on_stream;   /* the largest in the request's pool on its stream: what
                                   * best fit could have used */
    char *frame;                  /* the request's top user frame, "file:line:function",
                                   * when the trace has it (owned), else NULL */
} gs_oom_report;

/* One pool's part of a replay of a trace with private pools (docs/metrics.md, "Per pool"):
 * the ordinary pools (id 0), then each private pool the trace names, in the order of its first
 * pool_begin. Kept from the core's reserve callback (a call per device call, none per request)
 * and from a walk over the segments at the end; nothing on the per-request path. */
typedef struct {
    uint32_t id;                  /* the trace's pool id; 0: the ordinary pools */
    uint64_t reserved_at_peak;    /* its reserved bytes when the allocator's reached their peak */
    uint64_t peak_reserved;       /* its own peak of reserved bytes */
    uint64_t reserved_end;        /* as the replay ended (or stopped at its OOM) */
    uint64_t allocated_end;       /* bytes of live blocks (allocated or free pending) then */
    uint64_t segments_end;        /* its segments then (an expandable one: its reservation) */
    uint64_t device_allocs;       /* cudaMalloc calls, and page maps of expandable segments */
    uint64_t device_frees;        /* cudaFree calls, and page unmaps */
    bool released;                /* it had memory and was gone by the end: its last use
                                   * was released and its segments returned to the device */
} gs_pool_result;

/* The private pool ids a trace's pool events name, in the order of their first appearance
 * (*ids: g_free it; NULL when none). 0 for a trace without private pools. */
size_t gs_trace_pool_ids(const gs_trace *t, uint32_t **ids);

typedef struct gs_result {
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
    /* Device calls that failed while the allocator let go of everything at the end (memory
     * left on the device); not in the statistics above, which are taken before. */
    size_t teardown_failures;
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
    gs_oom_report *first_oom_report; /* the heap at the first OOM (owned), when oom */
    /* More members for this result's JSON object, already formatted (", \"timeline\": ...":
     * the plot series of plots/plot.c), or NULL; g_free'd by gs_result_clear. */
    char *json_extra;
    /* oom events of the trace (requests that failed in the recorded run, which went on) that
     * failed here too: counted in num_ooms, gone past as the program did. Not in oom. */
    size_t caught_ooms;
    /* Several devices (NULL/0 for a trace with one; its result is exactly as before): each
     * device's own result (device, capacity, outcome, first OOM, stats, calls), in ascending
     * device order. stats and calls above are then the sums over the devices, with peaks of
     * the sums over time; oom and first_oom_* are the run's (it stops at the first fatal one). */
    struct gs_result *devices;
    size_t n_devices;
    uint32_t device;              /* a device's result: which device */
    uint32_t first_oom_device;    /* several devices, when oom: the device of the first OOM */
    /* The trace's bound (bound.h; docs/metrics.md): no allocator needs less than
     * lower_bound_bytes, an offline planner needs offline_bytes. A device's result: its own. */
    uint64_t lower_bound_bytes, offline_bytes;
    /* A one-allocator replay of a trace with private pools: a row per pool (gs_pool_result),
     * the ordinary pools first; NULL/0 otherwise (the result is exactly as before). */
    gs_pool_result *pools;
    size_t n_pools;
} gs_result;

/* Replay t under policy p. Returns FALSE only for setup errors (err set); an OOM or a device
 * failure during the replay is an outcome, recorded in r. */
gboolean gs_replay_run(const gs_trace *t, const gs_policy *p, const gs_replay_opts *o,
                       gs_result *r, GError **err);
/* Free what r owns (its strings, its clients, json_extra) and zero it. */
void gs_result_clear(gs_result *r);
/* Move src into dst (dst: a result or zeroed memory): dst's old contents are cleared, dst takes every pointer src owned, and src
 * is left zeroed (so clearing both frees each thing once). A gs_result is never copied by
 * assignment: its pointers would then have two owners. */
void gs_result_move(gs_result *dst, gs_result *src);

/* ---- metrics (docs/metrics.md) ---- */
double gs_result_frag_peak(const gs_result *r);
double gs_result_internal_frag(const gs_result *r);
double gs_result_external_frag(const gs_result *r);

G_END_DECLS

#endif
