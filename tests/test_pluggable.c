/* test_pluggable.c - the PyTorch pluggable allocator library (torch/pluggable.c), loaded with dlopen
 * as PyTorch's CUDAPluggableAllocator loads it, on the simulated device (GPUSIM_BACKEND=sim) so
 * it runs without a GPU.
 *
 * Each test runs the library in a child process (its configuration is read once per process and
 * its outputs are written at exit) and checks from the parent what the child left behind: the
 * statistics file, the recorded trace, the exit status and message.
 */
#include <dlfcn.h>
#include <glib/gstdio.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "report.h"
#include "testutil.h"

typedef void *(*malloc_fn)(ssize_t, int, void *);
typedef void (*free_fn)(void *, ssize_t, int, void *);
typedef void (*empty_fn)(void);

static const char *lib_path;
static const char *hook_path; /* tests/oom_hook.c's library */
static char *dir;

typedef struct {
    malloc_fn m;
    free_fn f;
    empty_fn empty_cache;
} entry_points;

static entry_points load(void)
{
    void *h = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen %s: %s\n", lib_path, dlerror());
        _exit(90);
    }
    entry_points e = {(malloc_fn)(uintptr_t)dlsym(h, "gpusim_malloc"),
                      (free_fn)(uintptr_t)dlsym(h, "gpusim_free"),
                      (empty_fn)(uintptr_t)dlsym(h, "gpusim_empty_cache")};
    /* nothing but the entry points is exported */
    if (!e.m || !e.f || !e.empty_cache || dlsym(h, "gs_heap_malloc") || dlsym(h, "gs_policy_new"))
        _exit(91);
    return e;
}

static char *path_in(const char *name) { return g_build_filename(dir, name, NULL); }

/* Another entry point of the library (loaded already: the same handle), or NULL. */
static void *entry(const char *name)
{
    return dlsym(dlopen(lib_path, RTLD_NOW | RTLD_LOCAL), name);
}

/* What the last child wrote on stderr. */
static char *child_stderr(void)
{
    char *path = path_in("stderr"), *text = NULL;
    ck_assert(g_file_get_contents(path, &text, NULL, NULL));
    g_free(path);
    return text;
}

/* Run body in a child with the environment given (NAME=VALUE strings, NULL-terminated) and
 * stderr to dir/stderr; return its exit status. A child still running after limit seconds is
 * killed and the test fails: the library must never hang a program. */
static int in_child_within(void (*body)(void), const char *const *env, int limit)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        for (const char *const *e = env; *e; e++) putenv(g_strdup(*e));
        char *err = path_in("stderr");
        if (!freopen(err, "w", stderr)) _exit(92);
        g_free(err); /* the child exits through exit(), with the leak checker watching */
        body();
        exit(0); /* exit, not _exit: the library writes its outputs from an atexit handler */
    }
    int status = 0;
    for (int waited_ms = 0;; waited_ms += 20) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        ck_assert_int_ge(w, 0);
        if (w == pid) break;
        if (waited_ms >= limit * 1000) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            ck_abort_msg("the child hung (killed after %d s); its stderr:\n%s", limit, child_stderr());
        }
        g_usleep(20000);
    }
    if (!WIFEXITED(status))
        ck_abort_msg("the child died of signal %d; its stderr:\n%s", WTERMSIG(status), child_stderr());
    return WEXITSTATUS(status);
}

static int in_child(void (*body)(void), const char *const *env) { return in_child_within(body, env, 100); }

/* ---- many threads, then the statistics and the trace ---- */

#define THREADS 8
#define ROUNDS 4000
#define KEEP 16
#define SERIAL 200

static entry_points ep;

static void *worker(void *arg)
{
    GRand *r = g_rand_new_with_seed((guint32)(uintptr_t)arg);
    void *ptr[KEEP] = {0};
    ssize_t len[KEEP] = {0};
    void *stream = (uintptr_t)arg % 2 ? (void *)(uintptr_t)0x5000 : NULL; /* two streams */
    for (int i = 0; i < ROUNDS; i++) {
        int k = g_rand_int_range(r, 0, KEEP);
        if (ptr[k]) ep.f(ptr[k], len[k], 0, stream);
        /* small-pool, 1-10 MiB and large requests, as a training step makes */
        int kind = g_rand_int_range(r, 0, 10);
        len[k] = kind < 6 ? g_rand_int_range(r, 1, 1 << 20)
                 : kind < 9 ? g_rand_int_range(r, 1 << 20, 10 << 20)
                            : g_rand_int_range(r, 10 << 20, 64 << 20);
        ptr[k] = ep.m(len[k], 0, stream);
        if (!ptr[k]) _exit(93);
    }
    for (int k = 0; k < KEEP; k++) ep.f(ptr[k], len[k], 0, stream);
    g_rand_free(r);
    return NULL;
}

