/* test_families.c - the policy families beyond PyTorch's and CuPy's: preallocate,
 * tlsf, bfc, rmm-pool, rmm-arena and cuda-async on a heap, with the heap check after every operation (xalloc, xfree): their
 * rounding, the block each picks, how each grows, what each gives back, and their config
 * errors. The three optional hooks they use (pick, grow, keeps_cache) are core/policy.h's. */
#include <string.h>

#include "testutil.h"

#define DEV (4 * GiB)

static void expect_error(const char *spec, const char *want)
{
    GError *err = NULL;
    gs_policy *p = gs_policy_new(spec, &err);
    ck_assert_msg(p == NULL, "%s: accepted", spec);
    ck_assert_msg(strstr(err->message, want) != NULL, "%s: message '%s' lacks '%s'", spec,
                  err->message, want);
    g_error_free(err);
}

static gs_status try_alloc(gs_heap *h, uint64_t size, gs_block **b)
{
    gs_status st = gs_heap_malloc(h, size, 0, b);
    check_heap(h);
    return st;
}

/* ---- preallocate ---- */

START_TEST(preallocate_one_arena_of_the_fraction)
{
    fixture f = fx_new("preallocate:fraction:0.5", DEV, 1 * GiB);
    gs_block *a = xalloc(f.heap, 1000, 0);
    ck_assert_uint_eq(a->size, 1024); /* 256-byte alignment */
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 512 * MiB); /* half the limit */
    gs_block *b = xalloc(f.heap, 100 * MiB, 1); /* another stream: same arena */
    ck_assert_ptr_eq(b->seg, a->seg);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_device_alloc, 1);
    /* larger than what is left: an OOM, no second arena, nothing released */
    gs_block *c = NULL;
    ck_assert_int_eq(try_alloc(f.heap, 500 * MiB, &c), GS_ERR_OOM);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_device_alloc, 1);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_alloc_retries, 0);
    xfree(f.heap, a);
    xfree(f.heap, b);
    /* empty_cache keeps the arena */
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    check_heap(f.heap);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 512 * MiB);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_device_free, 0);
    fx_free(&f);
}
END_TEST

/* A family that grows its own way has no private pools (core.h): a CUDA graph's route is
 * accepted and ignored, and its requests come from the one arena like any other. */
START_TEST(preallocate_has_no_private_pools)
{
    fixture f = fx_new("preallocate:fraction:0.5", DEV, 1 * GiB);
    gs_block *a = xalloc(f.heap, 1000, 0);
    ck_assert_int_eq(gs_heap_pool_begin(f.heap, 1, false, 0), GS_OK);
    gs_block *b = xalloc(f.heap, 100 * MiB, 0);
    ck_assert_ptr_eq(b->seg, a->seg);
    ck_assert_uint_eq(gs_pool_private(b->pool), 0);
    ck_assert_uint_eq(gs_heap_pool_id(f.heap, 1), 0); /* no pool was made */
    gs_heap_pool_end(f.heap, 1);
    ck_assert_int_eq(gs_heap_pool_release(f.heap, 1, true), GS_OK);
    ck_assert_int_eq(gs_heap_pool_release(f.heap, 0, false), GS_ERR_INVALID);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_device_alloc, 1);
    xfree(f.heap, a);
    xfree(f.heap, b);
    check_heap(f.heap);
    fx_free(&f);
}
END_TEST

START_TEST(preallocate_size_without_limit)
{
    fixture f = fx_new("preallocate:size:64MiB", DEV, 0);
    gs_block *a = xalloc(f.heap, 1, 0);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 64 * MiB);
    xfree(f.heap, a);
    fx_free(&f);
    /* no limit: a fraction of the device */
    f = fx_new("preallocate", DEV, 0);
    a = xalloc(f.heap, 1, 0);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), (uint64_t)(0.9 * 4 * 1024) / 2 * 2 * MiB);
    xfree(f.heap, a);
    fx_free(&f);
}
END_TEST

/* Holes of 3 MiB at the low end and 1 MiB higher up: best fit takes the 1 MiB hole for a
 * 1 MiB request, first fit the lowest hole that fits. */
static uint64_t hole_choice(const char *spec)
{
    fixture f = fx_new(spec, DEV, 0);
    gs_block *a = xalloc(f.heap, 3 * MiB, 0);
    gs_block *k1 = xalloc(f.heap, 1 * MiB, 0);
    gs_block *b = xalloc(f.heap, 1 * MiB, 0);
    gs_block *k2 = xalloc(f.heap, 1 * MiB, 0);
    uint64_t base = a->addr, hole_b = b->addr;
    xfree(f.heap, a);
    xfree(f.heap, b);
    gs_block *c = xalloc(f.heap, 1 * MiB, 0);
    uint64_t off = c->addr - base;
    ck_assert(c->addr == base || c->addr == hole_b);
    xfree(f.heap, c);
    xfree(f.heap, k1);
    xfree(f.heap, k2);
    ck_assert_uint_eq(gs_pool_count(f.heap, 0), 1); /* everything merged back into the arena */
    fx_free(&f);
    return off;
}

START_TEST(preallocate_best_and_first_fit)
{
    ck_assert_uint_eq(hole_choice("preallocate:size:64MiB"), 4 * MiB);
    ck_assert_uint_eq(hole_choice("preallocate:size:64MiB,fit:best"), 4 * MiB);
    ck_assert_uint_eq(hole_choice("preallocate:size:64MiB,fit:first"), 0);
}
END_TEST

START_TEST(preallocate_config_errors)
{
    expect_error("preallocate:fraction:1.5", "fraction");
    expect_error("preallocate:fraction:0", "fraction");
    expect_error("preallocate:fit:worst", "best or first");
    expect_error("preallocate:size:1KiB", "size");
    expect_error("preallocate:align:300", "power of two");
    expect_error("preallocate:max_split_size_mb:20", "unknown key");
}
END_TEST

