/* result.h - what a replay gives (gs_result): the statistics of the allocator (or allocators),
 * its device calls, its first OOM and what the heap held then, per client, device and pool; and
 * the metrics drawn from it (docs/metrics.md). Made by the engine (replay.h), read by report/
 * and plots/.
 */
#ifndef GS_RESULT_H
#define GS_RESULT_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "core.h"

G_BEGIN_DECLS

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

typedef struct gs_result {
    char *policy;                 /* the spec */
    const char *backend;          /* the device's name: "sim", "cuda" (static string) */
    uint64_t capacity;
    bool oom;                     /* at least one OOM the program could not recover from */
    /* The trace ends at the OOM its recorded run died of, and this replay got past it: it
     * survives as far as the recording goes, which says nothing of the rest of the program
     * (reported as "survived", never "ok"). */
    bool survived;
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
    /* A one-allocator replay of a trace with private pools, under a policy that has them (no
     * grow hook): a row per pool (gs_pool_result), the ordinary pools first; NULL/0 otherwise
     * (the result is exactly as before). */
    gs_pool_result *pools;
    size_t n_pools;
    /* A capped replay of one allocator under a policy blind to the limit: every capacity in
     * [same_lo, same_hi) replays as this one did, event for event (gs_heap_same_limits); both
     * 0 where that is not known (no cap, several allocators or devices, a real device). */
    uint64_t same_lo, same_hi;
} gs_result;

/* Free what r owns (its strings, its clients, json_extra) and zero it. */
void gs_result_clear(gs_result *r);
/* Move src into dst (dst: a result or zeroed memory): dst's old contents are cleared, dst takes every pointer src owned, and src
 * is left zeroed (so clearing both frees each thing once). A gs_result is never copied by
 * assignment: its pointers would then have two owners. */
void gs_result_move(gs_result *dst, gs_result *src);

/* "error", "oom", "survived" (the trace's recorded death got past: result.h) or "ok". */
const char *gs_result_outcome(const gs_result *r);

/* A figure of r as a capacity reads it: a capacity is each allocator's own limit, a device's
 * (sim/devices.c) or, with several clients arranged separate or cooperative, each client's (sim/
 * clients.c). So for a result of several devices or such clients, the largest one's figure, not
 * the sum over them (the sum made the minimum of a two-GPU trace twice what either device
 * needed, and clamped a two-client trace's minimum to both clients' peaks together); fig(r) for
 * one allocator. The bound's two figures are the device's, all its clients together (the bound
 * knows no client: gs_result_capacity_per_client says when a capacity may be below them). */
typedef enum {
    GS_FIG_RESERVED_PEAK,
    GS_FIG_ALLOCATED_PEAK,
    GS_FIG_LOWER_BOUND,
    GS_FIG_OFFLINE,
} gs_result_fig;
int64_t gs_result_per_allocator(const gs_result *r, gs_result_fig fig);
/* Whether r's clients (of its devices, with several) each had an allocator of their own under
 * the capacity: the separate and cooperative arrangements of several clients. */
bool gs_result_capacity_per_client(const gs_result *r);

/* ---- metrics (docs/metrics.md) ---- */
double gs_result_frag_peak(const gs_result *r);
double gs_result_internal_frag(const gs_result *r);
double gs_result_external_frag(const gs_result *r);

G_END_DECLS

#endif
