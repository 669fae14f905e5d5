/* testutil.h - shared fixtures for the Check suites: a heap on a simulated device under a policy
 * spec, and allocation helpers that run the invariant check after every operation. */
#ifndef GS_TESTUTIL_H
#define GS_TESTUTIL_H

#include <check.h>
#include <stdlib.h>

#include "backend.h"
#include "core.h"
#include "policies.h"

typedef struct {
    gs_policy *policy;
    gs_backend *be;
    gs_heap *heap;
} fixture;

/* A heap under spec on a simulated device of total bytes, with an allocator limit. */
static inline fixture fx_new_on(const char *spec, gs_backend *be, uint64_t limit)
{
    fixture f;
    GError *err = NULL;
    f.policy = gs_policy_new(spec, &err);
    ck_assert_msg(f.policy != NULL, "policy %s: %s", spec, err ? err->message : "?");
    f.be = be;
    gs_heap_config hc = {.limit = limit};
    f.heap = gs_heap_new(f.policy, f.be, &hc);
    return f;
}

static inline fixture fx_new(const char *spec, uint64_t total, uint64_t limit)
{
    gs_sim_config sc = {.total_bytes = total};
    return fx_new_on(spec, gs_sim_backend_new(&sc), limit);
}

static inline void fx_free(fixture *f)
{
    gs_heap_free_all(f->heap);
    gs_backend_destroy(f->be);
    gs_policy_free(f->policy);
}

/* Checks for hot loops. Check's ck_assert_* records its place with a write(2) on every call,
 * failing or not: test_random made about 20,000 system calls a second that way, half of its
 * run time. These compare first and reach Check only on a failure (the same message form). */
#define GS_CHECK(cond)                                                         \
    do {                                                                       \
        if (G_UNLIKELY(!(cond))) ck_abort_msg("Assertion '%s' failed", #cond); \
    } while (0)
#define GS_CHECK_MSG(cond, ...)                             \
    do {                                                    \
        if (G_UNLIKELY(!(cond))) ck_abort_msg(__VA_ARGS__); \
    } while (0)
#define GS_CHECK_CMP(type, fmt, a, op, b)                                                         \
    do {                                                                                          \
        type gs_a_ = (type)(a), gs_b_ = (type)(b);                                                \
        if (G_UNLIKELY(!(gs_a_ op gs_b_)))                                                        \
            ck_abort_msg("Assertion '%s %s %s' failed: %s == %" fmt ", %s == %" fmt, #a, #op, #b, \
                         #a, gs_a_, #b, gs_b_);                                                   \
    } while (0)
#define GS_CHECK_UINT(a, op, b) GS_CHECK_CMP(uint64_t, G_GUINT64_FORMAT, a, op, b)
#define GS_CHECK_INT(a, op, b) GS_CHECK_CMP(int64_t, G_GINT64_FORMAT, a, op, b)

static inline void check_heap(const gs_heap *h)
{
    char *why = NULL;
    int n = gs_heap_check(h, &why);
    GS_CHECK_MSG(n == 0, "heap check: %d violations, first: %s", n, why ? why : "");
    g_free(why);
}

/* Allocate and check; fails the test if the allocation fails. */
static inline gs_block *xalloc(gs_heap *h, uint64_t size, uint32_t stream)
{
    gs_block *b = NULL;
    gs_status st = gs_heap_malloc(h, size, stream, &b);
    GS_CHECK_MSG(st == GS_OK, "malloc(%" G_GUINT64_FORMAT "): %s", size, gs_strerror(st));
    check_heap(h);
    return b;
}

static inline void xfree(gs_heap *h, gs_block *b)
{
    gs_heap_free(h, b);
    check_heap(h);
}

#define STAT(h, name, t) (gs_heap_stats(h)->name[GS_STAT_##t])

/* The device's free and used bytes, as cudaMemGetInfo gives them (not counted as a call). */
static inline uint64_t dev_free_bytes(gs_backend *be)
{
    uint64_t fr, tot;
    GS_CHECK_INT(gs_dev_mem_info(be, NULL, &fr, &tot), ==, GS_OK);
    return fr;
}

static inline uint64_t dev_used_bytes(gs_backend *be)
{
    uint64_t fr, tot;
    GS_CHECK_INT(gs_dev_mem_info(be, NULL, &fr, &tot), ==, GS_OK);
    return tot - fr;
}

/* The end of a test that freed every block: empty_cache gives every byte back to the device. */
static inline void fx_free_emptied(fixture *f)
{
    ck_assert_int_eq(gs_heap_empty_cache(f->heap), GS_OK);
    check_heap(f->heap);
    ck_assert_uint_eq(dev_used_bytes(f->be), 0);
    fx_free(f);
}

/* Run a suite; fork: one process per test (Check's default, so a crash is one failure), or all
 * in this process (state built by one test, such as a CUDA context or converted files, is
 * reused by the next). */
static inline int run_suite_forking(Suite *s, bool fork)
{
    SRunner *sr = srunner_create(s);
    if (!fork) srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

static inline int run_suite(Suite *s) { return run_suite_forking(s, true); }

#define MiB GS_MiB
#define GiB GS_GiB

#endif