/* ---- tlsf ---- */

START_TEST(tlsf_search_size_is_the_next_class_edge)
{
    gs_policy *p = gs_policy_new("tlsf", NULL);
    ck_assert_ptr_nonnull(p);
    /* below align << 5 = 8 KiB: classes 256 bytes wide, an aligned size is its own edge */
    ck_assert_uint_eq(gs_tlsf_search_size(p->cfg, 4096), 4096);
    /* [64, 128) MiB in 32 classes of 2 MiB */
    ck_assert_uint_eq(gs_tlsf_search_size(p->cfg, 100 * MiB), 100 * MiB);
    ck_assert_uint_eq(gs_tlsf_search_size(p->cfg, 100 * MiB + 256), 102 * MiB);
    /* the edge may be the next power of two */
    ck_assert_uint_eq(gs_tlsf_search_size(p->cfg, 127 * MiB), 128 * MiB);
    gs_policy_free(p);
    p = gs_policy_new("tlsf:sl_bits:1", NULL);
    ck_assert_uint_eq(gs_tlsf_search_size(p->cfg, 65 * MiB), 96 * MiB);
    gs_policy_free(p);
}
END_TEST

START_TEST(tlsf_good_fit_passes_over_own_class)
{
    /* Pools of 64 MiB; a free block of 65 MiB + 512 (class [64, 66) MiB) does not serve a request
     * of 65 MiB + 256, whose search starts at 66 MiB: TLSF grows instead. */
    fixture f = fx_new("tlsf", DEV, 0);
    gs_block *a = xalloc(f.heap, 65 * MiB + 512, 0); /* a pool of 66 MiB of its own */
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 66 * MiB);
    /* 1 MiB - 512 left in that pool: a request of 1 MiB - 512 searches from 1 MiB and would
     * grow; one of 512 KiB is served there */
    gs_block *k = xalloc(f.heap, 512 * 1024, 0);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 66 * MiB);
    ck_assert_ptr_eq(k->seg, a->seg);
    xfree(f.heap, a);
    gs_block *b = xalloc(f.heap, 65 * MiB + 256, 1);
    ck_assert_ptr_ne(b->seg, k->seg);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 66 * MiB + 66 * MiB);
    /* a small request takes the smallest block whose class serves it: the first pool's
     * remainder (512 KiB - 512), not the free 65 MiB block */
    gs_block *c = xalloc(f.heap, 4096, 0);
    ck_assert_ptr_eq(c->seg, k->seg);
    ck_assert_uint_eq(c->addr, k->addr + 512 * 1024);
    xfree(f.heap, b);
    xfree(f.heap, c);
    xfree(f.heap, k);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK); /* wholly free pools go back */
    check_heap(f.heap);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 0);
    fx_free(&f);
}
END_TEST

START_TEST(tlsf_grows_by_pool_size_and_retries_after_release)
{
    fixture f = fx_new("tlsf:pool_size:16MiB", DEV, 40 * MiB);
    gs_block *a = xalloc(f.heap, 1 * MiB, 0);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 16 * MiB);
    gs_block *b = xalloc(f.heap, 16 * MiB, 0); /* a pool of its own, 16 MiB */
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 32 * MiB);
    xfree(f.heap, b);
    /* 20 MiB does not fit the 8 MiB left under the limit: the free 16 MiB pool is given back
     * and growth tried again (the counted retry) */
    gs_block *c = xalloc(f.heap, 20 * MiB, 0);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_alloc_retries, 1);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 16 * MiB + 20 * MiB);
    gs_block *d = NULL;
    ck_assert_int_eq(try_alloc(f.heap, 30 * MiB, &d), GS_ERR_OOM);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_ooms, 1);
    xfree(f.heap, a);
    xfree(f.heap, c);
    fx_free(&f);
}
END_TEST

START_TEST(tlsf_config_errors)
{
    expect_error("tlsf:sl_bits:7", "sl_bits");
    expect_error("tlsf:sl_bits:x", "sl_bits");
    expect_error("tlsf:pool_size:1MiB", "pool_size");
    expect_error("tlsf:align:4", "power of two");
}
END_TEST

/* ---- bfc ---- */

START_TEST(bfc_preallocates_the_fraction)
{
    fixture f = fx_new("bfc", DEV, 1 * GiB);
    gs_block *a = xalloc(f.heap, 1, 0);
    ck_assert_uint_eq(a->size, 256);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 768 * MiB); /* 0.75 of the limit */
    gs_block *b = NULL;
    ck_assert_int_eq(try_alloc(f.heap, 768 * MiB, &b), GS_ERR_OOM);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_device_alloc, 1);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_alloc_retries, 0); /* JAX: no GC */
    xfree(f.heap, a);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 768 * MiB); /* kept */
    fx_free(&f);
}
END_TEST

START_TEST(bfc_regions_double_with_allow_growth)
{
    fixture f = fx_new("bfc:XLA_PYTHON_CLIENT_PREALLOCATE:false", DEV, 0);
    gs_block *a = xalloc(f.heap, 1 * MiB + 256, 0);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 2 * MiB);      /* first region 2 MiB */
    gs_block *b = xalloc(f.heap, 1 * MiB, 0);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 2 * MiB + 4 * MiB); /* then 4 MiB */
    gs_block *c = xalloc(f.heap, 20 * MiB, 0);                 /* 8 doubles to 32 MiB */
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 6 * MiB + 32 * MiB);
    gs_block *d = xalloc(f.heap, 40 * MiB, 0);                 /* 32 < 40: 64, no extra doubling */
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 38 * MiB + 64 * MiB);
    ck_assert_uint_eq(gs_heap_policy_state(f.heap)[0], 64 * MiB);
    xfree(f.heap, a);
    xfree(f.heap, b);
    xfree(f.heap, c);
    xfree(f.heap, d);
    fx_free(&f);
}
END_TEST

