/* bench_bound.c - the cost of a trace's bound (sim/bound.h): the peak of live requests and the
 * offline planner, computed once per trace by every replay command. CPU time of the process
 * (CLOCK_PROCESS_CPUTIME_ID) per computation, median and spread (min-max) over the runs, with
 * the numbers it found.
 *
 *   bench_bound TRACE... [--runs K] [--planner auto|greedy|first-fit|banded]
 *
 * --planner picks the offline planner (sim/bound.h; auto, the default, is what every replay
 * uses), to compare the heuristics' peaks and costs on the same traces.
 *
 * A benchmark, not a test: it asserts nothing and is not run by 'meson test'.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bound.h"

#define MAX_RUNS 99

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    unsigned runs = 5;
    gs_plan_method meth = GS_PLAN_AUTO;
    int rc = 0;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--planner") == 0 && i + 1 < argc) {
            const char *v = argv[++i];
            if (strcmp(v, "auto") == 0) meth = GS_PLAN_AUTO;
            else if (strcmp(v, "greedy") == 0) meth = GS_PLAN_GREEDY;
            else if (strcmp(v, "first-fit") == 0) meth = GS_PLAN_FIRST_FIT;
            else if (strcmp(v, "banded") == 0) meth = GS_PLAN_BANDED;
            else {
                fprintf(stderr, "bench_bound: --planner takes auto, greedy, first-fit or banded\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
            runs = (unsigned)atoi(argv[++i]);
            if (runs < 1 || runs > MAX_RUNS) {
                fprintf(stderr, "bench_bound: --runs takes 1 to %d\n", MAX_RUNS);
                return 2;
            }
        }
    printf("trace events allocations lower_bound_bytes offline_bytes offline/lower cpu_ms_median "
           "(min-max), %u runs\n", runs);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 || strcmp(argv[i], "--planner") == 0) {
            i++;
            continue;
        }
        GError *err = NULL;
        gs_trace *t = gs_trace_load(argv[i], 0, NULL, NULL, &err);
        if (!t) {
            fprintf(stderr, "bench_bound: %s\n", err->message);
            g_error_free(err);
            rc = 2;
            continue;
        }
        double ms[MAX_RUNS];
        gs_bound *b = NULL;
        for (unsigned k = 0; k < runs; k++) {
            gs_bound_free(b);
            double c0 = cpu_s();
            b = gs_bound_compute_with(t, meth);
            ms[k] = (cpu_s() - c0) * 1e3;
        }
        double med = gs_median(ms, runs);
        printf("%s %zu %zu %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT " %.4f %.2f (%.2f-%.2f)\n",
               argv[i], t->n, t->n_slots, b->lower_bound_bytes, b->offline_bytes,
               b->lower_bound_bytes ? (double)b->offline_bytes / (double)b->lower_bound_bytes : 1.0,
               med, ms[0], ms[runs - 1]);
        gs_bound_free(b);
        gs_trace_free(t);
    }
    return rc;
}
