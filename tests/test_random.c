/* test_random.c - thousands of seeded random alloc/free/empty_cache/private-pool sequences through every
 * policy setting, with and without a limit, on a reliable and on a failing device. After every
 * operation the heap check runs, and every byte is accounted for: the heap's statistics agree
 * with a model of the live requests kept here, and what the heap reserved agrees with what the
 * device handed out. */
#include <string.h>

#include "testutil.h"

static const char *const specs[] = {
    "pytorch",
    "pytorch:max_split_size_mb:40",
    "pytorch:roundup_power2_divisions:4",
    "pytorch:roundup_power2_divisions:[1:2,4:4,>:8],max_non_split_rounding_mb:30",
    "pytorch:garbage_collection_threshold:0.5,max_split_size_mb:64",
    "pytorch:expandable_segments:True",
    "pytorch:expandable_segments:True,max_split_size_mb:40,garbage_collection_threshold:0.5",
    "cupy",
    "stitch",
    "stitch:max_handle_mb:4",
    "stitch:slack:0",
    "stitch:slack:0.5,ahead:1",
    "stitch:headroom:0.5,grow:20MiB,ahead:1,fine:128MiB",
    "stitch:headroom:0.3,grow:8MiB,fine:8MiB,max_handle_mb:4",
    "preallocate",
    "preallocate:fit:first,fraction:1",
    "tlsf",
    "tlsf:sl_bits:2,pool_size:8MiB,align:512",
    "bfc",
    "bfc:allow_growth:true,TF_ENABLE_GPU_GARBAGE_COLLECTION:true,XLA_PYTHON_CLIENT_MEM_FRACTION:1",
    "rmm-pool:initial_pool_size:0,maximum_pool_size:256MiB",
    "rmm-arena:arena_size:192MiB",
    "cuda-async",
    "cuda-async:vmm:0",
    "cuda-async:vmm:1,small:1MiB,granularity:2MiB",
    "cuda-async:vmm:1,cudaMemPoolAttrReleaseThreshold:max",
};

/* Sequences per spec and mode. The default keeps .ci/test within its time (docs/testing.md):
 * under AddressSanitizer (.ci/test's second build) the heap check after every operation is
 * 10-20x slower, hence a third of the plain count. GS_TEST_LONG=1 in the environment runs ten
 * times as many, the long sweep to run before a change to the core lands. */
#ifdef __SANITIZE_ADDRESS__
#define SEQUENCES 40
#else
#define SEQUENCES 120
#endif
#define OPS 400
#define MAXLIVE 64

/* Sizes spanning both pools and every segment-size rule, biased towards collisions. */
static uint64_t random_size(GRand *r)
{
    switch (g_rand_int_range(r, 0, 6)) {
    case 0: return (uint64_t)g_rand_int_range(r, 0, 4096);
    case 1: return (uint64_t)g_rand_int_range(r, 4096, 1 << 20);
    case 2: return (uint64_t)g_rand_int_range(r, 1 << 20, 10 << 20);
    case 3: return (uint64_t)g_rand_int_range(r, 10 << 20, 120 << 20);
    case 4: return (uint64_t)(1 + g_rand_int_range(r, 0, 8)) << 20; /* exact MiB multiples */
    default: return (uint64_t)g_rand_int_range(r, 1, 300) * 512;
    }
}

