/* calibration.c - device-call latency model: a table of (call, size) -> median microseconds,
 * interpolated in size.
 *
 * The built-in table is an H100 measurement (NVIDIA H100 80GB HBM3, driver 580.159.04, CUDA
 * 13.0; docs/fidelity.md §4 says how it was made), kept here as data. Another table in the same
 * CSV format loads with --calibration FILE.
 *
 * Rows marked (v) are the project's own measurements, not that measurement's: the calls as
 * gpusim's allocator makes them while replaying GPT-2 under expandable segments on the same H100
 * (gpusim validate --save-calibration; lab/results/h100-2026-11-22-validate/). The H100
 * table timed each VMM call in an isolated reserve-create-map-access-unmap-release cycle;
 * in a replay, cuMemCreate of a 20 MiB page was 15% cheaper and cuMemRelease 40% cheaper, and
 * the 95 GiB reservation of an expandable segment (9/8 of the device) costs 16 us where the
 * table's last rows extrapolated to about 100. cuMemSetAccess keeps the shared rows but is
 * charged per mapping in its range (simdevice.c says why).
 *
 * Which measured row stands for which call: a replayed program has written its memory before
 * freeing it, so cudaFree uses cudaFree_touched where the table has it (it is 5-20% dearer than
 * a free of untouched memory). Rows the simulator has no call for (cudaMallocAsync, grow_*,
 * granularity_*) are kept out of the model but are not errors.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>

#include "backend.h"

#include <glib.h>

/* The built-in table, a row each: op, size_bytes, median_us, p10_us, p90_us, n (the CSV's
 * columns). One list gives both the table's CSV text (builtin_csv: the measurement as written,
 * which gs_calibration_builtin_csv hands to whoever wants it, and which tests/test_backend.c
 * parses to check the compiled form against) and the compiled points the model reads, so a
 * replay does not parse text: parsing it took 555k instructions, a third of a short replay
 * (/tmp/ref's oomdie, 1277 events). */
