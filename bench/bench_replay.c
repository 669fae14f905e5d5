/* bench_replay.c - replay throughput: events per second through the core and a policy on the
 * simulated device, excluding file parsing (the trace is loaded once, then replayed REPEAT times
 * per run; gs_replay_run is timed whole, its setup and teardown included, which is well under a
 * percent of a run of the default length).
 *
 * Each run is timed two ways: CPU time of the process (clock_gettime(CLOCK_PROCESS_CPUTIME_ID);
 * the figure to quote on a shared machine, where wall-clock rates move by several times between
 * identical runs) and wall time (CLOCK_MONOTONIC). Printed per trace and policy: the median over
 * the runs and the spread (min-max) of both, in millions of events per second.
 *
 *   bench_replay [TRACE]... [--policy SPEC]... [--repeat N] [--runs K] [--capacity SIZE]
 *                [--continue-on-oom] [--raw]
 *
 * A replay that stops early (an OOM without --continue-on-oom, a device error) is timed over the
 * events it did replay, and the line says so: such a run measures mostly setup, not throughput.
 * --raw adds one line per run ("raw TRACE POLICY cpu_ev_s wall_ev_s"), for bench/compare.sh.
 *
 * Scaling: the cost per event as the number of live allocations grows.
 *
 *   bench_replay --scaling [--live N]... [--streams S] [--steady M] [--random-free]
 *                [--policy SPEC]... [--runs K]
 *   bench_replay --scaling-trace N [--streams S] [--steady M] [--random-free] -o FILE
 *
 * For each N (default 10^3, 10^4, 10^5, 10^6) the generator below (scaling_trace) builds a trace
 * that ramps up to N live allocations and then churns at that level; it is replayed once per
 * run, and a trace of its ramp alone is replayed too, so the ramp's cost and the steady state's
 * can be told apart: steady ns/event = (CPU of the whole trace - CPU of the ramp) / churn events.
 * --scaling-trace writes the trace for one N (gpusim replay can then replay it).
 * --random-free churns the other way: every step frees a random live allocation and makes a new
 * one in its place, so every event lands anywhere in the heap (the default churn's FIFO of
 * temporaries keeps most events in a small hot set).
 *
 * A benchmark, not a test: it asserts nothing and is not run by 'meson test'.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "report.h"

#define MAX_RUNS 99
#define MAX_SPECS 16
#define MAX_TRACES 64
#define MAX_LIVE 16

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
    double cpu_s, wall_s;
    size_t events;   /* replayed */
    size_t expected; /* trace events x repeat */
    bool oom, error;
} timing;

/* One replay of t under p, timed; FALSE when it cannot start (the message is printed). */
static gboolean timed_replay(const gs_trace *t, const gs_policy *p, unsigned repeat,
                             uint64_t capacity, bool continue_on_oom, timing *out)
{
    /* the trace's bound, outside the timed part: computed once per trace by the commands */
    gs_bound *b = gs_bound_compute(t);
    gs_replay_opts o = {.device_total = t->device_total, .repeat = repeat,
                        .capacity = capacity, .continue_on_oom = continue_on_oom, .bound = b};
    gs_result r;
    GError *err = NULL;
    double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
    gboolean ok = gs_replay_run(t, p, &o, &r, &err);
    out->cpu_s = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    out->wall_s = clock_s(CLOCK_MONOTONIC) - w0;
    gs_bound_free(b);
    if (!ok) {
        fprintf(stderr, "bench_replay: %s\n", err->message);
        g_error_free(err);
        return FALSE;
    }
    out->events = r.events;
    out->expected = t->n * repeat;
    out->oom = r.oom;
    out->error = r.error != GS_OK;
    gs_result_clear(&r);
    return TRUE;
}

/* Median, min and max of v[0..n) (sorts v). */
static void summarize(double *v, unsigned n, double *med, double *lo, double *hi)
{
    *med = gs_median(v, n);
    *lo = v[0];
    *hi = v[n - 1];
}

/* ---- throughput on traces ---- */

