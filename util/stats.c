/* stats.c - small statistics over measured samples (benchmarks, validate, calibration). */
#include <stdlib.h>

#include "util.h"

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double gs_median(double *v, size_t n)
{
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, dbl_cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