#define H100_ROWS(R) \
    R(cudaMalloc, 512, 48.87, 48.30, 63.66, 41)                            \
    R(cudaFree, 512, 40.62, 40.04, 43.20, 41)                              \
    R(cudaMalloc, 4096, 49.51, 48.19, 52.52, 41)                           \
    R(cudaFree, 4096, 41.14, 40.07, 42.98, 41)                             \
    R(cudaMalloc, 65536, 50.46, 49.82, 52.66, 41)                          \
    R(cudaFree, 65536, 41.61, 41.05, 43.81, 41)                            \
    R(cudaMalloc, 1048576, 50.53, 49.75, 52.32, 41)                        \
    R(cudaFree, 1048576, 41.62, 41.05, 43.73, 41)                          \
    R(cudaMalloc, 2097152, 49.41, 48.81, 52.05, 41)                        \
    R(cudaFree, 2097152, 40.99, 40.52, 42.65, 41)                          \
    R(cudaMalloc, 20971520, 49.59, 48.08, 52.17, 41)                       \
    R(cudaFree, 20971520, 57.53, 55.97, 60.68, 41)                         \
    R(cudaMalloc, 67108864, 74.12, 53.64, 81.88, 41)                       \
    R(cudaFree, 67108864, 78.64, 76.21, 97.99, 41)                         \
    R(cudaMalloc, 268435456, 62.84, 59.45, 143.92, 41)                     \
    R(cudaFree, 268435456, 182.92, 172.27, 258.73, 41)                     \
    R(cudaMalloc, 1073741824, 200.48, 124.18, 296.34, 9)                   \
    R(cudaFree, 1073741824, 656.10, 596.86, 794.61, 9)                     \
    R(cudaMalloc, 4294967296, 633.88, 359.34, 696.70, 9)                   \
    R(cudaFree, 4294967296, 2483.03, 2256.67, 3152.25, 9)                  \
    R(cudaMalloc, 17179869184, 7292.58, 997.38, 93965.42, 9)               \
    R(cudaFree, 17179869184, 13052.70, 11101.53, 14021.89, 9)              \
    R(cudaFree_touched, 512, 44.03, 42.58, 65.07, 41)                      \
    R(cudaFree_touched, 4096, 42.03, 41.35, 79.20, 41)                     \
    R(cudaFree_touched, 65536, 43.54, 42.17, 51.05, 41)                    \
    R(cudaFree_touched, 1048576, 44.84, 42.96, 59.21, 41)                  \
    R(cudaFree_touched, 2097152, 45.72, 43.44, 53.06, 41)                  \
    R(cudaFree_touched, 20971520, 56.78, 54.13, 69.87, 41)                 \
    R(cudaFree_touched, 67108864, 89.78, 86.83, 109.95, 41)                \
    R(cudaFree_touched, 268435456, 209.81, 203.25, 226.79, 41)             \
    R(cudaFree_touched, 1073741824, 711.18, 677.17, 1752.24, 9)            \
    R(cudaFree_touched, 4294967296, 3037.11, 2837.40, 3492.02, 9)          \
    R(cudaFree_touched, 17179869184, 13956.67, 11874.10, 20073.06, 9)      \
    R(cudaMallocAsync, 512, 0.66, 0.59, 0.77, 41)                          \
    R(cudaFreeAsync, 512, 0.93, 0.89, 1.00, 41)                            \
    R(cudaMallocAsync, 4096, 0.67, 0.60, 0.70, 41)                         \
    R(cudaFreeAsync, 4096, 0.93, 0.84, 0.98, 41)                           \
    R(cudaMallocAsync, 65536, 0.67, 0.60, 0.70, 41)                        \
    R(cudaFreeAsync, 65536, 0.94, 0.88, 0.98, 41)                          \
    R(cudaMallocAsync, 1048576, 0.65, 0.61, 0.67, 41)                      \
    R(cudaFreeAsync, 1048576, 0.93, 0.89, 0.96, 41)                        \
    R(cudaMallocAsync, 2097152, 0.64, 0.55, 0.67, 41)                      \
    R(cudaFreeAsync, 2097152, 0.89, 0.83, 0.93, 41)                        \
    R(cudaMallocAsync, 20971520, 0.61, 0.54, 0.65, 41)                     \
    R(cudaFreeAsync, 20971520, 0.88, 0.77, 0.93, 41)                       \
    R(cudaMallocAsync, 67108864, 0.64, 0.58, 0.66, 41)                     \
    R(cudaFreeAsync, 67108864, 0.89, 0.83, 0.92, 41)                       \
    R(cudaMallocAsync, 268435456, 0.64, 0.57, 0.67, 41)                    \
    R(cudaFreeAsync, 268435456, 0.89, 0.84, 0.93, 41)                      \
    R(cudaMallocAsync, 1073741824, 0.65, 0.59, 8748.77, 9)                 \
    R(cudaFreeAsync, 1073741824, 0.92, 0.81, 10.79, 9)                     \
    R(cudaMallocAsync, 4294967296, 0.68, 0.62, 6061.73, 9)                 \
    R(cudaFreeAsync, 4294967296, 0.96, 0.84, 9.19, 9)                      \
    R(cudaMallocAsync, 17179869184, 0.94, 0.64, 26154.50, 9)               \
    R(cudaFreeAsync, 17179869184, 1.29, 1.05, 19.69, 9)                    \
    R(cudaMemGetInfo, 0, 7.48, 7.30, 7.68, 41)                             \
    R(granularity_min, 2097152, 0, 0, 0, 1)                                \
    R(granularity_rec, 2097152, 0, 0, 0, 1)                                \
    R(cuMemAddressReserve, 2097152, 0.98, 0.83, 1.30, 31)                  \
    R(cuMemCreate, 2097152, 16.30, 10.96, 58.45, 25)           /* (v) */   \
    R(cuMemMap, 2097152, 1.37, 1.23, 1.55, 31)                             \
    R(cuMemSetAccess, 2097152, 30.55, 29.16, 45.21, 31)                    \
    R(cuMemUnmap, 2097152, 33.50, 27.82, 135.19, 25)           /* (v) */   \
    R(cuMemRelease, 2097152, 18.55, 16.90, 57.95, 25)          /* (v) */   \
    R(cuMemAddressFree, 2097152, 0.77, 0.72, 0.99, 31)                     \
    R(cuMemAddressReserve, 20971520, 1.21, 1.02, 1.35, 31)                 \
    R(cuMemCreate, 20971520, 11.58, 9.77, 17.31, 4355)         /* (v) */   \
    R(cuMemMap, 20971520, 1.31, 1.22, 1.55, 31)                            \
    R(cuMemSetAccess, 20971520, 29.84, 29.08, 31.79, 31)                   \
    R(cuMemUnmap, 20971520, 20.82, 18.68, 27.58, 4355)         /* (v) */   \
    R(cuMemRelease, 20971520, 21.63, 17.56, 34.55, 4355)       /* (v) */   \
    R(cuMemAddressFree, 20971520, 0.88, 0.81, 1.21, 31)                    \
    R(cuMemAddressReserve, 268435456, 3.76, 3.38, 4.47, 31)                \
    R(cuMemCreate, 268435456, 45.84, 40.17, 55.98, 31)                     \
    R(cuMemMap, 268435456, 1.44, 1.26, 1.72, 31)                           \
    R(cuMemSetAccess, 268435456, 63.87, 61.76, 74.39, 31)                  \
    R(cuMemUnmap, 268435456, 33.21, 32.28, 35.20, 31)                      \
    R(cuMemRelease, 268435456, 187.18, 178.20, 204.88, 31)                 \
    R(cuMemAddressFree, 268435456, 4.18, 3.58, 5.51, 31)                   \
    R(cuMemAddressReserve, 1073741824, 4.10, 3.80, 4.44, 9)                \
    R(cuMemCreate, 1073741824, 126.37, 59.23, 145.23, 9)                   \
    R(cuMemMap, 1073741824, 1.69, 1.44, 2.14, 9)                           \
    R(cuMemSetAccess, 1073741824, 88.44, 86.06, 104.63, 9)                 \
    R(cuMemUnmap, 1073741824, 39.36, 38.80, 54.09, 9)                      \
    R(cuMemRelease, 1073741824, 655.77, 631.86, 823.95, 9)                 \
    R(cuMemAddressFree, 1073741824, 5.21, 4.95, 5.88, 9)                   \
    R(cuMemAddressReserve, 4294967296, 7.33, 4.94, 7.85, 9)                \
    R(cuMemAddressReserve, 95651102720, 15.56, 9.07, 24.06, 10) /* (v) */  \
    R(cuMemCreate, 4294967296, 487.85, 167.70, 523.19, 9)                  \
    R(cuMemMap, 4294967296, 2.75, 1.82, 3.18, 9)                           \
    R(cuMemSetAccess, 4294967296, 215.86, 209.19, 230.08, 9)               \
    R(cuMemUnmap, 4294967296, 74.31, 68.92, 82.41, 9)                      \
    R(cuMemRelease, 4294967296, 2802.35, 2478.56, 3068.42, 9)              \
    R(cuMemAddressFree, 4294967296, 9.65, 8.91, 13.28, 9)                  \
    R(cuMemAddressFree, 95651102720, 28.30, 25.94, 35.36, 10)  /* (v) */   \
    R(grow_2MiB_page, 2097152, 52.04, 48.88, 66.56, 512)                   \
    R(shrink_2MiB_page, 2097152, 40.96, 38.99, 47.03, 512)