START_TEST(bfc_splits_only_at_twice_the_request)
{
    fixture f = fx_new("bfc:allow_growth:true", DEV, 0);
    gs_block *a = xalloc(f.heap, 1 * MiB, 0); /* region of 2 MiB, split (2 MiB >= 2 x 1 MiB) */
    ck_assert_uint_eq(a->size, 1 * MiB);
    gs_block *k = xalloc(f.heap, 256, 0);
    xfree(f.heap, a); /* free: 1 MiB at the low end, 1 MiB - 256 above k */
    /* best fit: the 1 MiB - 256 chunk, less than 2 x 600 KiB: handed out whole */
    gs_block *b = xalloc(f.heap, 600 * 1024, 0);
    ck_assert_uint_eq(b->size, 1 * MiB - 256);
    ck_assert_uint_eq(b->addr, k->addr + 256);
    ck_assert_uint_eq(b->requested, 600 * 1024);
    xfree(f.heap, b);
    xfree(f.heap, k);
    fx_free(&f);
}
END_TEST

START_TEST(bfc_backpedals_under_the_limit_and_collects)
{
    /* allow_growth under a limit of 100 MiB at fraction 1: regions 2, 4, 8, 16, 32 MiB, then 64
     * capped by what the limit leaves (38 MiB) */
    fixture f = fx_new("bfc:allow_growth:true,XLA_PYTHON_CLIENT_MEM_FRACTION:1,"
                       "TF_ENABLE_GPU_GARBAGE_COLLECTION:true", DEV, 100 * MiB);
    gs_block *x[6];
    uint64_t sizes[6] = {2 * MiB, 4 * MiB, 8 * MiB, 16 * MiB, 32 * MiB, 38 * MiB};
    for (int i = 0; i < 6; i++) x[i] = xalloc(f.heap, sizes[i], 0);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 100 * MiB);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_device_alloc, 6);
    /* free the 16 and 32 MiB regions: a 40 MiB request fits no chunk and no growth, so the
     * free regions go back and a region of 48 MiB is made (garbage collection) */
    xfree(f.heap, x[3]);
    xfree(f.heap, x[4]);
    gs_block *y = xalloc(f.heap, 40 * MiB, 0);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_alloc_retries, 1);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_device_free, 2);
    ck_assert_uint_le(gs_heap_reserved(f.heap), 100 * MiB);
    xfree(f.heap, y);
    for (int i = 0; i < 6; i++)
        if (i != 3 && i != 4) xfree(f.heap, x[i]);
    fx_free(&f);
}
END_TEST

START_TEST(bfc_streams_share_one_free_list)
{
    fixture f = fx_new("bfc", DEV, 1 * GiB);
    gs_block *a = xalloc(f.heap, 10 * MiB, 0);
    gs_block *k = xalloc(f.heap, 1 * MiB, 0);
    uint64_t at = a->addr;
    xfree(f.heap, a);
    gs_block *b = xalloc(f.heap, 10 * MiB, 3); /* BFC knows no streams: a's chunk again */
    ck_assert_uint_eq(b->addr, at);
    xfree(f.heap, b);
    xfree(f.heap, k);
    fx_free(&f);
}
END_TEST

START_TEST(bfc_config_errors_and_help)
{
    expect_error("bfc:XLA_PYTHON_CLIENT_PREALLOCATE:maybe", "true or false");
    expect_error("bfc:XLA_PYTHON_CLIENT_MEM_FRACTION:2", "0 < x <= 1");
    expect_error("bfc:expandable_segments:True", "unknown key");
    char *help = gs_policy_keys_help(&gs_policy_bfc);
    ck_assert_ptr_nonnull(strstr(help, "XLA_PYTHON_CLIENT_MEM_FRACTION:F"));
    ck_assert_ptr_null(strstr(help, "mem_fraction:F")); /* an alias, accepted, not listed */
    g_free(help);
    gs_policy *p = gs_policy_new("bfc:mem_fraction:0.5,preallocate:false", NULL);
    ck_assert_ptr_nonnull(p);
    gs_policy_free(p);
}
END_TEST

/* ---- rmm-pool ---- */

START_TEST(rmm_pool_initial_then_doubling)
{
    fixture f = fx_new("rmm-pool:initial_pool_size:8MiB", DEV, 0);
    gs_block *a = xalloc(f.heap, 1000, 1); /* the initial pool is stream 0's: stolen */
    ck_assert_uint_eq(a->size, 1024);       /* 256-byte alignment */
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 8 * MiB);
    ck_assert_uint_eq(a->stream, 0);
    gs_block *b = xalloc(f.heap, 10 * MiB, 1); /* max(request, pool size): 10 MiB, stream 1 */
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 18 * MiB);
    ck_assert_uint_eq(b->stream, 1);
    gs_block *c = xalloc(f.heap, 9 * MiB, 0); /* now the pool doubles: 18 MiB */
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 36 * MiB);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_device_alloc, 3);
    xfree(f.heap, a);
    xfree(f.heap, b);
    xfree(f.heap, c);
    /* the pool never shrinks */
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    check_heap(f.heap);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 36 * MiB);
    fx_free(&f);
    /* the default initial pool: half of the limit */
    f = fx_new("rmm-pool", DEV, 1 * GiB);
    a = xalloc(f.heap, 1, 0);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 512 * MiB);
    xfree(f.heap, a);
    fx_free(&f);
}
END_TEST

