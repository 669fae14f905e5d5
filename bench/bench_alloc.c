/* bench_alloc.c - host time of one allocation and its free, on a real GPU:
 *
 *   gpusim        gs_heap_malloc + gs_heap_free, pytorch policy on the CUDA backend, served from
 *                 the cache (the block was allocated and freed once before timing)
 *   gpusim.so     gpusim_malloc + gpusim_free through libgpusim_torch.so, as PyTorch calls them
 *                 (adds the library's mutex and its pointer table)
 *   mallocasync   cudaMallocAsync + cudaFreeAsync on the default stream, from the device's
 *                 default memory pool (a pool hit after the first pair)
 *   malloc        cudaMalloc + cudaFree
 *
 * For each size and method: ROUNDS rounds of PAIRS pairs, each round timed as a whole on the
 * monotonic clock; printed are the median, 10th and 90th percentile of the per-pair time over
 * the rounds, in nanoseconds, as CSV on stdout. A benchmark, not a test: run it on the device
 * (lab/device_validate.sh) and record what it prints in BENCHMARKS.md.
 *
 *   bench_alloc [PATH/TO/libgpusim_torch.so]
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "report.h"
#include "validate.h"

#define ROUNDS 21

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

typedef struct {
    const char *name;
    /* one pair; returns non-zero on failure */
    int (*pair)(void *ctx, size_t size);
    void *ctx;
    int pairs; /* per round */
} method;

static void run(const method *m, size_t size)
{
    double per_pair[ROUNDS];
    if (m->pair(m->ctx, size)) { /* warm-up: the first pair fills the cache or the pool */
        printf("%s,%zu,failed,,\n", m->name, size);
        return;
    }
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_ns();
        for (int i = 0; i < m->pairs; i++)
            if (m->pair(m->ctx, size)) {
                printf("%s,%zu,failed,,\n", m->name, size);
                return;
            }
        per_pair[r] = (now_ns() - t0) / m->pairs;
    }
    double med = gs_median(per_pair, ROUNDS); /* sorts per_pair */
    printf("%s,%zu,%.1f,%.1f,%.1f\n", m->name, size, med, per_pair[ROUNDS / 10],
           per_pair[ROUNDS - 1 - ROUNDS / 10]);
    fflush(stdout);
}

static int gpusim_pair(void *ctx, size_t size)
{
    gs_block *b = NULL;
    if (gs_heap_malloc(ctx, size, 0, &b) != GS_OK) return 1;
    gs_heap_free(ctx, b);
    return 0;
}

typedef struct {
    void *(*m)(ssize_t, int, void *);
    void (*f)(void *, ssize_t, int, void *);
} so_entry;

static int so_pair(void *ctx, size_t size)
{
    so_entry *e = ctx;
    void *p = e->m((ssize_t)size, 0, NULL);
    if (!p) return 1;
    e->f(p, (ssize_t)size, 0, NULL);
    return 0;
}

static int async_pair(void *ctx, size_t size)
{
    void *p = NULL;
    if (cudaMallocAsync(&p, size, 0) != cudaSuccess) return 1;
    return cudaFreeAsync(p, 0) != cudaSuccess;
}

static int malloc_pair(void *ctx, size_t size)
{
    void *p = NULL;
    if (cudaMalloc(&p, size) != cudaSuccess) return 1;
    return cudaFree(p) != cudaSuccess;
}

int main(int argc, char **argv)
{
    char *msg = NULL;
    gs_backend *be = gs_cuda_backend_new(0, &msg);
    if (!be) {
        fprintf(stderr, "bench_alloc: %s\n", msg);
        return 77;
    }
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    int drv = 0, rt = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    printf("# %s, driver API %d, runtime %d; %d rounds, per-pair ns\n", prop.name, drv, rt, ROUNDS);
    gs_policy *pol = gs_policy_new("pytorch", NULL);
    gs_heap *h = gs_heap_new(pol, be, NULL);
    so_entry so = {0};
    if (argc > 1) {
        void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            fprintf(stderr, "bench_alloc: %s\n", dlerror());
            return 1;
        }
        so.m = (void *(*)(ssize_t, int, void *))(uintptr_t)dlsym(lib, "gpusim_malloc");
        so.f = (void (*)(void *, ssize_t, int, void *))(uintptr_t)dlsym(lib, "gpusim_free");
    }
    const method methods[] = {
        {"gpusim", gpusim_pair, h, 100000},
        {"gpusim.so", so_pair, &so, 100000},
        {"mallocasync", async_pair, NULL, 100000},
        {"malloc", malloc_pair, NULL, 50},
    };
    const size_t sizes[] = {512, 65536, 1 << 20, 8 << 20, 64 << 20};
    printf("method,size_bytes,median_ns,p10_ns,p90_ns\n");
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++)
            if (methods[m].pair != so_pair || so.m) run(&methods[m], sizes[s]);
    cudaDeviceSynchronize();
    gs_heap_free_all(h);
    gs_policy_free(pol);
    gs_backend_destroy(be);
    return 0;
}
