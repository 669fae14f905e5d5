/* pluggable.c - gpusim as a PyTorch pluggable allocator (libgpusim_torch.so): any PyTorch program
 * runs on a gpusim policy, on real memory, with three lines of Python:
 *
 *     import torch
 *     alloc = torch.cuda.memory.CUDAPluggableAllocator("build/libgpusim_torch.so",
 *                                                      "gpusim_malloc", "gpusim_free")
 *     torch.cuda.memory.change_current_allocator(alloc)
 *
 * Configuration, read once at the first request (environment):
 *   GPUSIM_POLICY    the policy in PYTORCH_CUDA_ALLOC_CONF syntax, as `gpusim replay --policy`
 *                    takes it (default: pytorch); a bad one stops the program with a message
 *   GPUSIM_CAPACITY  the allocator's limit (PyTorch's memory fraction times the device), e.g. 20GiB
 *   GPUSIM_STATS     at exit, write the statistics there: the JSON of `gpusim replay --format json`
 *                    (an array of one trace)
 *   GPUSIM_TRACE     record every request in gpusim's trace format (gz if the name ends in .gz),
 *                    written at exit: a trace of any PyTorch program, ready for gpusim replay
 *   GPUSIM_BACKEND   cuda (default), or sim: the simulated device, whose "pointers" are not
 *                    memory (for tests of this library on machines without a GPU)
 *   GPUSIM_TORCH_OOM the library that turns an OOM into torch.OutOfMemoryError (below; default:
 *                    libgpusim_torch_oom.so beside this library, if it is there); none: no such
 *                    library, an OOM returns NULL (for C programs)
 *   GPUSIM_CLIENTS   how the libraries of the process share each device (tenants.h): separate
 *                    (default: each its own heap, as their own pools), shared (one heap for
 *                    all) or cooperative (each its own, and one the device refuses asks the
 *                    others to release their cache first); nothing changes with one library
 *   GPUSIM_POLICY_<NAME>  one client's policy (GPUSIM_POLICY_CUPY=cupy); default GPUSIM_POLICY
 *   GPUSIM_DEVICE_TOTAL   the sim backend's device size (default 80GiB): what the clients of a
 *                    test compete for; the cuda backend's is the GPU's
 *
 * Clients. PyTorch's entry points (gpusim_malloc, gpusim_free, gpusim_empty_cache) are the
 * client "torch". Another library names itself once, gpusim_client("cupy"), and then calls
 * gpusim_client_malloc/free/empty_cache with that number (gpusim run's hook does so for CuPy);
 * those never raise: an OOM returns NULL and the caller raises its own error. The trace
 * (GPUSIM_TRACE) names each request's client, so `gpusim replay --clients MODE` replays the
 * process as it ran, and the statistics (GPUSIM_STATS) carry each client's part.
 * gpusim_reserved(device) is every client's reserved bytes on the device (what
 * torch.cuda.memory_reserved cannot say of a pluggable allocator).
 *
 * Failures. A setting or a device that cannot start stops the program with one line on stderr
 * and exit status 2, the lock released first (the exit handler that writes GPUSIM_STATS takes
 * it, and writes nothing for a library that never started). A free naming another device than
 * the block's is refused with one line; a pointer that is not ours is ignored.
 *
 * Out of memory. PyTorch's CUDAPluggableAllocator (2.11) keeps whatever the malloc function
 * returns and never checks it: a NULL becomes a tensor at address 0 and the program dies later
 * of an illegal memory access. What makes PyTorch raise torch.OutOfMemoryError, as its own
 * allocator does, is the C++ exception its own allocator throws, c10::OutOfMemoryError: the
 * pluggable allocator lets it through and PyTorch's Python bindings turn it into the Python
 * exception. C cannot throw, and this library does not link PyTorch (it loads, and its tests
 * run, without it), so the throw is one C++ function in a library of its own, built against the
 * installed PyTorch's headers (torch/oom.cpp, libgpusim_torch_oom.so). At an OOM, gpusim_malloc
 * releases its lock and calls it; the exception unwinds through gpusim_malloc (built with
 * -fexceptions) into PyTorch. Without that library an OOM returns NULL, as before, and says so
 * once on stderr. gpusim_oom_fatal() says the program is ending of its last OOM (gpusim run's
 * sys.excepthook): the statistics' outcome is then that OOM, and the trace ends there.
 *
 * torch.cuda.empty_cache(): PyTorch calls the pluggable allocator's reset function, which
 * Python sets: alloc.allocator().set_reset_fn(address of gpusim_empty_cache). It releases every
 * cached segment of every device (docs/real-gpu.md, "Any PyTorch program on a gpusim
 * policy").
 *
 * CUDA graphs and MemPools: PyTorch's pool hooks take C++ arguments, so the C++ shim holds
 * them (gpusim_pool_hook gives their addresses to Python) and calls gpusim_pool_begin, _end and
 * _release (entries.c, with the MemPool stand-in's and torch.cuda.memory_stats()'s entry
 * points); each request of PyTorch's first asks the open pools' filters (pools.h).
 *
 * PyTorch calls the allocator from several threads (autograd runs the backward pass on its own),
 * so one mutex guards everything. The entry points have no context argument, so the state is
 * necessarily one object per process: it is kept in the single struct of library.h, defined
 * below, and nowhere else.
 * Only the gpusim_* symbols are exported (torch/pluggable.map): the core, GLib's users and the
 * CUDA runtime linked in stay private to the library, whatever the host process has loaded.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "gpusim_torch.h"
#include "library.h"
#include "report.h"

static gs_pluggable the_allocator = {.lock = PTHREAD_MUTEX_INITIALIZER, .torch = -1};

gs_pluggable *gs_lib(void)
{
    return &the_allocator;
}

/* The library cannot start (a bad setting, no device): one line, exit status 2. Called with the
 * lock held; releases it first, so that the exit handler (write_outputs) and any other thread
 * take it, see a->failed and do nothing: exiting inside the lock hung the program at its exit
 * handler. */