static const char builtin_csv[] = "op,size_bytes,median_us,p10_us,p90_us,n\n"
#define CSV_ROW(op, size, med, p10, p90, n) #op "," #size "," #med "," #p10 "," #p90 "," #n "\n"
    H100_ROWS(CSV_ROW);
#undef CSV_ROW

/* Which call each op of the built-in table stands for (-1: no call of the model). The table
 * has cudaFree_touched rows, so they are cudaFree's and the plain cudaFree rows are not used:
 * parse()'s rule for any table. */
#define OP_cudaMalloc GS_CALL_MALLOC
#define OP_cudaFree (-1)
#define OP_cudaFree_touched GS_CALL_FREE
#define OP_cudaMallocAsync (-1)
#define OP_cudaFreeAsync (-1)
#define OP_cudaMemGetInfo GS_CALL_MEM_INFO
#define OP_granularity_min (-1)
#define OP_granularity_rec (-1)
#define OP_cuMemAddressReserve GS_CALL_VA_RESERVE
#define OP_cuMemCreate GS_CALL_PAGE_CREATE
#define OP_cuMemMap GS_CALL_MAP
#define OP_cuMemSetAccess GS_CALL_SET_ACCESS
#define OP_cuMemUnmap GS_CALL_UNMAP
#define OP_cuMemRelease GS_CALL_PAGE_RELEASE
#define OP_cuMemAddressFree GS_CALL_VA_RELEASE
#define OP_grow_2MiB_page (-1)
#define OP_shrink_2MiB_page (-1)