START_TEST(rmm_pool_own_stream_first)
{
    /* Two pools of 16 MiB, one per stream (no initial pool), each with a free 4 MiB hole: a
     * request on stream 1 takes stream 1's hole even when stream 0 has one as good. */
    fixture f = fx_new("rmm-pool:initial_pool_size:0", DEV, 0);
    gs_block *a0 = xalloc(f.heap, 16 * MiB, 0);
    gs_block *a1 = xalloc(f.heap, 16 * MiB, 1); /* max(16, 16) */
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 32 * MiB);
    xfree(f.heap, a0);
    xfree(f.heap, a1);
    gs_block *b = xalloc(f.heap, 4 * MiB, 1);
    ck_assert_uint_eq(b->stream, 1);
    gs_block *c = xalloc(f.heap, 13 * MiB, 1); /* stream 1 has 12 MiB left: stream 0's */
    ck_assert_uint_eq(c->stream, 0);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 32 * MiB);
    xfree(f.heap, b);
    xfree(f.heap, c);
    fx_free(&f);
}
END_TEST

START_TEST(rmm_pool_maximum_halves_and_fails)
{
    /* maximum 64 MiB: the first growth takes max(request, half of what is left) = 32 MiB; under
     * a capacity of 40 MiB the next try (16 MiB, half of 32 left) is refused, halved to the
     * request's 8 MiB and made; then 3 MiB fits neither the 2 MiB left free nor the capacity
     * (12, 6, then 3 MiB refused): an OOM, no retry (the pool never releases) */
    fixture f = fx_new("rmm-pool:initial_pool_size:0,maximum_pool_size:64MiB", DEV, 40 * MiB);
    gs_block *a = xalloc(f.heap, 30 * MiB, 0);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 32 * MiB);
    gs_block *b = xalloc(f.heap, 8 * MiB, 0);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 40 * MiB);
    gs_block *c = NULL;
    ck_assert_int_eq(try_alloc(f.heap, 3 * MiB, &c), GS_ERR_OOM);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_alloc_retries, 0);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_ooms, 1);
    xfree(f.heap, a);
    xfree(f.heap, b);
    fx_free(&f);
    /* a request beyond what the maximum leaves fails without asking the device */
    f = fx_new("rmm-pool:initial_pool_size:0,maximum_pool_size:16MiB", DEV, 0);
    ck_assert_int_eq(try_alloc(f.heap, 17 * MiB, &c), GS_ERR_OOM);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_device_alloc, 0);
    fx_free(&f);
}
END_TEST

START_TEST(rmm_pool_config_errors)
{
    expect_error("rmm-pool:initial_pool_size:1000", "multiple of 256");
    expect_error("rmm-pool:initial_pool_size:150%", "percentage");
    expect_error("rmm-pool:maximum_pool_size:x", "maximum_pool_size");
    expect_error("rmm-pool:pool_size:1GiB", "unknown key");
    gs_policy *p = gs_policy_new("rmm-pool:initial_pool_size:25%,maximum_pool_size:2GiB", NULL);
    ck_assert_ptr_nonnull(p);
    gs_policy_free(p);
}
END_TEST

/* ---- rmm-arena ---- */

START_TEST(rmm_arena_stream_superblocks_first_fit)
{
    fixture f = fx_new("rmm-arena", DEV, 1 * GiB);
    gs_block *a = xalloc(f.heap, 1000, 0);
    ck_assert_uint_eq(a->size, 1024);                       /* 256-byte alignment */
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 1 * MiB); /* one superblock for stream 0 */
    ck_assert_uint_eq(a->stream, 0);
    gs_block *b = xalloc(f.heap, 512 * 1024, 0);             /* the same superblock */
    ck_assert_ptr_eq(b->seg, a->seg);
    gs_block *c = xalloc(f.heap, 1000, 1); /* stream 1: a superblock of its own */
    ck_assert_uint_eq(c->stream, 1);
    ck_assert_ptr_ne(c->seg, a->seg);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 2 * MiB);
    /* stream 0's superblock has 511 KiB left: 600 KiB takes a new one */
    gs_block *d = xalloc(f.heap, 600 * 1024, 0);
    ck_assert_ptr_ne(d->seg, a->seg);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 3 * MiB);
    /* first fit by address: with b freed, the lower superblock has 1023 KiB free and the
     * other 424 KiB; 300 KiB goes to the lower-addressed one, where best fit would take the
     * smaller hole */
    xfree(f.heap, b);
    gs_block *e = xalloc(f.heap, 300 * 1024, 0);
    const gs_segment *low = a->seg->head->addr < d->seg->head->addr ? a->seg : d->seg;
    ck_assert_ptr_eq(e->seg, low);
    b = xalloc(f.heap, 256, 0);
    /* freed on another stream, a block still goes back to its superblock */
    gs_heap_free(f.heap, c);
    check_heap(f.heap);
    gs_block *g = xalloc(f.heap, 1000, 1);
    ck_assert_uint_eq(g->stream, 1);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 3 * MiB);
    /* one upstream allocation is never given back: empty_cache keeps every superblock */
    xfree(f.heap, a);
    xfree(f.heap, b);
    xfree(f.heap, d);
    xfree(f.heap, e);
    xfree(f.heap, g);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    check_heap(f.heap);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 3 * MiB);
    fx_free(&f);
}
END_TEST

/* The lowest-addressed free block of stream in pool with at least size bytes, by a walk of
 * every free block: what gs_pool_first_fit must answer. */
static gs_block *first_fit_by_walk(const gs_heap *h, unsigned pool, uint32_t stream,
                                   uint64_t size)
{
    gs_block *best = NULL;
    for (gs_block *b = gs_pool_first(h, pool); b; b = gs_pool_next(h, b))
        if (b->stream == stream && b->size >= size && (!best || b->addr < best->addr)) best = b;
    return best;
}

