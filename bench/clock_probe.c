/* clock_probe.c - the clock this process gets: a chain of dependent additions, one a cycle on
 * any current core, timed by CPU time. On a shared VM the figure moves with the host's load and
 * frequency (this project's 2-core VM gave 1.5-3.2 G a second within minutes:
 * bench/results/clock-2026-11-24/vm.txt), so a replay rate is only comparable with the clock
 * measured beside it: BENCHMARKS.md quotes both, and replay_speed.sh writes this probe's line
 * into its machine.txt.
 *
 *   bench_clock_probe [RUNS]   prints "clock: G cycles/s of CPU time, median (min-max) of RUNS"
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHAIN 200000000L /* about 0.1 s a run at 2 GHz */

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CHAIN additions, each waiting for the one before: the empty asm hides x from the optimiser, so
 * the loop is neither folded nor vectorised. (The compiler moves x through a second register
 * around the add; cores eliminate such moves, and a loop of the add alone, written in asm,
 * measured the same here.) */
static double one_run(void)
{
    unsigned long x = 0;
    double t0 = cpu_seconds();
    for (long i = 0; i < CHAIN; i++) {
        __asm__ volatile("" : "+r"(x));
        x += 1;
    }
    double dt = cpu_seconds() - t0;
    if (x != (unsigned long)CHAIN) abort(); /* uses x: the chain is kept */
    return (double)CHAIN / dt / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 5;
    if (runs < 1 || runs > 1000) {
        fprintf(stderr, "usage: bench_clock_probe [RUNS (1-1000)]\n");
        return 2;
    }
    double *g = malloc((size_t)runs * sizeof *g);
    if (!g) return 1;
    for (int i = 0; i < runs; i++) g[i] = one_run();
    qsort(g, (size_t)runs, sizeof *g, cmp_double);
    printf("clock: %.2f G cycles/s of CPU time, median (%.2f-%.2f) of %d\n", g[runs / 2], g[0],
           g[runs - 1], runs);
    free(g);
    return 0;
}