typedef struct {
    int kind; /* gs_call_kind, or -1 */
    uint64_t size;
    double us;
} builtin_row;

/* In the table's order: each call's rows ascend in size (tests/test_backend.c checks the
 * compiled table against a parse of builtin_csv). */
static const builtin_row builtin_rows[] = {
#define POINT_ROW(op, size, med, p10, p90, n) {OP_##op, size, med},
    H100_ROWS(POINT_ROW)
#undef POINT_ROW
};

typedef struct {
    uint64_t size;
    double us;
    size_t line; /* in the table's file, for messages */
} point;

/* Each call's points sorted by size, in one block. */
struct gs_calibration {
    const point *pts[GS_CALL_COUNT];
    guint n[GS_CALL_COUNT];
    point *block; /* what pts point into */
};

static int point_cmp(const void *a, const void *b)
{
    const point *x = a, *y = b;
    return x->size < y->size ? -1 : x->size > y->size;
}

/* Map a CSV op name to a call kind; returns -1 for rows the model does not use. */
static int kind_of(const char *op, bool *touched)
{
    *touched = false;
    if (strcmp(op, "cudaFree_touched") == 0) {
        *touched = true;
        return GS_CALL_FREE;
    }
    for (int k = 0; k < GS_CALL_COUNT; k++)
        if (strcmp(op, gs_call_name((gs_call_kind)k)) == 0) return k;
    return -1;
}

/* A table of n[k] points for each call k, in one block; the caller fills call k's at dst[k]. */
static gs_calibration *calibration_new(const guint n[GS_CALL_COUNT], point *dst[GS_CALL_COUNT])
{
    guint total = 0;
    for (int k = 0; k < GS_CALL_COUNT; k++) total += n[k];
    gs_calibration *c = g_new0(gs_calibration, 1);
    c->block = g_new(point, total ? total : 1);
    for (int k = 0, at = 0; k < GS_CALL_COUNT; at += (int)n[k], k++) {
        dst[k] = c->block + at;
        c->pts[k] = dst[k];
        c->n[k] = n[k];
    }
    return c;
}