static void run_sequence(const char *spec, uint32_t seed, bool limited, bool faulty)
{
    GRand *r = g_rand_new_with_seed(seed);
    /* policies whose segments are not whole 2 MiB pages (the device's granularity) */
    bool exact = g_str_has_prefix(spec, "cupy") || g_str_has_prefix(spec, "bfc") ||
                 g_str_has_prefix(spec, "rmm-pool") || g_str_has_prefix(spec, "rmm-arena");
    uint64_t limit = limited ? (uint64_t)g_rand_int_range(r, 64, 512) * MiB : 0;
    gs_sim_config sc = {.total_bytes = 1 * GiB};
    gs_backend *be = gs_sim_backend_new(&sc);
    if (faulty) {
        /* The calls where a real device runs out of memory or fails: cudaMalloc/cudaFree, and
         * cuMemCreate for expandable segments. */
        gs_faulty_config fc = {.mask = (1u << GS_CALL_MALLOC) | (1u << GS_CALL_FREE) |
                                       (1u << GS_CALL_PAGE_CREATE),
                               .probability = 0.05, .seed = seed,
                               .status = (seed & 1) ? GS_ERR_OOM : GS_ERR_DEVICE};
        be = gs_faulty_backend_new(be, &fc);
    }
    fixture f = fx_new_on(spec, be, limit);
    /* how the setting grows, from the policy (pool 0 is every family's large or only pool) */
    const gs_policy *pol = gs_heap_policy(f.heap);
    gs_stitch_conf scf;
    bool expandable = pol->ops->expandable_page && pol->ops->expandable_page(pol->cfg, 0);
    bool stitch = expandable && pol->ops->stitch && pol->ops->stitch(pol->cfg, 0, &scf);
    gs_block *live[MAXLIVE] = {0};
    gs_block *pending[MAXLIVE] = {0};
    uint64_t live_req = 0, live_sz = 0;
    for (int op = 0; op < OPS; op++) {
        int slot = g_rand_int_range(r, 0, MAXLIVE);
        int what = g_rand_int_range(r, 0, 100);
        if (what < 2) {
            gs_status st = gs_heap_empty_cache(f.heap);
            GS_CHECK(st == GS_OK || faulty);
            for (int i = 0; i < MAXLIVE; i++) /* the flush completes pending frees */
                GS_CHECK(st != GS_OK || pending[i] == NULL);
        } else if (what < 5) {
            /* private pools (CUDA graphs, MemPool): routes opened and closed, uses dropped,
             * pools emptied, among the other operations on the same blocks */
            uint32_t id = (uint32_t)g_rand_int_range(r, 1, 4);
            int kind = g_rand_int_range(r, 0, 3);
            if (kind == 0) {
                gs_status st = gs_heap_pool_begin(f.heap, id, g_rand_boolean(r),
                                                  (uint32_t)g_rand_int_range(r, 0, 2));
                GS_CHECK(st == GS_OK || st == GS_ERR_INVALID);
            } else if (kind == 1) {
                gs_heap_pool_end(f.heap, id);
            } else {
                gs_status st = gs_heap_pool_release(f.heap, id, g_rand_boolean(r));
                GS_CHECK(st == GS_OK || st == GS_ERR_INVALID || faulty);
            }
        } else if (what < 8 && pending[slot]) {
            gs_heap_free_complete(f.heap, pending[slot]);
            pending[slot] = NULL;
        } else if (live[slot]) {
            live_req -= live[slot]->requested;
            live_sz -= live[slot]->size;
            if (what < 20 && !pending[slot]) {
                pending[slot] = live[slot];
                gs_heap_free_request(f.heap, live[slot], &pending[slot]);
            } else {
                gs_heap_free(f.heap, live[slot]);
            }
            live[slot] = NULL;
        } else {
            uint64_t size = random_size(r);
            gs_block *b = NULL;
            gs_status st = gs_heap_malloc(f.heap, size, (uint32_t)g_rand_int_range(r, 0, 2), &b);
            if (st == GS_OK) {
                GS_CHECK_UINT(b->size, >=, size);
                GS_CHECK_UINT(b->requested, ==, size);
                live[slot] = b;
                live_req += size;
                live_sz += b->size;
            } else {
                GS_CHECK_MSG(st == GS_ERR_OOM || (faulty && st == GS_ERR_DEVICE),
                             "unexpected status %s", gs_strerror(st));
            }
        }
        check_heap(f.heap);
        const gs_stats *s = gs_heap_stats(f.heap);
        GS_CHECK_INT(s->allocated_bytes[GS_STAT_ALL].current, ==, (int64_t)live_sz);
        int64_t pend_req = 0;
        for (int i = 0; i < MAXLIVE; i++) pend_req += pending[i] ? (int64_t)pending[i]->requested : 0;
        GS_CHECK_INT(s->requested_bytes[GS_STAT_ALL].current, ==, (int64_t)live_req + pend_req);
        /* PyTorch checks the limit against the size a cudaMalloc would take, also when it maps
         * 20 MiB pages instead: an expandable segment may then overshoot it by under a page. */
        if (limit) GS_CHECK_UINT(gs_heap_reserved(f.heap), <=, limit + (expandable ? 18 * MiB : 0));
        /* the arena's superblocks never pass the arena */
        if (g_str_has_prefix(spec, "rmm-arena:arena_size:192MiB"))
            GS_CHECK_UINT(gs_heap_reserved(f.heap), <=, 192 * MiB);
        if (exact) {
            /* CuPy (and BFC's regions, RMM's pools) cudaMalloc exact sizes; the device hands out 2 MiB pages, so a segment's
             * last page may be partly unused (small segments share pages) */
            GS_CHECK_UINT(dev_used_bytes(f.be), >=, gs_heap_reserved(f.heap));
            GS_CHECK_UINT(dev_used_bytes(f.be), <=,
                          gs_heap_reserved(f.heap) +
                              (uint64_t)s->segment[GS_STAT_ALL].current * 2 * MiB);
        } else {
            GS_CHECK_UINT(dev_used_bytes(f.be), ==,
                          gs_heap_reserved(f.heap)); /* every byte is ours */
        }
    }
    for (int i = 0; i < MAXLIVE; i++) {
        if (live[i]) gs_heap_free(f.heap, live[i]);
        if (pending[i]) gs_heap_free_complete(f.heap, pending[i]);
    }
    check_heap(f.heap);
    const gs_stats *s = gs_heap_stats(f.heap);
    ck_assert_int_eq(s->allocated_bytes[GS_STAT_ALL].current, 0);
    ck_assert_int_eq(s->active_bytes[GS_STAT_ALL].current, 0);
    ck_assert_int_eq(s->requested_bytes[GS_STAT_ALL].current, 0);
    ck_assert_int_eq(s->inactive_split[GS_STAT_ALL].current, 0); /* all merged back */
    /* cumulative counters balance */
    ck_assert_int_eq(s->allocation[GS_STAT_ALL].allocated, s->allocation[GS_STAT_ALL].freed);
    ck_assert_int_eq(s->segment[GS_STAT_ALL].allocated - s->segment[GS_STAT_ALL].freed,
                     s->segment[GS_STAT_ALL].current);
    ck_assert_int_eq(s->reserved_bytes[GS_STAT_ALL].allocated - s->reserved_bytes[GS_STAT_ALL].freed,
                     s->reserved_bytes[GS_STAT_ALL].current);
    const gs_devcalls *c = gs_heap_devcalls(f.heap);
    if (expandable) {
        /* a device allocation is a mapping (one cuMemSetAccess each); no cudaMalloc at all */
        ck_assert_int_eq(s->segment[GS_STAT_ALL].allocated, 0);
        ck_assert_uint_eq(c->n[GS_CALL_MALLOC], 0);
        if (stitch) /* a growth maps (and gives access to) one handle or several */
            ck_assert_uint_le(s->num_device_alloc,
                              c->n[GS_CALL_SET_ACCESS] - c->failed[GS_CALL_SET_ACCESS]);
        else
            ck_assert_uint_eq(s->num_device_alloc,
                              c->n[GS_CALL_SET_ACCESS] - c->failed[GS_CALL_SET_ACCESS]);
        ck_assert_uint_le(s->num_device_free, c->n[GS_CALL_UNMAP]);
    } else {
        ck_assert_int_eq((int64_t)s->num_device_alloc, s->segment[GS_STAT_ALL].allocated);
        ck_assert_int_eq((int64_t)s->num_device_free, s->segment[GS_STAT_ALL].freed);
    }
    fx_free(&f);
    g_rand_free(r);
}

START_TEST(random_sequences)
{
    const char *spec = specs[_i / 3];
    int mode = _i % 3; /* 0: no limit, 1: limit, 2: limit and a failing device */
    uint32_t n = SEQUENCES * (g_strcmp0(g_getenv("GS_TEST_LONG"), "1") == 0 ? 10u : 1u);
    for (uint32_t seed = 1; seed <= n; seed++)
        run_sequence(spec, seed * 7919u + (uint32_t)_i, mode >= 1, mode == 2);
}
END_TEST

static Suite *random_suite(void)
{
    Suite *s = suite_create("random");
    TCase *tc = tcase_create("sequences");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, random_sequences, 0, (int)G_N_ELEMENTS(specs) * 3);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return run_suite(random_suite()); }