G_GNUC_NORETURN static void start_failed(gs_pluggable *a, const char *var, const char *msg)
{
    a->failed = true;
    pthread_mutex_unlock(&a->lock);
    fprintf(stderr, "gpusim: %s: %s\n", var, msg);
    exit(2);
}

static void write_outputs(void);

/* Device d's OOMs in r as `gpusim replay` of the recorded trace gives them (sim/replay.c): a
 * request that failed with more requests or frees after it was caught (the program went on); one
 * that was the process's last event is the fatal OOM, the run's outcome, and so is the last one
 * when the program said it died of it (gpusim_oom_fatal: the frees of its unwinding come after
 * it, and the trace is cut there, as the converter cuts a snapshot's). (The result said "oom"
 * with event 0 and size 0 for any OOM, one the program caught included.) */
static void judge_ooms(const gs_pluggable *a, int d, gs_result *r)
{
    bool fatal = a->ooms && a->last_oom_device == d &&
                 (a->oom_fatal || a->last_oom_event + 1 == a->events);
    r->caught_ooms = a->dev_ooms[d] - (fatal ? 1 : 0);
    r->oom = fatal;
    r->first_oom_event = fatal ? a->last_oom_event : 0;
    r->first_oom_size = fatal ? a->last_oom_size : 0;
    if (fatal && r->n_clients) r->first_oom_client = (size_t)a->last_oom_client;
    /* each client's too: the one that died of the fatal OOM, no other (a client's OOMs the
     * program caught made its outcome "oom" where the replay says ok) */
    for (size_t k = 0; k < r->n_clients; k++) {
        gs_client_result *c = &r->clients[k];
        c->oom = fatal && k == r->first_oom_client;
        c->first_oom_event = c->oom ? r->first_oom_event : 0;
        c->first_oom_size = c->oom ? r->first_oom_size : 0;
    }
}

/* Every used device's statistics now into rs (their devices into dev); how many. Lock held. */
static size_t take_results(gs_pluggable *a, gs_result *rs, int *dev)
{
    size_t n = 0;
    for (int d = 0; d < MAX_DEVICES; d++) {
        if (!a->used[d]) continue;
        gs_result *r = &rs[n];
        dev[n++] = d;
        memset(r, 0, sizeof *r);
        gs_tenants_result(a->tenants, d, r);
        r->backend = a->be[d]->ops->name;
        r->events = a->events; /* (what the trace holds: the replay's count) */
        r->host_seconds = a->host_us / 1e6;
    }
    return n;
}

/* An OOM: the statistics as they are, in case the program dies of it. Lock held. */
static void note_oom_state(gs_pluggable *a)
{
    if (!a->stats_path || !*a->stats_path) return;
    if (!a->at_oom) a->at_oom = g_new0(gs_result, MAX_DEVICES);
    for (size_t i = 0; i < a->n_at_oom; i++) gs_result_clear(&a->at_oom[i]);
    a->n_at_oom = take_results(a, a->at_oom, a->at_oom_dev);
    a->oom_requests = a->requests;
    a->oom_frees = a->frees;
}