static size_t free_on(const gs_heap *h, unsigned pool, uint32_t stream)
{
    size_t n = 0;
    for (gs_block *b = gs_pool_first(h, pool); b; b = gs_pool_next(h, b)) n += b->stream == stream;
    return n;
}

/* gs_pool_first_fit for every size a free block of stream has, one byte more, and a size none
 * has, against the walk. */
static void check_first_fits(const gs_heap *h, unsigned pool, uint32_t stream)
{
    for (gs_block *b = gs_pool_first(h, pool); b; b = gs_pool_next(h, b)) {
        if (b->stream != stream) continue;
        for (uint64_t size = b->size; size <= b->size + 1; size++)
            ck_assert_ptr_eq(gs_pool_first_fit(h, pool, stream, size),
                             first_fit_by_walk(h, pool, stream, size));
    }
    ck_assert_ptr_eq(gs_pool_first_fit(h, pool, stream, 1), first_fit_by_walk(h, pool, stream, 1));
    ck_assert_ptr_null(gs_pool_first_fit(h, pool, stream, 64 * GiB));
}

/* The core's address order (core/addr_index.c) is a list while a stream holds few free blocks
 * and a treap above GS_ADDR_TREE_AT; the heap check insists on the form the count allows. Here a
 * stream goes from a few free blocks to hundreds (list to treap), down to a handful (treap to
 * list) and up again, the first fit checked against a walk all along, with the pool's whole
 * blocks (gs_pool_whole_blocks) against theirs. */
START_TEST(rmm_arena_address_order_list_and_treap)
{
    enum { N = 1200 };
    fixture f = fx_new("rmm-arena", DEV, 1 * GiB);
    gs_block **v = g_new0(gs_block *, N);
    gs_block *other = xalloc(f.heap, 4096, 1); /* stream 1 keeps its own order */
    for (int i = 0; i < N; i++) v[i] = xalloc(f.heap, 256 * (1 + (i * 7) % 13), 0);
    /* every other one freed: no merges, so stream 0's free blocks climb past the treap's
     * threshold (the superblocks' tails are free blocks too) */
    size_t most = 0;
    for (int i = 0; i < N; i += 2) {
        xfree(f.heap, v[i]);
        v[i] = NULL;
        if (i % 64 == 0) check_first_fits(f.heap, 0, 0);
        most = MAX(most, free_on(f.heap, 0, 0));
    }
    ck_assert_uint_gt(most, 4 * 128);
    check_first_fits(f.heap, 0, 0);
    check_first_fits(f.heap, 0, 1);
    /* the rest freed: merges bring the count down through both thresholds to whole
     * superblocks */
    size_t least = most;
    for (int i = 1; i < N; i += 2) {
        xfree(f.heap, v[i]);
        v[i] = NULL;
        if (i % 16 == 1) check_first_fits(f.heap, 0, 0);
        least = MIN(least, free_on(f.heap, 0, 0));
    }
    ck_assert_uint_lt(least, 8);
    check_first_fits(f.heap, 0, 0);
    /* whole superblocks now: the pool's whole blocks are stream 0's and stream 1's none */
    size_t n = 0, walked = 0;
    gs_block **whole = gs_pool_whole_blocks(f.heap, 0, &n);
    for (gs_block *b = gs_pool_first(f.heap, 0); b; b = gs_pool_next(f.heap, b))
        if (!gs_block_is_split(b)) {
            ck_assert_uint_lt(walked, n);
            ck_assert_ptr_eq(whole[walked++], b); /* in the index's order */
        }
    ck_assert_uint_eq(walked, n);
    ck_assert_uint_gt(n, 0);
    g_free(whole);
    /* and up again, first fit taking the lowest holes */
    for (int i = 0; i < N; i++) {
        uint64_t size = 256 * (1 + (i * 5) % 11);
        gs_block *want = first_fit_by_walk(f.heap, 0, 0, size);
        uint64_t want_addr = want ? want->addr : 0; /* the struct keeps the remainder */
        v[i] = xalloc(f.heap, size, 0);
        if (want) ck_assert_uint_eq(v[i]->addr, want_addr);
    }
    for (int i = 0; i < N; i += 3) xfree(f.heap, v[i]);
    check_first_fits(f.heap, 0, 0);
    for (int i = 0; i < N; i++)
        if (i % 3) xfree(f.heap, v[i]);
    xfree(f.heap, other);
    check_first_fits(f.heap, 0, 0);
    check_first_fits(f.heap, 0, 1);
    g_free(v);
    fx_free(&f);
}
END_TEST

START_TEST(rmm_arena_large_from_the_global_arena)
{
    fixture f = fx_new("rmm-arena:arena_size:64MiB", DEV, 0);
    /* above 1 MiB: straight from the global arena, a superblock of exactly the request,
     * shared by the streams (stream 0's in the replay) */
    gs_block *a = xalloc(f.heap, 1 * MiB + 1, 1);
    ck_assert_uint_eq(a->size, 1 * MiB + 256);
    ck_assert_uint_eq(a->stream, 0);
    ck_assert_uint_eq(a->seg->size, 1 * MiB + 256);
    gs_block *b = xalloc(f.heap, 8 * MiB, 2);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 9 * MiB + 256);
    xfree(f.heap, b);
    /* the freed superblock serves the next large request that fits, first fit */
    gs_block *c = xalloc(f.heap, 4 * MiB, 1);
    ck_assert_ptr_eq(c->seg, b->seg);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 9 * MiB + 256);
    xfree(f.heap, c);
    /* an empty large superblock is back in the global arena before the next one is carved */
    gs_block *d = xalloc(f.heap, 16 * MiB, 0);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 17 * MiB + 256);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_device_free, 1);
    xfree(f.heap, a);
    xfree(f.heap, d);
    fx_free(&f);
}
END_TEST