static int addr_cmp(const void *a, const void *b)
{
    const uintptr_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

static void threads_body(void)
{
    ep = load();
    /* one thread first: what it gets back never overlaps */
    uintptr_t blocks[SERIAL][2];
    for (int i = 0; i < SERIAL; i++) {
        ssize_t n = 512 * (1 + i % 7) + (i % 3) * (3 << 20);
        void *p = ep.m(n, 0, NULL);
        if (!p) _exit(94);
        blocks[i][0] = (uintptr_t)p;
        blocks[i][1] = (uintptr_t)n;
    }
    qsort(blocks, SERIAL, sizeof blocks[0], addr_cmp);
    for (int i = 1; i < SERIAL; i++)
        if (blocks[i - 1][0] + blocks[i - 1][1] > blocks[i][0]) _exit(95);
    for (int i = 0; i < SERIAL; i++) ep.f((void *)blocks[i][0], (ssize_t)blocks[i][1], 0, NULL);
    pthread_t th[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, worker, (void *)(i + 1));
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    /* three requests still live at exit */
    for (int i = 0; i < 3; i++)
        if (!ep.m(1 << 20, 0, NULL)) _exit(96);
}

/* An integer member of a JSON object (the test fails without it). */
static int64_t jint(const gs_json *o, const char *key)
{
    int64_t v = -1;
    ck_assert_msg(gs_json_int(gs_json_get(o, key), &v), "no %s", key);
    return v;
}

static int64_t mstat(const gs_json *res, const char *key)
{
    int64_t v = -1;
    const gs_json *ms = gs_json_get(res, "memory_stats");
    ck_assert_msg(ms && gs_json_int(gs_json_get(ms, key), &v), "no %s", key);
    return v;
}

/* The one trace of a GPUSIM_STATS file: an array of one, as gpusim replay --format json writes. */
static const gs_json *stats_doc(const gs_json *j)
{
    ck_assert(j && j->type == GS_JSON_ARRAY && j->n == 1);
    return j->items[0];
}

START_TEST(threads_stats_and_trace_agree_with_a_replay)
{
    char *stats = path_in("stats.json"), *trace = path_in("run.gstrace.gz");
    char *e1 = g_strdup_printf("GPUSIM_STATS=%s", stats), *e2 = g_strdup_printf("GPUSIM_TRACE=%s", trace);
    const char *env[] = {"GPUSIM_BACKEND=sim", "GPUSIM_POLICY=pytorch", e1, e2, NULL};
    ck_assert_int_eq(in_child(threads_body, env), 0);

    GError *err = NULL;
    gs_json *j = gs_json_load(stats, &err);
    ck_assert_msg(j, "%s", err ? err->message : "");
    const gs_json *res = gs_json_get(stats_doc(j), "results")->items[0];
    int64_t mallocs = SERIAL + THREADS * ROUNDS + 3;
    ck_assert_int_eq(mstat(res, "allocation.all.allocated"), mallocs);
    ck_assert_int_eq(mstat(res, "allocation.all.current"), 3);
    ck_assert_int_eq(mstat(res, "allocated_bytes.all.current"), 3 << 20);
    ck_assert_int_eq(mstat(res, "num_ooms"), 0);
    ck_assert_str_eq(gs_json_get(res, "policy")->str, "pytorch");
    ck_assert_str_eq(gs_json_get(res, "backend")->str, "sim");
    int64_t peak = -1, devalloc = -1;
    ck_assert(gs_json_int(gs_json_get(res, "peak_reserved_bytes"), &peak));
    ck_assert(gs_json_int(gs_json_get(res, "num_device_alloc"), &devalloc));

    /* The trace holds every request in the order the allocator served them, so replaying it
     * under the same policy ends exactly where the live run did. */
    gs_trace *t = gs_trace_load(trace, 0, NULL, NULL, &err);
    ck_assert_msg(t, "%s", err ? err->message : "");
    ck_assert_uint_eq(t->n_slots, (uint64_t)mallocs);
    ck_assert_uint_eq(t->n, (uint64_t)(2 * mallocs - 3));
    ck_assert_uint_eq(t->streams->len, 2);
    gs_policy *p = gs_policy_new("pytorch", NULL);
    gs_replay_opts o = {.device_total = t->device_total};
    gs_result r;
    ck_assert(gs_replay_run(t, p, &o, &r, NULL));
    ck_assert(!r.oom);
    ck_assert_int_eq(r.stats.reserved_bytes[GS_STAT_ALL].peak, peak);
    ck_assert_int_eq((int64_t)r.stats.num_device_alloc, devalloc);
    ck_assert_int_eq(r.stats.allocated_bytes[GS_STAT_ALL].current, 3 << 20);
    gs_result_clear(&r);
    gs_policy_free(p);
    gs_trace_free(t);
    gs_json_free(j);
    g_free(e1);
    g_free(e2);
    g_free(stats);
    g_free(trace);
}
END_TEST

/* ---- configuration errors and odd requests ---- */

static void one_request_body(void)
{
    entry_points e = load();
    void *p = e.m(4096, 0, NULL);
    e.f(p, 4096, 0, NULL);
}

START_TEST(bad_policy_stops_the_program_with_a_message)
{
    const char *env[] = {"GPUSIM_BACKEND=sim", "GPUSIM_POLICY=pytorch:max_split_size_mb:lots", NULL};
    ck_assert_int_eq(in_child(one_request_body, env), 2);
    char *msg = child_stderr();
    ck_assert_msg(strstr(msg, "GPUSIM_POLICY") && strstr(msg, "max_split_size_mb"), "%s", msg);
    g_free(msg);
    const char *env2[] = {"GPUSIM_BACKEND=gpu", NULL};
    ck_assert_int_eq(in_child(one_request_body, env2), 2);
    msg = child_stderr();
    ck_assert_msg(strstr(msg, "GPUSIM_BACKEND"), "%s", msg);
    g_free(msg);
    const char *env3[] = {"GPUSIM_BACKEND=sim", "GPUSIM_CAPACITY=12 apples", NULL};
    ck_assert_int_eq(in_child(one_request_body, env3), 2);
    msg = child_stderr();
    ck_assert_msg(strstr(msg, "GPUSIM_CAPACITY"), "%s", msg);
    g_free(msg);
}
END_TEST

static void odd_requests_body(void)
{
    entry_points e = load();
    if (e.m(0, 0, NULL) != NULL) _exit(97);      /* an empty tensor takes no memory */
    e.f(NULL, 0, 0, NULL);                        /* and its free does nothing */
    e.f((void *)(uintptr_t)0xdead000, 64, 0, NULL); /* not ours: ignored */
    void *a = e.m(12 << 20, 0, NULL);
    if (!a) _exit(98);
    /* over the 20 MiB capacity: NULL (GPUSIM_TORCH_OOM=none: no PyTorch to raise in) */
    if (e.m(16 << 20, 0, NULL) != NULL) _exit(99);
    e.f(a, 12 << 20, 0, NULL);
}

START_TEST(empty_unknown_and_over_capacity_requests)
{
    char *stats = path_in("odd.json"), *trace = path_in("odd.gstrace");
    char *e1 = g_strdup_printf("GPUSIM_STATS=%s", stats), *e2 = g_strdup_printf("GPUSIM_TRACE=%s", trace);
    const char *env[] = {"GPUSIM_BACKEND=sim", "GPUSIM_CAPACITY=20MiB", "GPUSIM_TORCH_OOM=none", e1,
                         e2, NULL};
    ck_assert_int_eq(in_child(odd_requests_body, env), 0);
    /* the request that failed is in the trace as one (an oom event), where it was made */
    gs_trace *t = gs_trace_load(trace, 0, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(t->n, 3);
    ck_assert_uint_eq(t->ev[1].op, GS_OP_OOM);
    ck_assert_uint_eq(t->ev[1].size, 16 << 20);
    gs_trace_free(t);
    g_free(e2);
    g_free(trace);
    gs_json *j = gs_json_load(stats, NULL);
    ck_assert_ptr_nonnull(j);
    const gs_json *res = gs_json_get(stats_doc(j), "results")->items[0];
    ck_assert_int_eq(mstat(res, "num_ooms"), 1);
    ck_assert_int_eq(mstat(res, "allocation.all.allocated"), 1);
    ck_assert_int_eq(mstat(res, "allocated_bytes.all.current"), 0);
    /* the program went on after the request that failed: caught, as a replay of the recorded
     * trace says (it said "oom", at event 0 of size 0) */
    ck_assert_str_eq(gs_json_get(res, "outcome")->str, "ok");
    ck_assert_int_eq(jint(res, "caught_ooms"), 1);
    ck_assert_ptr_null(gs_json_get(res, "first_oom"));
    gs_json_free(j);
    g_free(e1);
    g_free(stats);
}
END_TEST

/* The request that failed is the process's last: the run died of it. */
static void dies_of_oom_body(void)
{
    entry_points e = load();
    void *a = e.m(512 << 10, 0, NULL), *b = e.m(12 << 20, 0, NULL); /* 2 + 12 MiB reserved */
    if (!a || !b) _exit(97);
    e.f(a, 512 << 10, 0, NULL);
    if (e.m(30 << 20, 0, NULL) != NULL) _exit(98); /* over the 20 MiB capacity: the end */
}

/* The same death in Python: the exception unwinds (b is freed), then gpusim run's
 * sys.excepthook says the program died of it. */
static void dies_and_unwinds_body(void)
{
    entry_points e = load();
    void *a = e.m(512 << 10, 0, NULL), *b = e.m(12 << 20, 0, NULL);
    if (!a || !b) _exit(97);
    e.f(a, 512 << 10, 0, NULL);
    if (e.m(30 << 20, 0, NULL) != NULL) _exit(98);
    void *c = e.m(1 << 20, 0, NULL); /* a finally block's, as it unwinds */
    if (!c) _exit(96);
    e.f(b, 12 << 20, 0, NULL);
    e.f(c, 1 << 20, 0, NULL);
    void (*fatal)(void) = (void (*)(void))(uintptr_t)entry("gpusim_oom_fatal");
    if (!fatal) _exit(99);
    fatal();
}

/* Loop: 0, the OOM is the last request; 1, an allocation and frees follow it and the program
 * says it died of it (they were taken for a caught OOM: "ok"); the statistics and the trace
 * are the run's up to its death; 2, the same into a binary trace. */
START_TEST(an_oom_at_the_end_is_the_outcome)
{
    char *stats = path_in("dies.json"), *trace = path_in(_i == 2 ? "dies.gsbin" : "dies.gstrace");
    char *e1 = g_strdup_printf("GPUSIM_STATS=%s", stats),
         *e2 = g_strdup_printf("GPUSIM_TRACE=%s", trace);
    const char *env[] = {
        "GPUSIM_BACKEND=sim", "GPUSIM_CAPACITY=20MiB", "GPUSIM_TORCH_OOM=none", e1, e2, NULL};
    ck_assert_msg(in_child(_i ? dies_and_unwinds_body : dies_of_oom_body, env) == 0, "%s",
                  child_stderr());
    gs_json *j = gs_json_load(stats, NULL);
    ck_assert_ptr_nonnull(j);
    const gs_json *res = gs_json_get(stats_doc(j), "results")->items[0];
    ck_assert_str_eq(gs_json_get(res, "outcome")->str, "oom");
    ck_assert_int_eq(jint(res, "caught_ooms"), 0);
    const gs_json *f = gs_json_get(res, "first_oom");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(jint(f, "event"), 3); /* alloc, alloc, free, then it */
    ck_assert_int_eq(jint(f, "size"), 30 << 20);
    /* a replay of the recorded trace at the same capacity says the same */
    gs_trace *t = gs_trace_load(trace, 0, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(t->n, 4); /* cut at the death: no unwinding */
    if (_i) ck_assert_str_eq(gs_trace_get_meta(t, "fatal_oom_event"), "3");
    gs_policy *p = gs_policy_new("pytorch", NULL);
    gs_replay_opts o = {.capacity = 20 << 20};
    gs_result r;
    ck_assert(gs_replay_run(t, p, &o, &r, NULL));
    ck_assert(r.oom);
    ck_assert_uint_eq(r.first_oom_event, 3);
    ck_assert_uint_eq(r.first_oom_size, 30 << 20);
    ck_assert_int_eq(jint(res, "peak_allocated_bytes"), r.stats.allocated_bytes[GS_STAT_ALL].peak);
    ck_assert_int_eq(jint(res, "num_device_alloc"), (int64_t)r.stats.num_device_alloc);
    ck_assert_int_eq(mstat(res, "allocated_bytes.all.current"),
                     r.stats.allocated_bytes[GS_STAT_ALL].current);
    ck_assert_int_eq(jint(stats_doc(j), "allocations"), 2);
    ck_assert_int_eq(jint(res, "events"), 4);
    gs_result_clear(&r);
    gs_policy_free(p);
    gs_trace_free(t);
    gs_json_free(j);
    g_free(e1);
    g_free(e2);
    g_free(stats);
    g_free(trace);
}
END_TEST

/* ---- the recording, true to the run ---- */

static void recording_body(void)
{
    entry_points e = load();
    void *a = e.m(1 << 20, 0, NULL), *b = e.m(3 << 20, 1, NULL);
    if (!a || !b) _exit(97);
    /* requests for devices that are not there fail, and are no allocation of the run */
    if (e.m(4096, -1, NULL) || e.m(4096, 64, NULL) || e.m(4096, 1000000, NULL)) _exit(98);
    e.f(b, 3 << 20, 1, NULL);
    e.empty_cache(); /* both devices' caches */
    /* a forked child that allocates and exits: it must not write over the parent's files */
    pid_t pid = fork();
    if (pid == 0) {
        void *c = e.m(5 << 20, 0, NULL);
        (void)c;
        exit(0); /* atexit handlers run, as a Python child's would */
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) _exit(99);
    e.f(a, 1 << 20, 0, NULL);
}

START_TEST(the_recording_is_true_to_the_run)
{
    char *stats = path_in("rec.json"), *trace = path_in("rec.gstrace");
    char *e1 = g_strdup_printf("GPUSIM_STATS=%s", stats), *e2 = g_strdup_printf("GPUSIM_TRACE=%s", trace);
    const char *env[] = {"GPUSIM_BACKEND=sim", e1, e2, NULL};
    ck_assert_int_eq(in_child(recording_body, env), 0);
    GError *err = NULL;
    gs_trace *t = gs_trace_load(trace, 0, NULL, NULL, &err);
    ck_assert_msg(t, "%s", err ? err->message : "");
    /* the parent's run alone: 2 allocs, a free, an empty_cache per device, a free */
    ck_assert_uint_eq(t->n_slots, 2);
    ck_assert_uint_eq(t->n, 6);
    /* time from the first request, not 2^64 less a little */
    ck_assert_uint_lt(t->ev[0].time_us, 60u * 1000 * 1000);
    for (size_t i = 1; i < t->n; i++) ck_assert_uint_ge(t->ev[i].time_us, t->ev[i - 1].time_us);
    for (size_t i = 0; i < t->n; i++) ck_assert_uint_le(t->ev[i].device, 1);
    ck_assert_uint_eq(t->ev[3].op, GS_OP_EMPTY_CACHE);
    ck_assert_uint_eq(t->ev[4].op, GS_OP_EMPTY_CACHE);
    ck_assert_uint_eq(t->ev[3].device + t->ev[4].device, 1); /* devices 0 and 1 */
    /* replayed, it ends as the run did: nothing live; device 1's segment released by the
     * empty_cache, device 0's (a's, live then) cached after its free */
    gs_policy *p = gs_policy_new("pytorch", NULL);
    gs_replay_opts o = {0};
    gs_result r;
    ck_assert(gs_replay_run(t, p, &o, &r, NULL));
    ck_assert_int_eq(r.stats.allocated_bytes[GS_STAT_ALL].current, 0);
    ck_assert_int_eq(r.stats.reserved_bytes[GS_STAT_ALL].current, 2 << 20);
    gs_json *j = gs_json_load(stats, &err);
    ck_assert_msg(j, "%s", err ? err->message : "");
    const gs_json *res = gs_json_get(stats_doc(j), "results")->items[0];
    /* (memory_stats are device 0's, as PyTorch's are by default: its one allocation; the forked
     * child's is not there) */
    ck_assert_int_eq(mstat(res, "allocation.all.allocated"), 1);
    gs_json_free(j);
    gs_result_clear(&r);
    gs_policy_free(p);
    gs_trace_free(t);
    g_free(e1);
    g_free(e2);
    g_free(stats);
    g_free(trace);
}
END_TEST

/* GPUSIM_TRACE and GPUSIM_STATS naming links: the links stay, their targets get the files (a
 * rename over them made each a file of its own, the target never written). */
START_TEST(outputs_through_links_write_their_targets)
{
    char *stats = path_in("stats-link.json"), *trace = path_in("trace-link.gstrace");
    char *st_to = path_in("stats-target.json"), *tr_to = path_in("trace-target.gstrace");
    ck_assert_int_eq(symlink(st_to, stats), 0);
    ck_assert_int_eq(symlink(tr_to, trace), 0);
    char *e1 = g_strdup_printf("GPUSIM_STATS=%s", stats), *e2 = g_strdup_printf("GPUSIM_TRACE=%s", trace);
    const char *env[] = {"GPUSIM_BACKEND=sim", e1, e2, NULL};
    ck_assert_int_eq(in_child(one_request_body, env), 0);
    ck_assert(g_file_test(stats, G_FILE_TEST_IS_SYMLINK));
    ck_assert(g_file_test(trace, G_FILE_TEST_IS_SYMLINK));
    gs_trace *t = gs_trace_load(tr_to, 0, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(t->n, 2);
    gs_trace_free(t);
    gs_json *j = gs_json_load(st_to, NULL);
    ck_assert_ptr_nonnull(j);
    gs_json_free(j);
    g_free(e1);
    g_free(e2);
    g_free(stats);
    g_free(trace);
    g_free(st_to);
    g_free(tr_to);
}
END_TEST

/* ---- start-up failures, devices, OOMs, empty_cache ---- */

/* A start-up failure with GPUSIM_STATS or GPUSIM_TRACE set: one line, exit 2, never a hang (the
 * library exited inside its lock, and its exit handler, there to write the statistics, waited on
 * that lock forever). CUDA_VISIBLE_DEVICES= hides any GPU, so the CUDA device cannot start here
 * or on a GPU machine. */
START_TEST(start_failure_is_one_line_and_exit_2_never_a_hang)
{
    char *stats = path_in("never.json"), *trace = path_in("never.gstrace");
    char *e1 = g_strdup_printf("GPUSIM_STATS=%s", stats), *e2 = g_strdup_printf("GPUSIM_TRACE=%s", trace);
    const char *envs[][5] = {
        {"GPUSIM_BACKEND=cuda", "CUDA_VISIBLE_DEVICES=", e1, NULL},
        {"GPUSIM_BACKEND=cuda", "CUDA_VISIBLE_DEVICES=", e1, e2, NULL},
        {"GPUSIM_BACKEND=sim", "GPUSIM_TORCH_OOM=/nonexistent/libgpusim_torch_oom.so", e1, e2, NULL},
    };
    const char *want[] = {"GPUSIM_BACKEND", "GPUSIM_BACKEND", "GPUSIM_TORCH_OOM"};
    for (size_t i = 0; i < G_N_ELEMENTS(envs); i++) {
        ck_assert_int_eq(in_child_within(one_request_body, envs[i], 20), 2);
        char *msg = child_stderr();
        ck_assert_msg(strstr(msg, want[i]) && strchr(msg, '\n') == msg + strlen(msg) - 1,
                      "case %zu: want one line naming %s: %s", i, want[i], msg);
        g_free(msg);
        ck_assert(!g_file_test(stats, G_FILE_TEST_EXISTS) && !g_file_test(trace, G_FILE_TEST_EXISTS));
    }
    g_free(e1);
    g_free(e2);
    g_free(stats);
    g_free(trace);
}
END_TEST

/* Two simulated devices: their blocks never share an address, and a free naming the other
 * device is refused with one line (it went to the named device's heap: both heaps corrupted,
 * then a crash); the right free still works. */
static void two_devices_body(void)
{
    entry_points e = load();
    void *p[2][8];
    for (int i = 0; i < 8; i++)
        for (int d = 0; d < 2; d++)
            if (!(p[d][i] = e.m((ssize_t)(i + 1) << 20, d, NULL))) _exit(80);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++)
            if (p[0][i] == p[1][j]) _exit(81);
    e.f(p[0][0], 1 << 20, 1, NULL); /* device 0's block, named as device 1's: refused */
    for (int i = 0; i < 8; i++)
        for (int d = 0; d < 2; d++) e.f(p[d][i], (ssize_t)(i + 1) << 20, d, NULL);
}

START_TEST(two_devices_never_share_an_address_and_a_wrong_device_free_is_refused)
{
    char *stats = path_in("two.json");
    char *e1 = g_strdup_printf("GPUSIM_STATS=%s", stats);
    const char *env[] = {"GPUSIM_BACKEND=sim", e1, NULL};
    ck_assert_int_eq(in_child(two_devices_body, env), 0);
    char *msg = child_stderr();
    ck_assert_msg(strstr(msg, "on device 1: the block is device 0's; not freed") &&
                      strchr(msg, '\n') == msg + strlen(msg) - 1, "%s", msg);
    g_free(msg);
    gs_json *j = gs_json_load(stats, NULL);
    ck_assert_ptr_nonnull(j);
    const gs_json *rs = gs_json_get(stats_doc(j), "results");
    ck_assert_uint_eq(rs->n, 2);
    for (size_t d = 0; d < 2; d++) {
        ck_assert_int_eq(mstat(rs->items[d], "allocation.all.allocated"), 8);
        ck_assert_int_eq(mstat(rs->items[d], "allocation.all.current"), 0);
        ck_assert_int_eq(mstat(rs->items[d], "allocated_bytes.all.current"), 0);
    }
    gs_json_free(j);
    g_free(e1);
    g_free(stats);
}
END_TEST

/* An OOM calls GPUSIM_TORCH_OOM's gpusim_torch_raise_oom with PyTorch's words for it and the
 * lock released (the real one throws torch.OutOfMemoryError; tests/oom_hook.c jumps back here),
 * and the program goes on: what it freed is reused, and empty_cache releases the cache. */
static void oom_body(void)
{
    entry_points e = load();
    void *hook = dlopen(hook_path, RTLD_NOW | RTLD_LOCAL); /* the library's own handle of it */
    jmp_buf *jb = hook ? dlsym(hook, "gpusim_test_oom_jmp") : NULL;
    const char *said = hook ? dlsym(hook, "gpusim_test_oom_msg") : NULL;
    if (!jb || !said) _exit(70);
    void *a = e.m(12 << 20, 0, NULL);
    if (!a) _exit(71);
    if (setjmp(*jb) == 0) {
        e.m(16 << 20, 0, NULL); /* over the 20 MiB capacity */
        _exit(72);              /* the hook did not run */
    }
    if (!strstr(said, "CUDA out of memory. Tried to allocate 16.00 MiB on device 0")) _exit(73);
    e.f(a, 12 << 20, 0, NULL); /* the lock was released: this does not hang */
    void *b = e.m(16 << 20, 0, NULL);
    if (!b) _exit(74);
    e.f(b, 16 << 20, 0, NULL);
    e.empty_cache();
}

START_TEST(oom_raises_through_the_hook_and_the_program_goes_on)
{
    char *stats = path_in("oom.json"), *trace = path_in("oom.gstrace");
    char *e1 = g_strdup_printf("GPUSIM_STATS=%s", stats), *e2 = g_strdup_printf("GPUSIM_TRACE=%s", trace);
    char *e3 = g_strdup_printf("GPUSIM_TORCH_OOM=%s", hook_path);
    const char *env[] = {"GPUSIM_BACKEND=sim", "GPUSIM_CAPACITY=20MiB", e1, e2, e3, NULL};
    ck_assert_int_eq(in_child_within(oom_body, env, 30), 0);
    gs_json *j = gs_json_load(stats, NULL);
    ck_assert_ptr_nonnull(j);
    const gs_json *res = gs_json_get(stats_doc(j), "results")->items[0];
    ck_assert_int_eq(mstat(res, "num_ooms"), 1);
    ck_assert_int_eq(mstat(res, "allocation.all.allocated"), 2);
    ck_assert_int_eq(mstat(res, "reserved_bytes.all.current"), 0); /* empty_cache released it */
    ck_assert_int_ge(mstat(res, "num_device_free"), 1);
    gs_trace *t = gs_trace_load(trace, 0, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->ev[t->n - 1].op, GS_OP_EMPTY_CACHE);
    gs_trace_free(t);
    gs_json_free(j);
    g_free(e1);
    g_free(e2);
    g_free(e3);
    g_free(stats);
    g_free(trace);
}
END_TEST

/* ---- two libraries in one process: the arrangements, and the replay that predicts them ---- */

typedef int (*client_fn)(const char *);
typedef void *(*cmalloc_fn)(int, ssize_t, int, void *);
typedef void (*cfree_fn)(int, void *, ssize_t, int, void *);

/* The story of two libraries on one GPU, on a simulated device of 1 GiB: CuPy (its own pool's
 * policy) processes 12 arrays of 50 MiB and frees them, which its pool keeps; then PyTorch asks
 * for 8 tensors of 80 MiB. Exit status: 0 when all 8 were served, 10 + i when tensor i was not
 * (the program dies there, as an uncaught OOM ends it). */
static void two_libraries_body(void)
{
    entry_points e = load();
    client_fn client = (client_fn)(uintptr_t)entry("gpusim_client");
    cmalloc_fn cm = (cmalloc_fn)(uintptr_t)entry("gpusim_client_malloc");
    cfree_fn cf = (cfree_fn)(uintptr_t)entry("gpusim_client_free");
    if (!client || !cm || !cf) _exit(69);
    int cupy = client("cupy");
    if (cupy < 0 || client("cupy") != cupy) _exit(70);
    if (client("Bad-Name") != -1 || client("") != -1 || cm(cupy + 5, 512, 0, NULL)) _exit(71);
    void *c[12];
    for (int i = 0; i < 12; i++)
        if (!(c[i] = cm(cupy, 50 << 20, 0, NULL))) _exit(72);
    e.f(c[0], 50 << 20, 0, NULL); /* PyTorch freeing CuPy's block: refused, nothing changes */
    for (int i = 0; i < 12; i++) cf(cupy, c[i], 50 << 20, 0, NULL);
    void *t[8];
    for (int i = 0; i < 8; i++)
        if (!(t[i] = e.m(80 << 20, 0, NULL))) exit(10 + i);
    for (int i = 0; i < 8; i++) e.f(t[i], 80 << 20, 0, NULL);
}

/* Client name's object in the stats' result res. */
static const gs_json *client_json(const gs_json *res, const char *name)
{
    const gs_json *c = gs_json_get(gs_json_get(res, "clients"), name);
    ck_assert_msg(c, "no client %s in the statistics", name);
    return c;
}

START_TEST(two_libraries_separate_die_shared_and_cooperative_complete_as_replays_predict)
{
    const char *modes[] = {"separate", "shared", "cooperative"};
    const int want_exit[] = {15, 0, 0}; /* separate: PyTorch's 6th tensor finds CuPy's cache */
    gs_policy *pt = gs_policy_new("pytorch", NULL), *cp = gs_policy_new("cupy", NULL);
    char *shared_trace = NULL;
    for (int m = 0; m < 3; m++) {
        char *stats = path_in("two-lib.json"),
             *trace = g_strdup_printf("%s/two-lib-%s.gstrace", dir, modes[m]);
        char *e1 = g_strdup_printf("GPUSIM_STATS=%s", stats),
             *e2 = g_strdup_printf("GPUSIM_TRACE=%s", trace);
        char *e3 = g_strdup_printf("GPUSIM_CLIENTS=%s", modes[m]);
        const char *env[] = {"GPUSIM_BACKEND=sim",
                             "GPUSIM_DEVICE_TOTAL=1GiB",
                             "GPUSIM_TORCH_OOM=none",
                             "GPUSIM_POLICY_CUPY=cupy",
                             e1,
                             e2,
                             e3,
                             NULL};
        ck_assert_int_eq(in_child(two_libraries_body, env), want_exit[m]);
        char *msg = child_stderr();
        ck_assert_msg(strstr(msg, "the block is client cupy's (device 0); not freed"), "%s", msg);
        ck_assert_msg(strstr(msg, "client name 'Bad-Name'"), "%s", msg);
        g_free(msg);

        gs_json *j = gs_json_load(stats, NULL);
        ck_assert_ptr_nonnull(j);
        const gs_json *res = gs_json_get(stats_doc(j), "results")->items[0];
        ck_assert_str_eq(gs_json_get(res, "arrangement")->str, modes[m]);
        const gs_json *jc = client_json(res, "cupy"), *jt = client_json(res, "torch");
        ck_assert_str_eq(gs_json_get(jc, "policy")->str, m == 1 ? "pytorch" : "cupy");
        ck_assert_int_eq(jint(jc, "peak_allocated_bytes"), 600 << 20);
        ck_assert_int_eq(jint(jt, "peak_allocated_bytes"), (int64_t)(m == 0 ? 5 : 8) * (80 << 20));
        ck_assert_int_eq(jint(jt, "num_ooms"), m == 0);
        if (m == 2) ck_assert_int_eq(jint(jc, "released_for_others_bytes"), 600 << 20);

        /* The recorded trace, replayed under the same arrangement on a device of the same
         * size, gives the same numbers: each client's peaks, device calls and OOMs, and the
         * device's peak. */
        gs_trace *t = gs_trace_load(trace, 0, NULL, NULL, NULL);
        ck_assert_ptr_nonnull(t);
        ck_assert_uint_eq(t->clients->len, 2);
        ck_assert_str_eq(t->clients->pdata[0], "cupy");
        const gs_policy *per[] = {cp, NULL};
        gs_replay_opts o = {.device_total = 1ull << 30, .client_policy = per};
        ck_assert(gs_clients_mode_parse(modes[m], &o.clients));
        gs_result r;
        ck_assert(gs_replay_run(t, pt, &o, &r, NULL));
        ck_assert_int_eq(r.oom, m == 0);
        ck_assert_int_eq(r.stats.reserved_bytes[GS_STAT_ALL].peak,
                         jint(res, "peak_reserved_bytes"));
        ck_assert_int_eq((int64_t)r.stats.num_device_alloc, jint(res, "num_device_alloc"));
        for (size_t k = 0; k < 2; k++) {
            const gs_json *jk = client_json(res, r.clients[k].name);
            const gs_stats *st = &r.clients[k].stats;
            ck_assert_int_eq(st->reserved_bytes[GS_STAT_ALL].peak, jint(jk, "peak_reserved_bytes"));
            ck_assert_int_eq(st->allocated_bytes[GS_STAT_ALL].peak,
                             jint(jk, "peak_allocated_bytes"));
            ck_assert_int_eq((int64_t)st->num_device_alloc, jint(jk, "num_device_alloc"));
            ck_assert_int_eq((int64_t)st->num_device_free, jint(jk, "num_device_free"));
            ck_assert_int_eq((int64_t)st->num_ooms, jint(jk, "num_ooms"));
            ck_assert_int_eq((int64_t)r.clients[k].released_for_others,
                             jint(jk, "released_for_others_bytes"));
        }
        gs_result_clear(&r);
        gs_trace_free(t);
        gs_json_free(j);
        if (m == 1) shared_trace = g_strdup(trace);
        g_free(e1);
        g_free(e2);
        g_free(e3);
        g_free(stats);
        g_free(trace);
    }
    /* The complete program (recorded under shared) replayed under separate: PyTorch dies at
     * its 6th tensor, as the separate run did. */
    gs_trace *t = gs_trace_load(shared_trace, 0, NULL, NULL, NULL);
    const gs_policy *per[] = {cp, NULL};
    gs_replay_opts o = {.device_total = 1ull << 30,
                        .client_policy = per,
                        .clients = GS_CLIENTS_SEPARATE};
    gs_result r;
    ck_assert(gs_replay_run(t, pt, &o, &r, NULL));
    ck_assert(r.oom);
    ck_assert_str_eq(r.clients[r.first_oom_client].name, "torch");
    ck_assert_int_eq(r.clients[1].stats.allocated_bytes[GS_STAT_ALL].peak, 5 * (80 << 20));
    gs_result_clear(&r);
    gs_trace_free(t);
    g_free(shared_trace);
    gs_policy_free(pt);
    gs_policy_free(cp);
}
END_TEST

/* ---- a CUDA graph's private pool ---- */

typedef int (*filter_fn)(void *ctx, void *stream);
typedef void (*pool_begin_fn)(int, uint64_t, uint64_t, filter_fn, void *);
typedef void (*pool_fn)(int, uint64_t, uint64_t);

#define CAPTURE_STREAM ((void *)(uintptr_t)0x7000)
#define SIDE_STREAM ((void *)(uintptr_t)0x7100)

/* PyTorch's filter for a capture: the streams of the capture, its own (ctx) and one it forked
 * onto */
static int capture_filter(void *ctx, void *stream)
{
    return stream == ctx || stream == SIDE_STREAM;
}

/* Two captures into one pool (a graph, then another sharing its pool), as PyTorch's hooks
 * call the library, the first forked onto a side stream; eager requests between them. */
static void capture_body(void)
{
    entry_points e = load();
    pool_begin_fn begin = (pool_begin_fn)(uintptr_t)entry("gpusim_pool_begin");
    pool_fn end = (pool_fn)(uintptr_t)entry("gpusim_pool_end");
    pool_fn release = (pool_fn)(uintptr_t)entry("gpusim_pool_release");
    if (!begin || !end || !release) _exit(80);
    const ssize_t mb8 = 8 << 20;
    void *warm = e.m(mb8, 0, NULL); /* an eager segment before the capture */
    begin(0, 1, 0, capture_filter, CAPTURE_STREAM);
    void *eager = e.m(mb8, 0, NULL); /* not the capture's stream: the ordinary pool */
    void *tmp = e.m(mb8, 0, CAPTURE_STREAM), *out = e.m(mb8, 0, CAPTURE_STREAM);
    if (!warm || !eager || !tmp || !out) _exit(81);
    e.f(tmp, mb8, 0, CAPTURE_STREAM);      /* a temporary of the capture: back to its pool */
    void *side = e.m(mb8, 0, SIDE_STREAM); /* the capture's too, on its side stream */
    if (!side) _exit(84);
    e.f(side, mb8, 0, SIDE_STREAM);
    end(0, 1, 0);
    /* eager code after the capture never gets the capture's freed blocks, which the graph's
     * replays still write */
    void *after = e.m(mb8, 0, CAPTURE_STREAM), *after_side = e.m(mb8, 0, SIDE_STREAM);
    if (!after || after == tmp || !after_side || after_side == side) _exit(82);
    begin(0, 1, 0, capture_filter, CAPTURE_STREAM); /* a second graph, the same pool */
    void *again = e.m(mb8, 0, CAPTURE_STREAM);
    if (again != tmp) _exit(83); /* the pool's own free block */
    end(0, 1, 0);
    release(0, 1, 0); /* both graphs gone */
    release(0, 1, 0);
    e.f(out, mb8, 0, NULL);
    e.f(again, mb8, 0, NULL);
    e.empty_cache(); /* the freeable pool's segment goes */
    e.f(after, mb8, 0, NULL);
    e.f(after_side, mb8, 0, NULL);
    e.f(eager, mb8, 0, NULL);
    e.f(warm, mb8, 0, NULL);
}

START_TEST(a_capture_gets_a_private_pool_and_its_trace_replays)
{
    char *stats = path_in("pool.json"), *trace = path_in("pool.gstrace");
    char *e1 = g_strdup_printf("GPUSIM_STATS=%s", stats),
         *e2 = g_strdup_printf("GPUSIM_TRACE=%s", trace);
    const char *env[] = {"GPUSIM_BACKEND=sim", e1, e2, NULL};
    ck_assert_msg(in_child(capture_body, env) == 0, "%s", child_stderr());
    GError *err = NULL;
    gs_trace *t = gs_trace_load(trace, 0, NULL, NULL, &err);
    ck_assert_msg(t, "%s", err ? err->message : "");
    int begins = 0, ends = 0, releases = 0;
    for (size_t i = 1; i < t->n; i++) /* a request's pool calls come before it, not later */
        ck_assert_uint_ge(t->ev[i].time_us, t->ev[i - 1].time_us);
    for (size_t i = 0; i < t->n; i++) {
        begins += t->ev[i].op == GS_OP_POOL_BEGIN;
        ends += t->ev[i].op == GS_OP_POOL_END;
        releases += t->ev[i].op == GS_OP_POOL_RELEASE;
    }
    /* each capture's recording (on no stream: the begin's use), then each stream it took */
    ck_assert_int_eq(begins, 2 + 2 + 1);
    ck_assert_int_eq(ends, 2);
    ck_assert_int_eq(releases, 2);
    gs_json *j = gs_json_load(stats, &err);
    ck_assert_msg(j, "%s", err ? err->message : "");
    const gs_json *res = gs_json_get(stats_doc(j), "results")->items[0];
    /* five 20 MiB segments (warm and eager share one; the pool's, one a stream; after's and
     * after_side's), the pool's two freed by the empty_cache after the releases (the others'
     * blocks are live then) */
    ck_assert_int_eq(jint(res, "num_device_alloc"), 5);
    ck_assert_int_eq(jint(res, "num_device_free"), 2);
    ck_assert_int_eq(jint(res, "events"), (int64_t)t->n); /* the pool events counted too */
    /* the trace replays to the run's figures */
    gs_policy *p = gs_policy_new("pytorch", NULL);
    gs_replay_opts o = {.device_total = t->device_total};
    gs_result r;
    ck_assert(gs_replay_run(t, p, &o, &r, NULL));
    ck_assert_int_eq((int64_t)r.stats.num_device_alloc, jint(res, "num_device_alloc"));
    ck_assert_int_eq((int64_t)r.stats.num_device_free, jint(res, "num_device_free"));
    ck_assert_int_eq(r.stats.reserved_bytes[GS_STAT_ALL].peak, jint(res, "peak_reserved_bytes"));
    gs_result_clear(&r);
    gs_policy_free(p);
    gs_json_free(j);
    gs_trace_free(t);
    g_free(e1);
    g_free(e2);
    g_free(stats);
    g_free(trace);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_pluggable LIBGPUSIM_TORCH.so OOM_HOOK.so\n");
        return 2;
    }
    lib_path = argv[1];
    hook_path = argv[2];
    dir = g_dir_make_tmp("gpusim-pluggable-XXXXXX", NULL);
    Suite *s = suite_create("pluggable");
    TCase *tc = tcase_create("pluggable");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, threads_stats_and_trace_agree_with_a_replay);
    tcase_add_test(tc, the_recording_is_true_to_the_run);
    tcase_add_test(tc, outputs_through_links_write_their_targets);
    tcase_add_test(tc, bad_policy_stops_the_program_with_a_message);
    tcase_add_test(tc, empty_unknown_and_over_capacity_requests);
    tcase_add_loop_test(tc, an_oom_at_the_end_is_the_outcome, 0, 3);
    tcase_add_test(tc, start_failure_is_one_line_and_exit_2_never_a_hang);
    tcase_add_test(tc, two_devices_never_share_an_address_and_a_wrong_device_free_is_refused);
    tcase_add_test(tc, oom_raises_through_the_hook_and_the_program_goes_on);
    tcase_add_test(tc, a_capture_gets_a_private_pool_and_its_trace_replays);
    tcase_add_test(tc,
                   two_libraries_separate_die_shared_and_cooperative_complete_as_replays_predict);
    suite_add_tcase(s, tc);
    int rc = run_suite(s);
    char *cmd = g_strdup_printf("rm -rf '%s'", dir);
    if (system(cmd) != 0) rc = EXIT_FAILURE;
    g_free(cmd);
    g_free(dir);
    return rc;
}