static int bench_trace(const char *path, const char *const *specs, int nspecs, unsigned repeat,
                       unsigned runs, uint64_t capacity, bool continue_on_oom, bool raw)
{
    GError *err = NULL;
    gs_trace *t = gs_trace_load(path, 0, NULL, NULL, &err);
    if (!t) {
        fprintf(stderr, "bench_replay: %s\n", err->message);
        g_error_free(err);
        return 2;
    }
    printf("trace %s: %zu events; %u passes per run, %u runs; rates in M events/s: CPU time "
           "median (min-max), wall time median (min-max)\n", path, t->n, repeat, runs);
    for (int s = 0; s < nspecs; s++) {
        gs_policy *p = gs_policy_new(specs[s], &err);
        if (!p) {
            fprintf(stderr, "bench_replay: %s\n", err->message);
            g_error_free(err);
            gs_trace_free(t);
            return 2;
        }
        double cpu[MAX_RUNS], wall[MAX_RUNS];
        timing tm = {0};
        for (unsigned k = 0; k < runs; k++) {
            if (!timed_replay(t, p, repeat, capacity, continue_on_oom, &tm)) {
                gs_policy_free(p);
                gs_trace_free(t);
                return 2;
            }
            cpu[k] = (double)tm.events / tm.cpu_s;
            wall[k] = (double)tm.events / tm.wall_s;
            if (raw) printf("raw %s %s %.0f %.0f\n", path, specs[s], cpu[k], wall[k]);
        }
        double cm, cl, ch, wm, wl, wh;
        summarize(cpu, runs, &cm, &cl, &ch);
        summarize(wall, runs, &wm, &wl, &wh);
        printf("%-40s cpu %7.2f (%.2f-%.2f)  wall %7.2f (%.2f-%.2f)", specs[s], cm / 1e6,
               cl / 1e6, ch / 1e6, wm / 1e6, wl / 1e6, wh / 1e6);
        if (tm.events < tm.expected)
            printf("  [stopped after %zu of %zu events: %s]", tm.events, tm.expected,
                   tm.error ? "device error" : "OOM; see --continue-on-oom");
        else if (tm.oom)
            printf("  [OOMs skipped]");
        printf("\n");
        fflush(stdout);
        gs_policy_free(p);
    }
    gs_trace_free(t);
    return 0;
}

/* ---- the scaling trace ---- */

/* xorshift64*: the generator's only source of randomness, so a trace is a function of its
 * parameters. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * UINT64_C(2685821657736338717);
}

static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

/* A request size: 99% log-uniform in [512 B, 256 KiB) (small pool), 1% log-uniform in
 * [1 MiB, 8 MiB) (large pool), in bytes as a program asks (not rounded). Mean about 77 KiB. */
static uint64_t scaling_size(uint64_t *s)
{
    bool large = rng_next(s) % 100 == 0;
    double lo = large ? 20.0 : 9.0, hi = large ? 23.0 : 18.0; /* log2 bounds */
    double e = lo + (hi - lo) * rng_unit(s);
    uint64_t v = (uint64_t)exp2(e);
    return v ? v : 1;
}

typedef struct {
    uint32_t *slot; /* live long-lived allocations */
    size_t n;
} live_set;

/* The scaling trace: N long-lived allocations made over a ramp, then `steady` churn events at
 * that level. Deterministic (seed 1).
 *   ramp     N allocations; after each, with probability 1/2 a short-lived allocation is made
 *            and freed at once (splits and merges, as temporaries do), and with probability 1/10
 *            a random earlier long-lived allocation is freed and a new one made in its place
 *            (holes all over the heap, so the free-block index grows with N).
 *   steady   per step, 4 events: a short-lived allocation and the free of the one made 64 steps
 *            before (a FIFO of temporaries: a working set that stays hot), and with probability
 *            1/4 the turnover of one random long-lived allocation (its free and a new
 *            allocation: the accesses that land anywhere in the heap), else a
 *            short-lived alloc+free pair.
 *   random   (random_free) per step, 2 events: the free of a random long-lived allocation and
 *            a new one in its place.
 * Streams: every allocation on stream (i mod streams), i its index. ramp_only: stop after the
 * ramp and free nothing more. */