static void fork_prepare(void) { pthread_mutex_lock(&the_allocator.lock); }
static void fork_parent(void) { pthread_mutex_unlock(&the_allocator.lock); }
static void fork_child(void) { pthread_mutex_unlock(&the_allocator.lock); }

/* The OOM-raising function: GPUSIM_TORCH_OOM's library, else libgpusim_torch_oom.so beside
 * this one if it is there (NULL: OOMs return NULL). One that is named and cannot be loaded
 * stops the program. */
static void find_raise_oom(gs_pluggable *a)
{
    const char *want = g_getenv("GPUSIM_TORCH_OOM");
    char *path = NULL;
    if (want && strcmp(want, "none") == 0) return;
    if (want && *want) {
        path = g_strdup(want);
    } else {
        Dl_info self;
        if (!dladdr((void *)(uintptr_t)gpusim_malloc, &self) || !self.dli_fname) return;
        char *dir = g_path_get_dirname(self.dli_fname);
        path = g_build_filename(dir, "libgpusim_torch_oom.so", NULL);
        g_free(dir);
        if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
            g_free(path);
            return;
        }
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    void *f = h ? dlsym(h, "gpusim_torch_raise_oom") : NULL;
    if (!f) {
        char *msg = g_strdup_printf("%s: %s", path, h ? "no gpusim_torch_raise_oom in it" : dlerror());
        g_free(path);
        start_failed(a, "GPUSIM_TORCH_OOM", msg);
    }
    a->raise_oom = (raise_oom_fn)(uintptr_t)f;
    a->torch_lib = h;
    /* its pool hooks (PyTorch's C++ signatures) call these back; an older build has none */
    typedef void (*connect_fn)(void *, void *, void *);
    connect_fn connect = (connect_fn)(uintptr_t)dlsym(h, "gpusim_torch_pool_connect");
    if (connect)
        connect((void *)(uintptr_t)gpusim_pool_begin, (void *)(uintptr_t)gpusim_pool_end,
                (void *)(uintptr_t)gpusim_pool_release);
    g_free(path);
}

/* Read the environment; called with the lock held, once. */
static void setup(gs_pluggable *a)
{
    GError *err = NULL;
    const char *spec = g_getenv("GPUSIM_POLICY");
    a->policy = gs_policy_new(spec && *spec ? spec : "pytorch", &err);
    if (!a->policy) start_failed(a, "GPUSIM_POLICY", err->message);
    /* no trace says the release here: plain pytorch is 2.11, and a newer key needs @RELEASE */
    gs_policy *rel = gs_policy_at_release(a->policy, NULL, &err);
    if (err) start_failed(a, "GPUSIM_POLICY", err->message);
    gs_policy_free(rel);
    const char *cap = g_getenv("GPUSIM_CAPACITY");
    if (cap && *cap && !gs_parse_size(cap, &a->capacity, &err))
        start_failed(a, "GPUSIM_CAPACITY", err->message);
    const char *mode = g_getenv("GPUSIM_CLIENTS");
    if (mode && *mode && !gs_clients_mode_parse(mode, &a->mode))
        start_failed(a, "GPUSIM_CLIENTS", "expected separate, shared or cooperative");
    const char *tot = g_getenv("GPUSIM_DEVICE_TOTAL");
    if (tot && *tot && (!gs_parse_size(tot, &a->sim_total, &err) || !a->sim_total))
        start_failed(a, "GPUSIM_DEVICE_TOTAL", err ? err->message : "must not be 0");
    a->tenants = gs_tenants_new(a->mode, a->capacity, a->policy);
    const char *be = g_getenv("GPUSIM_BACKEND");
    if (be && *be && strcmp(be, "sim") != 0 && strcmp(be, "cuda") != 0)
        start_failed(a, "GPUSIM_BACKEND", "expected cuda or sim");
    a->on_sim = be && strcmp(be, "sim") == 0;
    find_raise_oom(a);
    a->stats_path = g_strdup(g_getenv("GPUSIM_STATS"));
    a->trace_path = g_strdup(g_getenv("GPUSIM_TRACE"));
    a->streams = g_hash_table_new(g_direct_hash, g_direct_equal);
    a->pools = gs_pools_new();
    a->memstats = gs_memstats_new();
    if (a->trace_path && *a->trace_path) {
        a->trace = gs_trace_new();
        a->slots = g_hash_table_new(g_direct_hash, g_direct_equal);
        char *src = g_strdup_printf("gpusim pluggable allocator, pid %d, policy %s", (int)getpid(),
                                    a->policy->spec);
        gs_trace_set_meta(a->trace, "source", src);
        g_free(src);
    }
    a->t0 = g_get_monotonic_time();
    a->pid = getpid();
    if (a->stats_path || a->trace) atexit(write_outputs);
    /* A fork while another thread holds the lock would leave the child's copy locked forever:
     * the lock is taken across the fork and let go on both sides. */
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    a->ready = true;
}