static gs_calibration *parse(const char *name, const char *text, char **errmsg)
{
    GArray *pts[GS_CALL_COUNT];
    GArray *plain_free = g_array_new(FALSE, FALSE, sizeof(point));
    for (int k = 0; k < GS_CALL_COUNT; k++) pts[k] = g_array_new(FALSE, FALSE, sizeof(point));
    bool free_touched = false; /* FREE comes from cudaFree_touched rows */
    char **lines = g_strsplit(text, "\n", -1);
    bool ok = true;
    for (int i = 0; ok && lines[i]; i++) {
        char *line = g_strstrip(lines[i]);
        if (!*line || line[0] == '#' || g_str_has_prefix(line, "op,")) continue;
        char **f = g_strsplit(line, ",", -1);
        char *end1 = NULL, *end2 = NULL;
        guint nf = g_strv_length(f);
        errno = 0;
        /* a size is digits (strtoull would take "-5" as 2^64 - 5) */
        uint64_t size = nf >= 3 && g_ascii_isdigit(*g_strstrip(f[1]))
                            ? g_ascii_strtoull(f[1], &end1, 10) : 0;
        bool size_ok = end1 && !*end1 && errno == 0;
        double us = nf >= 3 ? g_ascii_strtod(f[2], &end2) : 0;
        if (nf < 3 || !size_ok || !*f[2] || *end2 || !(us >= 0) || !(us <= GS_CALIBRATION_MAX_US)) {
            *errmsg = gs_located_printf(name, (size_t)i + 1,
                                        "expected 'op,size_bytes,median_us,...' (a size in bytes, "
                                        "a time from 0 to %g us), got '%s'",
                                        GS_CALIBRATION_MAX_US, line);
            ok = false;
        } else {
            bool touched;
            int k = kind_of(f[0], &touched);
            point p = {size, us, (size_t)i + 1};
            if (k == GS_CALL_FREE && !touched) g_array_append_val(plain_free, p);
            else if (k >= 0) {
                g_array_append_val(pts[k], p);
                if (touched) free_touched = true;
            }
        }
        g_strfreev(f);
    }
    g_strfreev(lines);
    if (ok && !free_touched) g_array_append_vals(pts[GS_CALL_FREE], plain_free->data, plain_free->len);
    g_array_free(plain_free, TRUE);
    if (ok && pts[GS_CALL_MALLOC]->len == 0) {
        *errmsg = g_strdup_printf("%s: no cudaMalloc rows: not a latency table", name);
        ok = false;
    }
    /* One latency per call and size: two would make the slope between them 1/0 (an infinite or
     * NaN device time for every larger call). */
    for (int k = 0; ok && k < GS_CALL_COUNT; k++) {
        g_array_sort(pts[k], point_cmp);
        const point *p = (const point *)(void *)pts[k]->data;
        for (guint i = 1; ok && i < pts[k]->len; i++) {
            if (p[i].size != p[i - 1].size) continue;
            size_t first = MIN(p[i].line, p[i - 1].line), second = MAX(p[i].line, p[i - 1].line);
            *errmsg = gs_located_printf(name, second, "a second %s row for %" G_GUINT64_FORMAT
                                        " bytes (the first is line %zu)",
                                        gs_call_name((gs_call_kind)k), p[i].size, first);
            ok = false;
        }
    }
    gs_calibration *c = NULL;
    if (ok) {
        guint n[GS_CALL_COUNT];
        point *dst[GS_CALL_COUNT];
        for (int k = 0; k < GS_CALL_COUNT; k++) n[k] = pts[k]->len;
        c = calibration_new(n, dst);
        for (int k = 0; k < GS_CALL_COUNT; k++)
            if (n[k]) memcpy(dst[k], pts[k]->data, n[k] * sizeof(point));
    }
    for (int k = 0; k < GS_CALL_COUNT; k++) g_array_free(pts[k], TRUE);
    return c;
}

/* The compiled rows, gathered by call (each call's rows ascend in size already). */
gs_calibration *gs_calibration_builtin(void)
{
    guint n[GS_CALL_COUNT] = {0};
    for (size_t i = 0; i < G_N_ELEMENTS(builtin_rows); i++)
        if (builtin_rows[i].kind >= 0) n[builtin_rows[i].kind]++;
    point *dst[GS_CALL_COUNT];
    gs_calibration *c = calibration_new(n, dst);
    for (size_t i = 0; i < G_N_ELEMENTS(builtin_rows); i++) {
        const builtin_row *r = &builtin_rows[i];
        /* line: the row's in builtin_csv, after its header */
        if (r->kind >= 0) *dst[r->kind]++ = (point){r->size, r->us, i + 2};
    }
    return c;
}

