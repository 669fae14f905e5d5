/* opts.h - what a replay is asked to do (gs_replay_opts: the cap, the device, the clients'
 * arrangement, the observers, several devices' own settings) and its error domain: shared by
 * the engine (replay.c) and the parts it drives (clients.c, devices.c), which need these and
 * not the engine itself, so that no header of sim/ includes one that includes it back.
 */
#ifndef GS_OPTS_H
#define GS_OPTS_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "bound.h"
#include "core.h"
#include "policies.h"
#include "reference.h"
#include "trace.h"

G_BEGIN_DECLS

#define GS_REPLAY_ERROR (gs_replay_error_quark())
GQuark gs_replay_error_quark(void);
typedef enum {
    GS_REPLAY_ERROR_SETUP, /* a replay that cannot start (a policy the device cannot run) */
    GS_REPLAY_ERROR_NOMEM, /* the host memory a trace's tables need cannot be had (replay.c
                            * makes it a result: GS_ERR_NOMEM, outcome "error") */
} gs_replay_error_code;

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
/* For the same export: each device operation that changes a segment's reserved bytes, as it
 * happens inside an event (gs_heap_config.on_reserve: a cudaMalloc'd segment made or freed, a
 * run of pages mapped or unmapped), so that the export has one entry per operation, as
 * PyTorch's trace does, and as many as the statistics count. */
typedef void (*gs_observe_reserve_fn)(const gs_segment *s, uint64_t addr, int64_t bytes, void *ud);
/* Called before every event of a replay with one allocator (index: events replayed before it),
 * with the heap as the events before it left it: whatif's checkpoints (sim/probe.h), which may
 * fork the process there and change the copy's limit. What it returns: */
typedef enum {
    GS_CHECKPOINT_STOP,  /* end the replay here: its result says `index` events, no OOM and no
                          * error (the trunk of the checkpoints, after its last one) */
    GS_CHECKPOINT_GO_ON, /* the event, and a call before the next one */
    GS_CHECKPOINT_DONE,  /* the rest of the replay without the hook (a checkpoint's copy) */
} gs_checkpoint_next;
typedef gs_checkpoint_next (*gs_checkpoint_fn)(gs_heap *h, size_t index, void *ud);

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
    gs_observe_reserve_fn observe_reserve;
    void *export_ud;
    /* Traces with several devices: each device is its own allocator on its own simulated
     * device, with capacity and device_total above unless an entry here names it. A reference
     * (ref) gives each device its own segment addresses. */
    const gs_device_opts *devices;
    size_t n_devices;
    /* Optional: the trace's bound (bound.h), computed once by a caller that replays it many
     * times; NULL: gs_replay_run computes it for this replay. */
    const gs_bound *bound;
    /* optional (see gs_checkpoint_fn); a replay of several clients or devices never calls it */
    gs_checkpoint_fn checkpoint;
    void *checkpoint_ud;
} gs_replay_opts;

G_END_DECLS

#endif