START_TEST(rmm_arena_defragments_then_fails)
{
    /* An arena of 4 MiB: four streams take a superblock each; once their blocks are free the
     * superblocks stay with the streams, so a 2 MiB request finds no room, defragments (the
     * empty superblocks go back) and succeeds; no retry is counted (RMM's synchronisation) */
    fixture f = fx_new("rmm-arena:arena_size:4MiB", DEV, 0);
    gs_block *s[4];
    for (unsigned i = 0; i < 4; i++) s[i] = xalloc(f.heap, 4096, i);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 4 * MiB);
    gs_block *x = NULL;
    ck_assert_int_eq(try_alloc(f.heap, 1000, &x), GS_OK); /* stream 0's superblock has room */
    xfree(f.heap, x);
    for (unsigned i = 1; i < 4; i++) xfree(f.heap, s[i]);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 4 * MiB);
    gs_block *big = NULL;
    ck_assert_int_eq(try_alloc(f.heap, 2 * MiB, &big), GS_OK);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 3 * MiB); /* s[0]'s superblock and 2 MiB */
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_alloc_retries, 0);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_ooms, 0);
    /* 2 MiB more does not fit what is left (1 MiB), even after a defragment: the OOM */
    ck_assert_int_eq(try_alloc(f.heap, 2 * MiB, &x), GS_ERR_OOM);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_ooms, 1);
    /* a small request on a new stream takes the last superblock */
    gs_block *y = xalloc(f.heap, 1 * MiB, 5);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 4 * MiB);
    xfree(f.heap, y);
    xfree(f.heap, big);
    xfree(f.heap, s[0]);
    fx_free(&f);
}
END_TEST

START_TEST(rmm_arena_default_size_and_errors)
{
    /* the default arena is half the limit: 300 MiB of a 512 MiB limit fails */
    fixture f = fx_new("rmm-arena", DEV, 512 * MiB);
    gs_block *x = NULL;
    ck_assert_int_eq(try_alloc(f.heap, 300 * MiB, &x), GS_ERR_OOM);
    ck_assert_int_eq(try_alloc(f.heap, 200 * MiB, &x), GS_OK);
    xfree(f.heap, x);
    fx_free(&f);
    /* an arena larger than the limit: the upstream allocation itself fails */
    f = fx_new("rmm-arena:arena_size:1GiB", DEV, 512 * MiB);
    ck_assert_int_eq(try_alloc(f.heap, 1000, &x), GS_ERR_OOM);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 0);
    fx_free(&f);
    /* with no limit, an arena larger than the device fails the same way (it completed) */
    f = fx_new("rmm-arena:arena_size:8GiB", DEV, 0);
    ck_assert_int_eq(try_alloc(f.heap, 1000, &x), GS_ERR_OOM);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 0);
    fx_free(&f);
    f = fx_new("rmm-arena:arena_size:4GiB", DEV, 0); /* the whole device: it fits */
    ck_assert_int_eq(try_alloc(f.heap, 1000, &x), GS_OK);
    xfree(f.heap, x);
    fx_free(&f);
    expect_error("rmm-arena:arena_size:1000", "arena_size");
    expect_error("rmm-arena:arena_size:150%", "percentage");
    expect_error("rmm-arena:dump_log_on_failure:maybe", "true or false");
    expect_error("rmm-arena:initial_pool_size:1GiB", "unknown key");
    gs_policy *p = gs_policy_new("rmm-arena:arena_size:25%,dump_log_on_failure:true", NULL);
    ck_assert_ptr_nonnull(p);
    gs_policy_free(p);
    char *help = gs_policy_keys_help(&gs_policy_rmm_arena);
    ck_assert_ptr_nonnull(strstr(help, "arena_size:BYTES"));
    ck_assert_ptr_null(strstr(help, "dump_log_on_failure")); /* accepted, no effect */
    g_free(help);
}
END_TEST

/* ---- cuda-async ---- */

START_TEST(cuda_async_chunks_and_streams)
{
    fixture f = fx_new("cuda-async:vmm:0,granularity:2MiB,chunk:2MiB", DEV, 0);
    gs_block *a = xalloc(f.heap, 1000, 0);
    ck_assert_uint_eq(a->size, 1024); /* 512-byte alignment */
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 2 * MiB); /* one 2 MiB chunk */
    gs_block *b = xalloc(f.heap, 3 * MiB, 0);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 6 * MiB); /* 3 MiB in whole 2 MiB */
    gs_block *c = xalloc(f.heap, 1 * MiB, 1); /* stream 0's chunk serves stream 1 */
    ck_assert_uint_eq(c->stream, 0);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 6 * MiB);
    xfree(f.heap, c);
    xfree(f.heap, a);
    xfree(f.heap, b);
    fx_free(&f);
}
END_TEST

START_TEST(cuda_async_no_internal_dependencies)
{
    fixture f = fx_new("cuda-async:vmm:0,cudaMemPoolReuseAllowInternalDependencies:0,chunk:8MiB,"
                       "granularity:2MiB",
                       DEV, 0);
    gs_block *a = xalloc(f.heap, 1 * MiB, 0);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 8 * MiB);
    gs_block *b = xalloc(f.heap, 1 * MiB, 1); /* not from stream 0's chunk */
    ck_assert_uint_eq(b->stream, 1);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 16 * MiB);
    xfree(f.heap, a);
    xfree(f.heap, b);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK); /* cudaMemPoolTrimTo(0) */
    check_heap(f.heap);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 0);
    fx_free(&f);
}
END_TEST

