/* library.h - libgpusim_torch.so's one state, for the library's own files (not exported).
 *
 * The entry points PyTorch and the other libraries call take no context argument, so the state
 * is one object per process (pluggable.c keeps it; gs_lib gives it). pluggable.c holds the
 * requests' entry points and the outputs at exit; entries.c those of the private pools, the
 * MemPools and the statistics, over the helpers declared here. Everything here is called with
 * the state's lock held, but gs_lib_enter, which takes it.
 */
#ifndef GS_TORCH_LIBRARY_H
#define GS_TORCH_LIBRARY_H

#include <pthread.h>
#include <sys/types.h>

#include "memstats.h"
#include "pools.h"
#include "tenants.h"

#define MAX_DEVICES GS_TENANTS_MAX_DEVICES
#define MAX_CLIENTS GS_TENANTS_MAX_CLIENTS

typedef void (*raise_oom_fn)(const char *msg);

typedef struct {
    pthread_mutex_t lock;
    bool ready;
    bool failed;       /* it could not start: the program is exiting */
    gs_policy *policy; /* GPUSIM_POLICY: every client's without one of its own */
    gs_policy *client_policy[MAX_CLIENTS]; /* GPUSIM_POLICY_<NAME>, or NULL */
    gs_clients_mode mode;
    gs_tenants *tenants;
    int torch; /* PyTorch's client number; -1 until its first request */
    uint64_t capacity, sim_total;
    bool on_sim;
    char *stats_path, *trace_path;
    gs_calibration *cal; /* the sim backend's cost model */
    gs_backend *be[MAX_DEVICES];
    GHashTable *live[MAX_CLIENTS][MAX_DEVICES]; /* per client and device: address -> gs_block* */
    GHashTable *slots;      /* device address -> trace slot + 1 (GPUSIM_TRACE) */
    GHashTable *streams;    /* cudaStream_t -> stream index + 1 */
    gs_trace *trace;        /* GPUSIM_TRACE: the requests so far */
    gint64 t0;              /* monotonic clock at the first request, us */
    raise_oom_fn raise_oom; /* libgpusim_torch_oom.so's, or NULL */
    void *torch_lib;        /* libgpusim_torch_oom.so, or NULL: its pool hooks too */
    gs_pools *pools;        /* CUDA graphs' and MemPools' private pools (PyTorch's) */
    gs_memstats *memstats;  /* the program's view of torch.cuda.memory_stats() */
    bool said_null;         /* the one line about an OOM returned as NULL */
    uint64_t requests, frees, unknown_frees, wrong_device_frees, ooms, device_errors;
    /* The last request that failed for lack of memory: its event number (in events, below),
     * size, device and client. The statistics judge it as a replay of the recorded
     * trace does: fatal when the process made no request after it, caught otherwise. */
    uint64_t last_oom_event, last_oom_size;
    /* the events the trace holds (or would): requests served or refused for memory, frees,
     * empty_cache per device, private pool calls; last_oom_event counts in these */
    uint64_t events;
    bool oom_fatal; /* gpusim_oom_fatal: the program ended of its last OOM, uncaught */
    /* GPUSIM_STATS: every used device's statistics as they were at the last OOM (at_oom_dev[i]
     * the device of at_oom[i]), and the request counts then: what is written when the
     * program died of it, its unwinding left out, as the trace is cut there */
    gs_result *at_oom;
    int at_oom_dev[MAX_DEVICES];
    size_t n_at_oom;
    uint64_t oom_requests, oom_frees;
    int last_oom_device, last_oom_client;
    uint64_t dev_ooms[MAX_DEVICES]; /* requests that failed for lack of memory, per device */
    double host_us;                 /* time spent inside gpusim_malloc/gpusim_free */
    int used[MAX_DEVICES];          /* devices that got a request */
    pid_t pid;                      /* the process that set it up: the one that writes */
} gs_pluggable;

/* The one state. */
gs_pluggable *gs_lib(void);
/* The lock taken and the library set up; false (lock released) when it is ending the program. */
bool gs_lib_enter(gs_pluggable *a);
/* Device d ready for requests: its backend and every client's heap, made at its first request.
 * FALSE for a device number out of range. */
bool gs_lib_open_device(gs_pluggable *a, int device);
/* Client name's number, registered at its first use; -1 (and one line) for a bad name. */
int gs_lib_client_of(gs_pluggable *a, const char *name);
/* The private pools' view of the library: PyTorch's heap, the trace. */
gs_pools_site gs_lib_pools_site(gs_pluggable *a);
/* The statistics PyTorch's program sees the figures of, on device d (used): its heap's, under
 * shared pools the one allocator's (a client's part there is not kept for every figure). full:
 * every figure; else the currents, peaks and counters only (gs_heap_stats_now's, cheaper). */
void gs_lib_torch_stats(const gs_pluggable *a, int d, bool full, gs_stats *out);

#endif