const char *gs_calibration_builtin_csv(void) { return builtin_csv; }

gs_calibration *gs_calibration_load(const char *path, char **errmsg)
{
    char *text = NULL;
    size_t len = 0;
    GError *e = NULL;
    if (!gs_read_text(path, &text, &len, &e)) { /* "PATH: strerror", or a NUL byte refused */
        *errmsg = g_strdup(e->message);
        g_error_free(e);
        return NULL;
    }
    gs_calibration *c = parse(path, text, errmsg);
    g_free(text);
    return c;
}

/* Linear in size between measured points. Below the first point: the first value (fixed costs
 * dominate small calls). Beyond the last: extended along the last segment's slope when that
 * grows (cudaFree is about linear in size at the top of the table), else held. */
double gs_calibration_us(const gs_calibration *c, gs_call_kind k, uint64_t size)
{
    if (!c || (unsigned)k >= GS_CALL_COUNT) return 0;
    guint n = c->n[k];
    if (n == 0) return 0;
    const point *p = c->pts[k];
    if (size <= p[0].size || n == 1) return p[0].us;
    guint i = 1;
    while (i < n && p[i].size < size) i++;
    if (i == n) i = n - 1; /* beyond the end: use the last segment */
    const point *lo = &p[i - 1], *hi = &p[i];
    if (size == hi->size) return hi->us; /* a measured size: its own time, not a rounding of it */
    double slope = (hi->us - lo->us) / (double)(hi->size - lo->size);
    if (size > hi->size && slope < 0) return hi->us;
    /* between two times >= 0 (and beyond them, rising), so >= 0 but for rounding: a falling
     * segment down to 0 us gave -2.8e-14 */
    double us = lo->us + slope * (double)(size - lo->size);
    return us > 0 ? us : 0;
}

void gs_calibration_free(gs_calibration *c)
{
    if (!c) return;
    g_free(c->block);
    g_free(c);
}

static int sample_cmp(const void *a, const void *b)
{
    const gs_call_sample *x = a, *y = b;
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    return x->size < y->size ? -1 : x->size > y->size;
}

bool gs_calibration_save(const char *path, gs_call_sample *x, size_t n, const gs_calibration *base,
                         char **errmsg)
{
    qsort(x, n, sizeof *x, sample_cmp);
    GString *s = g_string_new("op,size_bytes,median_us,p10_us,p90_us,n\n");
    bool measured[GS_CALL_COUNT] = {false};
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        guint cls = g_bit_storage(x[i].size);
        while (j < n && x[j].kind == x[i].kind && g_bit_storage(x[j].size) == cls) j++;
        size_t m = j - i;
        double *us = g_new(double, m);
        for (size_t k = 0; k < m; k++) us[k] = x[i + k].us;
        double med = gs_median(us, m); /* sorts us */
        g_string_append_printf(s, "%s,%" G_GUINT64_FORMAT ",%.2f,%.2f,%.2f,%zu\n",
                               gs_call_name(x[i].kind), x[i + m / 2].size, med, us[m / 10],
                               us[m - 1 - m / 10], m);
        measured[x[i].kind] = true;
        g_free(us);
        i = j;
    }
    for (int k = 0; base && k < GS_CALL_COUNT; k++) {
        if (measured[k]) continue;
        for (guint p = 0; p < base->n[k]; p++) {
            const point *pt = &base->pts[k][p];
            g_string_append_printf(s, "%s,%" G_GUINT64_FORMAT ",%.2f,,,0\n",
                                   gs_call_name((gs_call_kind)k), pt->size, pt->us);
        }
    }
    GError *e = NULL;
    bool ok = gs_write_whole(path, s->str, s->len, &e); /* temp file + rename */
    if (!ok) {
        *errmsg = g_strdup(e->message);
        g_error_free(e);
    }
    g_string_free(s, TRUE);
    return ok;
}