/* Device d ready for requests: its backend and every client's heap, made at its first request.
 * FALSE for a device number out of range. */
bool gs_lib_open_device(gs_pluggable *a, int device)
{
    if (device < 0 || device >= MAX_DEVICES) return false;
    if (gs_tenants_has(a->tenants, device)) return true;
    char *msg = NULL;
    uint64_t total = a->sim_total ? a->sim_total : GS_DEFAULT_DEVICE_TOTAL;
    if (a->on_sim) a->cal = a->cal ? a->cal : gs_calibration_builtin();
    gs_backend_config bc = {.device = device, .sim = {.total_bytes = total, .cal = a->cal}};
    if (gs_backend_open(a->on_sim ? "sim" : "cuda", &bc, &a->be[device], &msg) != GS_OK)
        start_failed(a, "GPUSIM_BACKEND", msg);
    if (!a->on_sim) {
        uint64_t fr = 0;
        (void)gs_dev_mem_info(a->be[device], NULL, &fr, &total);
    }
    GError *err = NULL;
    if (!gs_tenants_open(a->tenants, device, a->be[device], total, &err))
        start_failed(a, "GPUSIM_POLICY", err->message);
    for (size_t k = 0; k < gs_tenants_count(a->tenants); k++)
        a->live[k][device] = g_hash_table_new(g_direct_hash, g_direct_equal);
    if (a->trace && device == 0) {
        char *tot = g_strdup_printf("%" G_GUINT64_FORMAT, total);
        gs_trace_set_meta(a->trace, "device_total_bytes", tot);
        a->trace->device_total = total;
        g_free(tot);
    }
    a->used[device] = 1;
    return true;
}

/* Client name's number, registered at its first use under GPUSIM_POLICY_<NAME> or
 * GPUSIM_POLICY; called with the lock held, after setup. -1 (and one line) for a bad name. */
int gs_lib_client_of(gs_pluggable *a, const char *name)
{
    size_t n = gs_tenants_count(a->tenants);
    for (size_t k = 0; k < n; k++)
        if (strcmp(gs_tenants_name(a->tenants, (int)k), name) == 0) return (int)k;
    GError *err = NULL;
    const gs_policy *p = a->policy;
    gs_policy *own = NULL;
    if (n < MAX_CLIENTS && strlen(name) <= GS_TENANTS_NAME_MAX) {
        char *up = g_ascii_strup(name, -1);
        char *var = g_strconcat("GPUSIM_POLICY_", up, NULL);
        const char *spec = g_getenv(var);
        if (spec && *spec) {
            own = gs_policy_new(spec, &err);
            gs_policy *rel = own ? gs_policy_at_release(own, NULL, &err) : NULL;
            gs_policy_free(rel);
            if (err) start_failed(a, var, err->message);
            p = own;
        }
        g_free(var);
        g_free(up);
    }
    int k = gs_tenants_client(a->tenants, name, p, &err);
    if (k < 0) {
        fprintf(stderr, "gpusim: gpusim_client: %s\n", err->message);
        g_error_free(err);
        gs_policy_free(own);
        return -1;
    }
    a->client_policy[k] = own;
    for (int d = 0; d < MAX_DEVICES; d++)
        if (a->used[d]) a->live[k][d] = g_hash_table_new(g_direct_hash, g_direct_equal);
    return k;
}

static uint32_t stream_index(gs_pluggable *a, void *stream)
{
    gpointer v = g_hash_table_lookup(a->streams, stream);
    if (v) return (uint32_t)GPOINTER_TO_UINT(v) - 1;
    uint32_t i = g_hash_table_size(a->streams);
    g_hash_table_insert(a->streams, stream, GUINT_TO_POINTER(i + 1));
    return i;
}

/* PyTorch's own words for an OOM first ("CUDA out of memory. Tried to allocate 20.00 MiB"),
 * then what gpusim held. */
