/* bench_e2e.c - end to end (the speed targets): what a user waits for and what the machine
 * must hold when gpusim replays a trace file, parsing, setup, replay and the report included.
 *
 *   bench_e2e [--gpusim PATH] [--runs K] [--policy SPEC] TRACE...
 *
 * For each TRACE it runs `gpusim replay TRACE --policy SPEC --format json -o FILE` K times (default
 * 21; SPEC default pytorch; PATH default build/gpusim of the source tree) as a child process
 * and takes from wait4() its CPU time (user + system, which the kernel accounts exactly, so
 * short runs are measured without a timer's granularity), its wall time and its peak resident
 * memory. The same is done for a trace with no events (written to a temporary directory, with
 * the same options), whose peak memory is what the program needs before any event: the memory
 * per event is (peak RSS of the run - peak RSS of the empty run) / events. Printed per trace:
 * median and spread (min-max) of CPU and wall milliseconds, and the median bytes per event.
 *
 * The same trace in its text and its binary form (gpusim convert TRACE -o NAME.gsbin) gives
 * the two end-to-end figures of BENCHMARKS.md. A benchmark, not a test: it asserts nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "report.h"

#define MAX_RUNS 99

typedef struct {
    double cpu_ms, wall_ms;
    double rss_kib;
} run_cost;

/* One run of argv as a child, stdout and stderr to /dev/null; FALSE when it does not exit 0. */
static gboolean run_child(char *const argv[], run_cost *c)
{
    struct timespec w0, w1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    pid_t pid = fork();
    if (pid < 0) return FALSE;
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
            dup2(null, 1);
            dup2(null, 2);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0)
        if (errno != EINTR) return FALSE;
    clock_gettime(CLOCK_MONOTONIC, &w1);
    c->cpu_ms = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
                (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
    c->wall_ms = (double)(w1.tv_sec - w0.tv_sec) * 1e3 + (double)(w1.tv_nsec - w0.tv_nsec) / 1e6;
    c->rss_kib = (double)ru.ru_maxrss; /* Linux: KiB */
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

typedef struct {
    double cpu[3], wall[3], rss; /* median, min, max; rss: median */
} summary;

static void summarize(double *v, unsigned n, double out[3])
{
    out[0] = gs_median(v, n); /* sorts v */
    out[1] = v[0];
    out[2] = v[n - 1];
}

/* K runs of gpusim replay on path. */
static gboolean measure(const char *gpusim, const char *path, const char *spec, const char *out,
                        unsigned runs, summary *s)
{
    char *argv[] = {(char *)gpusim, "replay", (char *)path, "--policy", (char *)spec, "--format",
                    "json", "-o", (char *)out, NULL};
    double cpu[MAX_RUNS], wall[MAX_RUNS], rss[MAX_RUNS];
    for (unsigned k = 0; k < runs; k++) {
        run_cost c;
        if (!run_child(argv, &c)) {
            fprintf(stderr, "bench_e2e: %s replay %s failed\n", gpusim, path);
            return FALSE;
        }
        cpu[k] = c.cpu_ms;
        wall[k] = c.wall_ms;
        rss[k] = c.rss_kib;
    }
    double r3[3];
    summarize(cpu, runs, s->cpu);
    summarize(wall, runs, s->wall);
    summarize(rss, runs, r3);
    s->rss = r3[0];
    return TRUE;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench_e2e [--gpusim PATH] [--runs K] [--policy SPEC] TRACE...\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *gpusim = GS_BUILD_ROOT "/gpusim", *spec = "pytorch";
    unsigned runs = 21;
    int first = 1;
    for (; first < argc && argv[first][0] == '-'; first += 2) {
        if (first + 1 >= argc) return usage();
        if (strcmp(argv[first], "--gpusim") == 0) gpusim = argv[first + 1];
        else if (strcmp(argv[first], "--policy") == 0) spec = argv[first + 1];
        else if (strcmp(argv[first], "--runs") == 0) {
            runs = (unsigned)atoi(argv[first + 1]);
            if (runs < 1 || runs > MAX_RUNS) return usage();
        } else return usage();
    }
    if (first >= argc) return usage();

    char *dir = g_dir_make_tmp("gs-bench-e2e-XXXXXX", NULL);
    if (!dir) return 2;
    char *empty = g_build_filename(dir, "empty.gstrace", NULL);
    char *out = g_build_filename(dir, "out.json", NULL);
    gs_trace *et = gs_trace_new();
    gs_trace_set_meta(et, "device_total_bytes", "85017493504");
    GError *err = NULL;
    int rc = 0;
    summary base;
    if (!gs_trace_save(et, empty, &err)) {
        fprintf(stderr, "bench_e2e: %s\n", err->message);
        rc = 2;
    } else if (!measure(gpusim, empty, spec, out, runs, &base)) {
        rc = 2;
    }
    gs_trace_free(et);
    if (rc == 0)
        printf("%s replay TRACE --policy %s --format json -o FILE, %u runs each; CPU and wall ms: "
               "median (min-max); an empty trace: cpu %.1f ms, peak RSS %.0f KiB\n", gpusim, spec,
               runs, base.cpu[0], base.rss);
    for (int a = first; rc == 0 && a < argc; a++) {
        gs_trace *t = gs_trace_load(argv[a], 0, NULL, NULL, &err);
        if (!t) {
            fprintf(stderr, "bench_e2e: %s\n", err->message);
            rc = 2;
            break;
        }
        size_t n = t->n;
        gs_trace_free(t);
        summary s;
        if (!measure(gpusim, argv[a], spec, out, runs, &s)) {
            rc = 2;
            break;
        }
        printf("%-44s %8zu events  cpu %7.1f (%.1f-%.1f) ms  wall %7.1f (%.1f-%.1f) ms  "
               "peak %7.0f KiB  %5.1f B/event\n", argv[a], n, s.cpu[0], s.cpu[1], s.cpu[2],
               s.wall[0], s.wall[1], s.wall[2], s.rss,
               n ? (s.rss - base.rss) * 1024.0 / (double)n : 0.0);
        fflush(stdout);
    }
    g_unlink(empty);
    g_unlink(out);
    g_rmdir(dir);
    g_free(empty);
    g_free(out);
    g_free(dir);
    return rc;
}