static gs_trace *scaling_trace(size_t N, unsigned streams, size_t steady, bool random_free,
                               bool ramp_only)
{
    gs_trace *t = gs_trace_new();
    uint64_t rng = 1;
    live_set L = {g_new(uint32_t, N ? N : 1), 0};
    uint64_t k = 0, live_bytes = 0, peak_bytes = 0;
#define ALLOC(sz) gs_trace_add_alloc(t, "torch", (k++) % streams, (sz))
    for (size_t i = 0; i < N; i++) {
        uint64_t sz = scaling_size(&rng);
        L.slot[L.n++] = ALLOC(sz);
        live_bytes += sz;
        if (rng_next(&rng) % 2 == 0) gs_trace_add_free(t, ALLOC(scaling_size(&rng)));
        if (L.n > 1 && rng_next(&rng) % 10 == 0) {
            size_t j = rng_next(&rng) % L.n;
            gs_trace_add_free(t, L.slot[j]);
            L.slot[j] = ALLOC(scaling_size(&rng));
        }
        peak_bytes = MAX(peak_bytes, live_bytes);
    }
    if (!ramp_only && random_free) {
        for (size_t e = 0; L.n && e < steady; e += 2) {
            size_t j = rng_next(&rng) % L.n;
            gs_trace_add_free(t, L.slot[j]);
            L.slot[j] = ALLOC(scaling_size(&rng));
        }
    } else if (!ramp_only) {
        enum { FIFO = 64 };
        uint32_t fifo[FIFO];
        size_t head = 0, filled = 0;
        for (size_t e = 0; e < steady; e += 4) {
            if (filled == FIFO) gs_trace_add_free(t, fifo[head]);
            else filled++;
            fifo[head] = ALLOC(scaling_size(&rng));
            head = (head + 1) % FIFO;
            if (L.n && rng_next(&rng) % 4 == 0) {
                size_t j = rng_next(&rng) % L.n;
                gs_trace_add_free(t, L.slot[j]);
                L.slot[j] = ALLOC(scaling_size(&rng));
            } else {
                gs_trace_add_free(t, ALLOC(scaling_size(&rng)));
            }
        }
    }
#undef ALLOC
    /* The simulated device: room for four times the sizes requested at the ramp's end (live
     * bytes drift little afterwards), at least an 80 GiB H100. */
    uint64_t total = MAX(UINT64_C(80) << 30, 4 * peak_bytes);
    total = (total + (UINT64_C(1) << 30) - 1) >> 30 << 30;
    char *v = g_strdup_printf("%" G_GUINT64_FORMAT, total);
    gs_trace_set_meta(t, "device_total_bytes", v);
    g_free(v);
    char *src = g_strdup_printf("bench_replay --scaling-trace %zu --streams %u --steady %zu%s", N,
                                streams, steady, random_free ? " --random-free" : "");
    gs_trace_set_meta(t, "source", src);
    g_free(src);
    g_free(L.slot);
    return t;
}

/* The churn events of the trace for N: at least three per live allocation, and at least 3
 * million, so a small N is timed over as many events as a large one. */
static size_t default_steady(size_t N) { return MAX((size_t)3000000, 3 * N); }

static int bench_scaling(const size_t *live, int nlive, unsigned streams, size_t steady_arg,
                         bool random_free, const char *const *specs, int nspecs, unsigned runs)
{
    printf("scaling: %u stream(s), %s churn, %u runs each; CPU time per event, median "
           "(min-max)\n",
           streams, random_free ? "random-free" : "FIFO", runs);
    for (int s = 0; s < nspecs; s++) {
        GError *err = NULL;
        gs_policy *p = gs_policy_new(specs[s], &err);
        if (!p) {
            fprintf(stderr, "bench_replay: %s\n", err->message);
            g_error_free(err);
            return 2;
        }
        printf("policy %s\n", specs[s]);
        printf("%10s %10s %10s  %-24s %-24s %-24s %s\n", "live", "events", "ramp ev",
               "whole ns/event", "ramp ns/event", "steady ns/event", "steady vs first");
        double first_steady = 0;
        for (int i = 0; i < nlive; i++) {
            size_t steady = steady_arg ? steady_arg : default_steady(live[i]);
            gs_trace *full = scaling_trace(live[i], streams, steady, random_free, false);
            gs_trace *ramp = scaling_trace(live[i], streams, steady, random_free, true);
            double whole[MAX_RUNS], rampv[MAX_RUNS], st[MAX_RUNS];
            bool stopped = false;
            for (unsigned k = 0; k < runs; k++) {
                timing a, b;
                if (!timed_replay(ramp, p, 1, 0, false, &b) ||
                    !timed_replay(full, p, 1, 0, false, &a)) {
                    gs_trace_free(full);
                    gs_trace_free(ramp);
                    gs_policy_free(p);
                    return 2;
                }
                stopped |= a.events < a.expected || b.events < b.expected;
                whole[k] = a.cpu_s * 1e9 / (double)full->n;
                rampv[k] = b.cpu_s * 1e9 / (double)ramp->n;
                st[k] = (a.cpu_s - b.cpu_s) * 1e9 / (double)(full->n - ramp->n);
            }
            double wm, wl, wh, rm, rl, rh, sm, sl, sh;
            summarize(whole, runs, &wm, &wl, &wh);
            summarize(rampv, runs, &rm, &rl, &rh);
            summarize(st, runs, &sm, &sl, &sh);
            if (i == 0) first_steady = sm;
            char a1[64], a2[64], a3[64];
            g_snprintf(a1, sizeof a1, "%.1f (%.1f-%.1f)", wm, wl, wh);
            g_snprintf(a2, sizeof a2, "%.1f (%.1f-%.1f)", rm, rl, rh);
            g_snprintf(a3, sizeof a3, "%.1f (%.1f-%.1f)", sm, sl, sh);
            printf("%10zu %10zu %10zu  %-24s %-24s %-24s %.2fx%s\n", live[i], full->n, ramp->n,
                   a1, a2, a3, sm / first_steady, stopped ? "  [a replay stopped early]" : "");
            fflush(stdout);
            gs_trace_free(full);
            gs_trace_free(ramp);
        }
        gs_policy_free(p);
    }
    return 0;
}