static void oom_message(char *buf, size_t n, gs_pluggable *a, const gs_heap *h, ssize_t size,
                        int device)
{
    char *want = gs_format_size((uint64_t)size), *res = gs_format_size(gs_heap_reserved(h));
    char *al = gs_format_size((uint64_t)gs_heap_stats(h)->allocated_bytes[GS_STAT_ALL].current);
    /* the heap's own limit: the cap given, else its setting's (per_process_memory_fraction) */
    uint64_t limit = gs_heap_limit(h);
    char *cap = limit ? gs_format_capacity(limit, " ") : g_strdup("no limit");
    g_snprintf(buf, n,
               "CUDA out of memory. Tried to allocate %s on device %d (gpusim, policy %s, "
               "capacity %s): %s reserved, %s of it allocated.",
               want, device, gs_heap_policy(h)->spec, cap, res, al);
    g_free(want);
    g_free(res);
    g_free(al);
    g_free(cap);
}

/* The lock taken and the library set up; false (lock released) when it is ending the program. */
bool gs_lib_enter(gs_pluggable *a)
{
    pthread_mutex_lock(&a->lock);
    if (a->failed) { /* another thread is ending the program */
        pthread_mutex_unlock(&a->lock);
        return false;
    }
    if (!a->ready) setup(a);
    return true;
}

/* The trace's number for client k's name, added if no event named it yet. */
static uint16_t trace_client(gs_trace *t, const char *name)
{
    for (guint i = 0; i < t->clients->len; i++)
        if (strcmp(t->clients->pdata[i], name) == 0) return (uint16_t)i;
    g_ptr_array_add(t->clients, g_strdup(name));
    return (uint16_t)(t->clients->len - 1);
}

/* The trace's last event: its time (when, the monotonic clock; never before the event ahead
 * of it: a request's pool calls are recorded before it, after its clock was read) and device. */
static gs_event *stamp_last(gs_pluggable *a, gint64 when, int device)
{
    gs_event *e = &a->trace->ev[a->trace->n - 1];
    uint64_t t = (uint64_t)(when - a->t0);
    e->time_us = a->trace->n > 1 && e[-1].time_us > t ? e[-1].time_us : t;
    e->device = (uint32_t)device;
    return e;
}

/* A private pool call made to PyTorch's heap, into the trace. */
static void record_pool(void *ud, int device, gs_op op, void *stream, uint32_t id, bool flag)
{
    gs_pluggable *a = ud;
    a->events++;
    if (!a->trace) return;
    gs_trace_add_pool(a->trace, op, (uint64_t)(uintptr_t)stream, id, flag);
    gs_event *e = stamp_last(a, g_get_monotonic_time(), device);
    e->client = trace_client(a->trace, gs_tenants_name(a->tenants, a->torch));
}

static uint32_t site_stream_index(void *ud, void *stream)
{
    return stream_index(ud, stream);
}

gs_pools_site gs_lib_pools_site(gs_pluggable *a)
{
    return (gs_pools_site){.tenants = a->tenants,
                           .client = a->torch,
                           .record = record_pool,
                           .ud = a,
                           .stream_index = site_stream_index};
}

/* A malloc of client k, lock held; *oom (of n bytes) is set when the request failed for lack of
 * memory. */
/* After a request of client k on device d (opened): the peaks PyTorch's program sees since it
 * reset them follow (memstats.h). Nothing until it reset them. */
static void follow_peaks(gs_pluggable *a, int k, int d)
{
    /* (shared: the one allocator's figures, which every client's request moves) */
    if ((k != a->torch && a->mode != GS_CLIENTS_SHARED) || !gs_memstats_following(a->memstats, d))
        return;
    gs_stats now;
    gs_lib_torch_stats(a, d, false, &now);
    gs_memstats_after(a->memstats, d, &now);
}