/* Under a capacity of 10 MiB: chunks of 4, 4 and 2 MiB, the 4 MiB ones freed. A 6 MiB request
 * fits no chunk and no growth: with threshold 0 the free chunks are trimmed and growth tried
 * again (no counted retry); with UINT64_MAX (PyTorch's) nothing goes back until the ladder's
 * full release, the counted retry. */
static void threshold_case(const char *spec, uint64_t retries)
{
    fixture f = fx_new(spec, DEV, 10 * MiB);
    gs_block *a = xalloc(f.heap, 4 * MiB, 0);
    gs_block *b = xalloc(f.heap, 4 * MiB, 0);
    gs_block *c = xalloc(f.heap, 2 * MiB, 0);
    xfree(f.heap, a);
    xfree(f.heap, b);
    gs_block *d = xalloc(f.heap, 6 * MiB, 0);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 8 * MiB);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_device_free, 2);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_alloc_retries, retries);
    xfree(f.heap, c);
    xfree(f.heap, d);
    fx_free(&f);
}

START_TEST(cuda_async_release_threshold)
{
    threshold_case("cuda-async:vmm:0,granularity:2MiB,chunk:2MiB", 0);
    threshold_case("cuda-async:vmm:0,cudaMemPoolAttrReleaseThreshold:UINT64_MAX,granularity:2MiB,"
                   "chunk:2MiB",
                   1);
    threshold_case("cuda-async:vmm:0,release_threshold:max,granularity:2MiB,chunk:2MiB", 1);
}
END_TEST

/* vmm:1 (the driver's pool as one virtual range, chunks mapped at its end): a request that
 * meets a free tail grows by what it lacks, in whole chunks, and its block spans the chunks;
 * the limit is checked against what is mapped. small:BYTES puts smaller requests in chunks of
 * their own. */
START_TEST(cuda_async_vmm_tail_and_small)
{
    fixture f = fx_new("cuda-async:cudaMemPoolAttrReleaseThreshold:max,vmm:1", DEV, 64 * MiB);
    gs_block *a = xalloc(f.heap, 20 * MiB, 0);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 32 * MiB);
    gs_block *b = xalloc(f.heap, 40 * MiB, 0); /* 12 MiB of tail and one more chunk */
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 64 * MiB);
    ck_assert_uint_eq(b->addr, a->addr + 20 * MiB);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_device_alloc, 2);
    xfree(f.heap, a);
    xfree(f.heap, b);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 0);
    fx_free(&f);

    for (int small = 0; small <= 1; small++) {
        f = fx_new(small ? "cuda-async:vmm:1,small:1MiB" : "cuda-async:vmm:1", DEV, 0);
        gs_block *big = xalloc(f.heap, 16 * MiB, 0), *s[100];
        for (int i = 0; i < 100; i++) s[i] = xalloc(f.heap, 64 << 10, 0);
        gs_block *c = xalloc(f.heap, 8 * MiB, 0);
        ck_assert_uint_eq(gs_heap_reserved(f.heap), small ? 64 * MiB : 32 * MiB);
        for (int i = 0; i < 100; i++) xfree(f.heap, s[i]);
        xfree(f.heap, big);
        xfree(f.heap, c);
        check_heap(f.heap);
        fx_free(&f);
    }

    /* threshold 0: a failed growth gives every free page back and grows again, no retry */
    f = fx_new("cuda-async:vmm:1,small:1MiB", DEV, 64 * MiB);
    a = xalloc(f.heap, 512 << 10, 0);
    b = xalloc(f.heap, 32 * MiB, 0);
    xfree(f.heap, a); /* the large range's 32 MiB and the small range's chunk (free) */
    gs_block *c = xalloc(f.heap, 32 * MiB, 0);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 64 * MiB);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_alloc_retries, 0);
    xfree(f.heap, b);
    xfree(f.heap, c);
    fx_free(&f);
}
END_TEST

/* remap:1, from the driver's pool read request by request on an H100 (lab/async_probe.py's
 * designed sequences, lab/results/h100-2026-12-06-fidelity/refs/async): 32 MiB x3, free the
 * first and the third, 64 MiB: placed where the third was, extending that free tail, with the
 * first's chunk moved behind it: reserved stays 96 MiB (vmm:1 alone maps a new chunk: 128).
 * 32 MiB x3, free the middle, 48 MiB: at the end, the middle's chunk moved there and one chunk
 * made: reserved 128 MiB (vmm:1 alone: 160). */
START_TEST(cuda_async_remap_moves_free_chunks)
{
    for (int remap = 0; remap <= 1; remap++) {
        const char *spec = remap ? "cuda-async:cudaMemPoolAttrReleaseThreshold:max,vmm:1,remap:1"
                                 : "cuda-async:cudaMemPoolAttrReleaseThreshold:max,vmm:1,remap:0";
        fixture f = fx_new(spec, DEV, 0);
        gs_block *a = xalloc(f.heap, 32 * MiB, 0), *b = xalloc(f.heap, 32 * MiB, 0);
        gs_block *c = xalloc(f.heap, 32 * MiB, 0);
        uint64_t third = c->addr;
        xfree(f.heap, a);
        xfree(f.heap, c);
        gs_block *d = xalloc(f.heap, 64 * MiB, 0);
        ck_assert_uint_eq(d->addr, third);
        ck_assert_uint_eq(gs_heap_reserved(f.heap), remap ? 96 * MiB : 128 * MiB);
        check_heap(f.heap);
        xfree(f.heap, b);
        xfree(f.heap, d);
        fx_free(&f);

        f = fx_new(spec, DEV, 0);
        a = xalloc(f.heap, 32 * MiB, 0);
        b = xalloc(f.heap, 32 * MiB, 0);
        c = xalloc(f.heap, 32 * MiB, 0);
        xfree(f.heap, b);
        d = xalloc(f.heap, 48 * MiB, 0);
        ck_assert_uint_eq(d->addr, c->addr + 32 * MiB);
        ck_assert_uint_eq(gs_heap_reserved(f.heap), remap ? 128 * MiB : 160 * MiB);
        check_heap(f.heap);
        xfree(f.heap, a);
        xfree(f.heap, c);
        xfree(f.heap, d);
        ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
        ck_assert_uint_eq(gs_heap_reserved(f.heap), 0);
        fx_free(&f);
    }
    expect_error("cuda-async:vmm:0,remap:1", "needs vmm:1");
}
END_TEST