static int usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [TRACE]... [--policy SPEC]... [--repeat N] [--runs K] [--capacity SIZE]\n"
            "           [--continue-on-oom] [--raw]\n"
            "       %s --scaling [--live N]... [--streams S] [--steady M] [--random-free]\n"
            "                [--policy SPEC]... [--runs K]\n"
            "       %s --scaling-trace N [--streams S] [--steady M] [--random-free] -o FILE\n",
            argv0, argv0, argv0);
    return 2;
}

int main(int argc, char **argv)
{
    const char *paths[MAX_TRACES];
    const char *specs[MAX_SPECS];
    size_t live[MAX_LIVE];
    int npaths = 0, nspecs = 0, nlive = 0;
    unsigned repeat = 200, runs = 7, streams = 1;
    uint64_t capacity = 0;
    size_t steady = 0, trace_n = 0;
    bool continue_on_oom = false, raw = false, scaling = false, random_free = false;
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (strcmp(a, "--policy") == 0 && has && nspecs < MAX_SPECS) specs[nspecs++] = argv[++i];
        else if (strcmp(a, "--repeat") == 0 && has) repeat = (unsigned)atoi(argv[++i]);
        else if (strcmp(a, "--runs") == 0 && has) runs = (unsigned)atoi(argv[++i]);
        else if (strcmp(a, "--capacity") == 0 && has) {
            GError *err = NULL;
            if (!gs_parse_size(argv[++i], &capacity, &err)) {
                fprintf(stderr, "bench_replay: --capacity: %s\n", err->message);
                g_error_free(err);
                return 2;
            }
        } else if (strcmp(a, "--continue-on-oom") == 0) continue_on_oom = true;
        else if (strcmp(a, "--raw") == 0) raw = true;
        else if (strcmp(a, "--scaling") == 0) scaling = true;
        else if (strcmp(a, "--random-free") == 0) random_free = true;
        else if (strcmp(a, "--live") == 0 && has && nlive < MAX_LIVE)
            live[nlive++] = (size_t)strtoull(argv[++i], NULL, 10);
        else if (strcmp(a, "--streams") == 0 && has) streams = (unsigned)atoi(argv[++i]);
        else if (strcmp(a, "--steady") == 0 && has) steady = (size_t)strtoull(argv[++i], NULL, 10);
        else if (strcmp(a, "--scaling-trace") == 0 && has)
            trace_n = (size_t)strtoull(argv[++i], NULL, 10);
        else if (strcmp(a, "-o") == 0 && has) out = argv[++i];
        else if (a[0] != '-' && npaths < MAX_TRACES) paths[npaths++] = a;
        else return usage(argv[0]);
    }
    if (repeat == 0 || runs == 0 || runs > MAX_RUNS || streams == 0 || streams > 65536) {
        fprintf(stderr, "bench_replay: --repeat must be >= 1, --runs between 1 and %d, "
                        "--streams between 1 and 65536\n", MAX_RUNS);
        return 2;
    }
    if (nspecs == 0) specs[nspecs++] = "pytorch";

    if (trace_n) {
        if (!out) return usage(argv[0]);
        gs_trace *t = scaling_trace(trace_n, streams, steady ? steady : default_steady(trace_n),
                                    random_free, false);
        GError *err = NULL;
        gboolean ok = gs_trace_save(t, out, &err);
        if (!ok) {
            fprintf(stderr, "bench_replay: %s\n", err->message);
            g_error_free(err);
        } else {
            printf("%s: %zu events, %zu allocations\n", out, t->n, t->n_slots);
        }
        gs_trace_free(t);
        return ok ? 0 : 2;
    }
    if (scaling) {
        if (nlive == 0) {
            static const size_t dflt[] = {1000, 10000, 100000, 1000000};
            for (nlive = 0; nlive < 4; nlive++) live[nlive] = dflt[nlive];
        }
        return bench_scaling(live, nlive, streams, steady, random_free, specs, nspecs, runs);
    }
    if (npaths == 0) paths[npaths++] = GS_SOURCE_ROOT "/traces/data/gpt2.gstrace.gz";
    for (int i = 0; i < npaths; i++) {
        int rc = bench_trace(paths[i], specs, nspecs, repeat, runs, capacity, continue_on_oom, raw);
        if (rc) return rc;
    }
    return 0;
}