static void *client_malloc(gs_pluggable *a, int k, ssize_t size, int device, void *stream,
                           char *oom, size_t n)
{
    /* (after setup: its clock starts the trace's time at 0) */
    gint64 t0 = g_get_monotonic_time();
    bool ok = k >= 0 && gs_lib_open_device(a, device);
    if (ok && k == a->torch) {
        gs_pools_site site = gs_lib_pools_site(a);
        gs_pools_route(a->pools, &site, device, stream);
    }
    gs_block *b = NULL;
    gs_status st =
        ok ? gs_tenants_malloc(a->tenants, device, k, (uint64_t)size, stream_index(a, stream), &b)
           : GS_ERR_INVALID;
    a->requests++;
    if (st == GS_OK || st == GS_ERR_OOM) a->events++; /* (what the trace records) */
    if (ok) follow_peaks(a, k, device); /* (a driver error may have mapped some pages) */
    void *p = NULL;
    if (st == GS_OK) {
        p = (void *)(uintptr_t)b->addr;
        g_hash_table_insert(a->live[k][device], p, b);
    } else if (st == GS_ERR_OOM) {
        a->ooms++;
        a->dev_ooms[device]++;
        a->last_oom_event = a->events - 1;
        a->last_oom_size = (uint64_t)size;
        a->last_oom_device = device;
        a->last_oom_client = k;
        note_oom_state(a);
        oom_message(oom, n, a, gs_tenants_heap(a->tenants, device, k), size, device);
    } else {
        a->device_errors++;
        const char *why = ok ? gs_dev_last_error(a->be[device]) : NULL;
        fprintf(stderr, "gpusim: gpusim_malloc(%zd) on device %d: %s\n", size, device,
                why ? why : gs_strerror(st));
    }
    if (a->trace && (st == GS_OK || st == GS_ERR_OOM)) {
        /* a request that failed is an oom event: replays meet it where the program did. One
         * that failed otherwise (a device that is not there, a driver error) is not recorded: a
         * replay cannot meet it, and its device number may be no device at all. */
        const char *name = gs_tenants_name(a->tenants, k);
        uint32_t slot = UINT32_MAX;
        if (st == GS_ERR_OOM)
            gs_trace_add_oom(a->trace, name, (uint64_t)(uintptr_t)stream, (uint64_t)size);
        else slot = gs_trace_add_alloc(a->trace, name, (uint64_t)(uintptr_t)stream, (uint64_t)size);
        (void)stamp_last(a, t0, device);
        if (p) g_hash_table_insert(a->slots, p, GUINT_TO_POINTER(slot + 1));
    }
    a->host_us += (double)(g_get_monotonic_time() - t0);
    return p;
}

void *gpusim_malloc(ssize_t size, int device, void *stream)
{
    gs_pluggable *a = &the_allocator;
    if (size <= 0) return NULL; /* as PyTorch's own allocator: no memory for an empty tensor */
    if (!gs_lib_enter(a)) return NULL;
    if (a->torch < 0) a->torch = gs_lib_client_of(a, "torch");
    char oom[512] = ""; /* on the stack: the exception raised with it skips this frame's frees */
    void *p = client_malloc(a, a->torch, size, device, stream, oom, sizeof oom);
    raise_oom_fn raise_oom = a->raise_oom;
    bool say_null = *oom && !raise_oom && !a->said_null;
    if (say_null) a->said_null = true;
    pthread_mutex_unlock(&a->lock);
    if (*oom && raise_oom) raise_oom(oom); /* throws torch.OutOfMemoryError: does not return */
    if (say_null)
        fprintf(stderr, "gpusim: %s Returning NULL, which PyTorch does not check: build "
                        "libgpusim_torch_oom.so (torch/oom.cpp) beside this library to get "
                        "torch.OutOfMemoryError instead.\n", oom);
    return p;
}

int gpusim_client(const char *name)
{
    gs_pluggable *a = &the_allocator;
    if (!name || !gs_lib_enter(a)) return -1;
    int k = gs_lib_client_of(a, name);
    pthread_mutex_unlock(&a->lock);
    return k;
}

/* Is k a client number gpusim_client gave? (lock held) */
static bool known_client(gs_pluggable *a, int k)
{
    return k >= 0 && (size_t)k < gs_tenants_count(a->tenants);
}

void *gpusim_client_malloc(int client, ssize_t size, int device, void *stream)
{
    gs_pluggable *a = &the_allocator;
    if (size <= 0 || !gs_lib_enter(a)) return NULL;
    char oom[512] = "";
    void *p = known_client(a, client)
                  ? client_malloc(a, client, size, device, stream, oom, sizeof oom)
                  : NULL;
    pthread_mutex_unlock(&a->lock);
    return p; /* an OOM: NULL, and the caller raises its own library's error */
}

/* The client and device whose live block ptr is, or false. */
static bool owner_of(gs_pluggable *a, void *ptr, int *client, int *device)
{
    size_t n = a->tenants ? gs_tenants_count(a->tenants) : 0;
    for (size_t k = 0; k < n; k++)
        for (int d = 0; d < MAX_DEVICES; d++)
            if (a->live[k][d] && g_hash_table_lookup(a->live[k][d], ptr)) {
                *client = (int)k;
                *device = d;
                return true;
            }
    return false;
}

