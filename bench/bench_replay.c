/* bench_replay.c - replay throughput: events per second of host time through the core and a
 * policy on the simulated device, excluding file parsing (the trace is loaded once, then
 * replayed REPEAT times per run; the setup of each run is outside the timed loop).
 *
 * Usage: bench_replay [TRACE] [--policy SPEC]... [--repeat N] [--runs K]
 * Prints one line per policy: median, min and max over K runs, in events per second.
 * A benchmark, not a test: it asserts nothing and is not run by 'meson test'.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

int main(int argc, char **argv)
{
    const char *path = NULL;
    const char *specs[16];
    int nspecs = 0;
    unsigned repeat = 200, runs = 7;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--policy") == 0 && i + 1 < argc && nspecs < 16) specs[nspecs++] = argv[++i];
        else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) repeat = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = (unsigned)atoi(argv[++i]);
        else if (argv[i][0] != '-') path = argv[i];
        else {
            fprintf(stderr, "usage: %s [TRACE] [--policy SPEC]... [--repeat N] [--runs K]\n", argv[0]);
            return 2;
        }
    }
    if (!path) path = GS_SOURCE_ROOT "/traces/data/gpt2.gstrace.gz";
    if (nspecs == 0) specs[nspecs++] = "pytorch";
    if (repeat == 0 || runs == 0 || runs > 99) {
        fprintf(stderr, "bench_replay: --repeat must be >= 1 and --runs between 1 and 99\n");
        return 2;
    }

    GError *err = NULL;
    gs_trace *t = gs_trace_load(path, 0, NULL, NULL, &err);
    if (!t) {
        fprintf(stderr, "bench_replay: %s\n", err->message);
        return 2;
    }
    printf("trace %s: %zu events; %u passes per run, %u runs\n", path, t->n, repeat, runs);
    for (int s = 0; s < nspecs; s++) {
        gs_policy *p = gs_policy_new(specs[s], &err);
        if (!p) {
            fprintf(stderr, "bench_replay: %s\n", err->message);
            return 2;
        }
        double rate[99];
        for (unsigned k = 0; k < runs; k++) {
            gs_replay_opts o = {.device_total = t->device_total, .repeat = repeat};
            gs_result r;
            gs_replay_run(t, p, &o, &r, NULL);
            rate[k] = (double)r.events / r.host_seconds;
            gs_result_clear(&r);
        }
        double med = gs_median(rate, runs); /* sorts rate */
        printf("%-36s median %6.2f M events/s  (min %.2f, max %.2f)\n", specs[s], med / 1e6,
               rate[0] / 1e6, rate[runs - 1] / 1e6);
        gs_policy_free(p);
    }
    gs_trace_free(t);
    return 0;
}