START_TEST(cuda_async_config_errors)
{
    /* the default: one range of 32 MiB chunks, the 40 MiB request extending the first chunk's
     * free tail by one more; vmm:0 alone: fixed chunks of whole 32 MiB, remap off with it */
    const char *specs[] = {"cuda-async", "cuda-async:vmm:0"};
    const uint64_t want[] = {64 * MiB, 32 * MiB + 64 * MiB};
    for (int k = 0; k < 2; k++) {
        fixture f = fx_new(specs[k], DEV, 0);
        gs_block *a = xalloc(f.heap, 1, 0);
        gs_block *b = xalloc(f.heap, 40 * MiB, 0);
        ck_assert_uint_eq(gs_heap_reserved(f.heap), want[k]);
        ck_assert(b->seg->expandable == (k == 0));
        xfree(f.heap, a);
        xfree(f.heap, b);
        fx_free(&f);
    }
    expect_error("cuda-async:cudaMemPoolAttrReleaseThreshold:lots", "cudaMemPoolAttrReleaseThreshold");
    expect_error("cuda-async:cudaMemPoolReuseAllowInternalDependencies:2", "true or false");
    expect_error("cuda-async:granularity:3MiB", "power of two");
    expect_error("cuda-async:align:128", "power of two");
    char *help = gs_policy_keys_help(&gs_policy_cuda_async);
    ck_assert_ptr_nonnull(strstr(help, "cudaMemPoolAttrReleaseThreshold:BYTES"));
    ck_assert_ptr_null(strstr(help, "release_threshold:")); /* an alias, not listed */
    g_free(help);
}
END_TEST

START_TEST(registry_has_the_families)
{
    const char *want[] = {"preallocate", "tlsf", "bfc", "rmm-pool", "rmm-arena", "cuda-async"};
    for (unsigned i = 0; i < G_N_ELEMENTS(want); i++) {
        bool found = false;
        for (const gs_policy_ops *const *r = gs_policy_registry(); *r; r++)
            found |= strcmp((*r)->name, want[i]) == 0;
        ck_assert_msg(found, "%s not registered", want[i]);
    }
}
END_TEST

static Suite *families_suite(void)
{
    Suite *s = suite_create("families");
    TCase *tc = tcase_create("preallocate");
    tcase_add_test(tc, preallocate_one_arena_of_the_fraction);
    tcase_add_test(tc, preallocate_has_no_private_pools);
    tcase_add_test(tc, preallocate_size_without_limit);
    tcase_add_test(tc, preallocate_best_and_first_fit);
    tcase_add_test(tc, preallocate_config_errors);
    tcase_add_test(tc, registry_has_the_families);
    suite_add_tcase(s, tc);
    tc = tcase_create("tlsf");
    tcase_add_test(tc, tlsf_search_size_is_the_next_class_edge);
    tcase_add_test(tc, tlsf_good_fit_passes_over_own_class);
    tcase_add_test(tc, tlsf_grows_by_pool_size_and_retries_after_release);
    tcase_add_test(tc, tlsf_config_errors);
    suite_add_tcase(s, tc);
    tc = tcase_create("bfc");
    tcase_add_test(tc, bfc_preallocates_the_fraction);
    tcase_add_test(tc, bfc_regions_double_with_allow_growth);
    tcase_add_test(tc, bfc_splits_only_at_twice_the_request);
    tcase_add_test(tc, bfc_backpedals_under_the_limit_and_collects);
    tcase_add_test(tc, bfc_streams_share_one_free_list);
    tcase_add_test(tc, bfc_config_errors_and_help);
    suite_add_tcase(s, tc);
    tc = tcase_create("rmm-pool");
    tcase_add_test(tc, rmm_pool_initial_then_doubling);
    tcase_add_test(tc, rmm_pool_own_stream_first);
    tcase_add_test(tc, rmm_pool_maximum_halves_and_fails);
    tcase_add_test(tc, rmm_pool_config_errors);
    suite_add_tcase(s, tc);
    tc = tcase_create("rmm-arena");
    tcase_add_test(tc, rmm_arena_stream_superblocks_first_fit);
    tcase_add_test(tc, rmm_arena_address_order_list_and_treap);
    tcase_add_test(tc, rmm_arena_large_from_the_global_arena);
    tcase_add_test(tc, rmm_arena_defragments_then_fails);
    tcase_add_test(tc, rmm_arena_default_size_and_errors);
    suite_add_tcase(s, tc);
    tc = tcase_create("cuda-async");
    tcase_add_test(tc, cuda_async_chunks_and_streams);
    tcase_add_test(tc, cuda_async_no_internal_dependencies);
    tcase_add_test(tc, cuda_async_release_threshold);
    tcase_add_test(tc, cuda_async_vmm_tail_and_small);
    tcase_add_test(tc, cuda_async_remap_moves_free_chunks);
    tcase_add_test(tc, cuda_async_config_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return run_suite(families_suite()); }