static void client_free(gs_pluggable *a, int k, void *ptr, int device)
{
    gint64 t0 = g_get_monotonic_time();
    bool ours = a->ready && !a->failed && known_client(a, k) && device >= 0 &&
                device < MAX_DEVICES && a->live[k][device];
    gs_block *b = ours ? g_hash_table_lookup(a->live[k][device], ptr) : NULL;
    int oc = -1, od = -1;
    if (!b && a->ready && !a->failed && owner_of(a, ptr, &oc, &od)) {
        /* Another device's or client's block? Freeing it into this heap would corrupt both. */
        a->wrong_device_frees++;
        if (oc == k)
            fprintf(stderr,
                    "gpusim: gpusim_free(%p) on device %d: the block is device %d's; "
                    "not freed\n",
                    ptr, device, od);
        else
            fprintf(stderr,
                    "gpusim: gpusim_free(%p) on device %d: the block is client %s's "
                    "(device %d); not freed\n",
                    ptr, device, gs_tenants_name(a->tenants, oc), od);
    } else if (!b) {
        a->unknown_frees++; /* not ours: nothing to do, and nothing to break */
    } else {
        g_hash_table_remove(a->live[k][device], ptr);
        gs_tenants_free(a->tenants, device, k, b);
        follow_peaks(a, k, device);
        a->frees++;
        a->events++;
        if (a->trace) {
            guint slot = GPOINTER_TO_UINT(g_hash_table_lookup(a->slots, ptr));
            g_hash_table_remove(a->slots, ptr);
            gs_trace_add_free(a->trace, slot - 1);
            (void)stamp_last(a, t0, device);
        }
    }
    a->host_us += (double)(g_get_monotonic_time() - t0);
}

void gpusim_free(void *ptr, ssize_t size, int device, void *stream)
{
    gs_pluggable *a = &the_allocator;
    if (!ptr) return;
    pthread_mutex_lock(&a->lock);
    client_free(a, a->torch, ptr, device);
    pthread_mutex_unlock(&a->lock);
    (void)size;
    (void)stream;
}

void gpusim_client_free(int client, void *ptr, ssize_t size, int device, void *stream)
{
    gs_pluggable *a = &the_allocator;
    if (!ptr) return;
    pthread_mutex_lock(&a->lock);
    client_free(a, client, ptr, device);
    pthread_mutex_unlock(&a->lock);
    (void)size;
    (void)stream;
}

/* Client k's cached segments on every device go back to the driver (shared: the one heap's),
 * as PyTorch's own empty_cache does for PyTorch's. Lock held. */
static void client_empty_cache(gs_pluggable *a, int k)
{
    if (!a->ready || a->failed || !known_client(a, k)) return;
    gint64 t0 = g_get_monotonic_time();
    for (int d = 0; d < MAX_DEVICES; d++) {
        if (!a->used[d]) continue;
        gs_status st = gs_tenants_empty_cache(a->tenants, d, k);
        if (st != GS_OK) {
            a->device_errors++;
            const char *why = gs_dev_last_error(a->be[d]);
            fprintf(stderr, "gpusim: empty_cache on device %d: %s\n", d, why ? why : gs_strerror(st));
        }
        /* one empty_cache event per device in use: each empties its own device's cache, as
         * this call emptied every device's */
        a->events++;
        if (!a->trace) continue;
        gs_trace_add_op(a->trace, GS_OP_EMPTY_CACHE, 0);
        gs_event *e = stamp_last(a, t0, d);
        e->client = trace_client(a->trace, gs_tenants_name(a->tenants, k));
    }
    a->host_us += (double)(g_get_monotonic_time() - t0);
}

/* torch.cuda.empty_cache(), through CUDAPluggableAllocator's reset function. */
void gpusim_empty_cache(void)
{
    gs_pluggable *a = &the_allocator;
    pthread_mutex_lock(&a->lock);
    client_empty_cache(a, a->torch);
    pthread_mutex_unlock(&a->lock);
}

void gpusim_client_empty_cache(int client)
{
    gs_pluggable *a = &the_allocator;
    pthread_mutex_lock(&a->lock);
    client_empty_cache(a, client);
    pthread_mutex_unlock(&a->lock);
}

/* The program is ending of its last OOM, not caught (gpusim run's hook calls this from
 * sys.excepthook for an OutOfMemoryError): the statistics' outcome is that OOM, and the trace
 * ends there. No OOM so far: nothing. */
void gpusim_oom_fatal(void)
{
    gs_pluggable *a = &the_allocator;
    pthread_mutex_lock(&a->lock);
    a->oom_fatal = a->ooms > 0;
    pthread_mutex_unlock(&a->lock);
}

size_t gpusim_reserved(int device)
{
    gs_pluggable *a = &the_allocator;
    pthread_mutex_lock(&a->lock);
    size_t r = a->ready && !a->failed && device >= 0 && device < MAX_DEVICES
                   ? (size_t)gs_tenants_reserved(a->tenants, device)
                   : 0;
    pthread_mutex_unlock(&a->lock);
    return r;
}

/* Client's allocator on device: what it holds (which = 0) or may hold (1: its limit, 0 for
 * none); 0 for a client or device it has not used. What CuPy's OutOfMemoryError says: the
 * bytes "allocated so far" and the limit. */
static size_t client_figure(int client, int device, int which)
{
    gs_pluggable *a = &the_allocator;
    pthread_mutex_lock(&a->lock);
    size_t r = 0;
    if (a->ready && !a->failed && device >= 0 && device < MAX_DEVICES && a->used[device] &&
        known_client(a, client)) {
        const gs_heap *h = gs_tenants_heap(a->tenants, device, client);
        if (h) r = which ? (size_t)gs_heap_limit(h) : (size_t)gs_heap_reserved(h);
    }
    pthread_mutex_unlock(&a->lock);
    return r;
}

size_t gpusim_client_reserved(int client, int device)
{
    return client_figure(client, device, 0);
}
size_t gpusim_client_limit(int client, int device)
{
    return client_figure(client, device, 1);
}

/* At exit: the statistics (one result per device used) and the trace, each written whole. The
 * memory stays where it is: the process is ending and the driver takes it back; calling into
 * CUDA from an exit handler, after PyTorch's own teardown, is not safe. */
static void write_outputs(void)
{
    gs_pluggable *a = &the_allocator;
    /* a forked child's exit writes nothing: the files are the parent's run, which goes on */
    if (a->pid != getpid()) return;
    pthread_mutex_lock(&a->lock);
    if (a->failed) { /* it never started: nothing to write */
        pthread_mutex_unlock(&a->lock);
        return;
    }
    GError *err = NULL;
    if (a->trace && a->oom_fatal && a->last_oom_event < a->trace->n &&
        a->trace->ev[a->last_oom_event].op == GS_OP_OOM) {
        /* the run died of this OOM: what came after is its unwinding */
        gs_trace_truncate(a->trace, a->last_oom_event + 1);
        char *ev = g_strdup_printf("%" G_GUINT64_FORMAT, a->last_oom_event);
        gs_trace_set_meta(a->trace, "fatal_oom_event", ev);
        g_free(ev);
    }
    if (a->trace && !gs_trace_save(a->trace, a->trace_path, &err)) {
        fprintf(stderr, "gpusim: the trace (GPUSIM_TRACE, gpusim run --trace): %s\n", err->message);
        g_clear_error(&err);
    }
    if (a->stats_path && *a->stats_path) {
        /* the program died of its last OOM: the statistics then, as the trace is cut there */
        bool died = a->oom_fatal && a->n_at_oom;
        gs_result own[MAX_DEVICES];
        int own_dev[MAX_DEVICES];
        gs_result *rs = died ? a->at_oom : own;
        int *dev = died ? a->at_oom_dev : own_dev;
        size_t n = died ? a->n_at_oom : take_results(a, own, own_dev);
        for (size_t i = 0; i < n; i++) judge_ooms(a, dev[i], &rs[i]);
        uint64_t requests = died ? a->oom_requests : a->requests;
        uint64_t frees = died ? a->oom_frees : a->frees;
        /* gs_report takes the request counts from a trace: the recorded one holds exactly the
         * requests served (every malloc, every free of ours); without one, a stand-in. */
        gs_trace *t = a->trace;
        if (!t) {
            t = gs_trace_new();
            t->n = requests + frees;
            t->n_slots = requests;
        }
        char *buf = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&buf, &len);
        char *name = g_strdup_printf("gpusim pluggable allocator (pid %d)", (int)getpid());
        /* An array of one trace, as gpusim replay --format json writes for one trace. */
        fputs("[\n", m);
        gs_report(m, GS_FMT_JSON, name, t, rs, n, NULL, true);
        fputs("]\n", m);
        fclose(m);
        for (size_t i = 0; i < n; i++) gs_result_clear(&rs[i]);
        a->n_at_oom = died ? 0 : a->n_at_oom;
        if (t != a->trace) gs_trace_free(t); /* ev is NULL: nothing to walk */
        if (!gs_write_whole(a->stats_path, buf, len, &err)) { /* (a link stays a link) */
            fprintf(stderr, "gpusim: the statistics (GPUSIM_STATS, gpusim run --stats): %s\n",
                    err->message);
            g_clear_error(&err);
        }
        free(buf);
        g_free(name);
    }
    pthread_mutex_unlock(&a->lock);
}
