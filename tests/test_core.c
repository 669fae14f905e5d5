/* test_core.c - the allocator core under the pytorch policy: blocks, split and merge, pools,
 * streams, statistics, the out-of-memory ladder, deferred frees, and failures of the device.
 * Every operation is followed by gs_heap_check(). */
#include "testutil.h"

#define DEV (80 * GiB)

START_TEST(small_request_takes_low_end_of_2mib_segment)
{
    fixture f = fx_new("pytorch", DEV, 0);
    gs_block *a = xalloc(f.heap, 37632, 0); /* rounds to 37888 */
    ck_assert_uint_eq(a->size, 37888);
    ck_assert_uint_eq(a->addr, a->seg->addr);
    ck_assert_uint_eq(a->seg->size, 2 * MiB);
    ck_assert_int_eq(STAT(f.heap, segment, SMALL).current, 1);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 2 * MiB);
    ck_assert_int_eq(STAT(f.heap, allocated_bytes, ALL).current, 37888);
    ck_assert_int_eq(STAT(f.heap, requested_bytes, ALL).current, 37632);
    ck_assert_int_eq(STAT(f.heap, inactive_split, SMALL).current, 1);
    ck_assert_int_eq(STAT(f.heap, inactive_split_bytes, SMALL).current, 2 * MiB - 37888);
    gs_block *b = xalloc(f.heap, 256, 0);
    ck_assert_uint_eq(b->addr, a->addr + 37888); /* packed right after a, same segment */
    ck_assert_uint_eq(b->size, 512);
    xfree(f.heap, a);
    xfree(f.heap, b); /* both merge back into one free 2 MiB block */
    ck_assert_int_eq(STAT(f.heap, inactive_split, SMALL).current, 0);
    ck_assert_uint_eq(gs_pool_count(f.heap, 1), 1);
    ck_assert_int_eq(STAT(f.heap, allocated_bytes, ALL).current, 0);
    ck_assert_int_eq(STAT(f.heap, active, ALL).current, 0);
    fx_free(&f);
}
END_TEST

START_TEST(segment_sizes_follow_pytorch)
{
    fixture f = fx_new("pytorch", DEV, 0);
    gs_block *a = xalloc(f.heap, 1 * MiB, 0); /* <= 1 MiB: small pool */
    ck_assert_uint_eq(a->seg->size, 2 * MiB);
    gs_block *b = xalloc(f.heap, 1 * MiB + 1, 0); /* 1..10 MiB: a 20 MiB segment */
    ck_assert_uint_eq(b->seg->size, 20 * MiB);
    ck_assert_int_eq(STAT(f.heap, segment, LARGE).current, 1);
    /* b's 20 MiB segment has 19 MiB cached: use another stream to see fresh segments */
    gs_block *c = xalloc(f.heap, 10 * MiB + MiB / 2, 1); /* >= 10 MiB: round to 2 MiB */
    ck_assert_uint_eq(c->seg->size, 12 * MiB);
    /* the 1.5 MiB remainder is > 1 MiB: split off and cached */
    ck_assert_uint_eq(c->size, 10 * MiB + MiB / 2);
    gs_block *d = xalloc(f.heap, 11 * MiB, 1);
    /* remainder exactly 1 MiB: not split (strict '>'), counted as allocated */
    ck_assert_uint_eq(d->seg->size, 12 * MiB);
    ck_assert_uint_eq(d->size, 12 * MiB);
    ck_assert_ptr_null(d->next);
    fx_free(&f);
}
END_TEST

START_TEST(best_fit_prefers_smallest_then_lowest_address)
{
    fixture f = fx_new("pytorch", DEV, 0);
    /* three 12 MiB segments; free the second and third, then the first */
    gs_block *a = xalloc(f.heap, 12 * MiB, 0);
    gs_block *b = xalloc(f.heap, 12 * MiB, 0);
    gs_block *c = xalloc(f.heap, 14 * MiB, 0);
    uint64_t lowest = MIN(a->addr, b->addr);
    xfree(f.heap, a);
    xfree(f.heap, b);
    xfree(f.heap, c);
    gs_block *x = xalloc(f.heap, 11 * MiB + 1, 0); /* fits 12 and 14: takes a 12, lower address */
    ck_assert_uint_eq(x->size, 12 * MiB);
    ck_assert_uint_eq(x->addr, lowest);
    gs_block *y = xalloc(f.heap, 13 * MiB, 0); /* only the 14 MiB block fits */
    ck_assert_uint_eq(y->seg->size, 14 * MiB);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_device_alloc, 3);
    fx_free(&f);
}
END_TEST

START_TEST(streams_do_not_share_free_blocks)
{
    fixture f = fx_new("pytorch", DEV, 0);
    gs_block *a = xalloc(f.heap, 4096, 1);
    xfree(f.heap, a);
    gs_block *b = xalloc(f.heap, 4096, 2); /* a's cached segment belongs to stream 1 */
    ck_assert_int_eq(STAT(f.heap, segment, ALL).current, 2);
    ck_assert_uint_eq(b->stream, 2);
    gs_block *c = xalloc(f.heap, 4096, 1);
    ck_assert_int_eq(STAT(f.heap, segment, ALL).current, 2); /* stream 1 reuses its own */
    xfree(f.heap, b);
    xfree(f.heap, c);
    fx_free(&f);
}
END_TEST

START_TEST(split_and_merge_keep_inactive_split_stats)
{
    fixture f = fx_new("pytorch", DEV, 0);
    gs_block *a = xalloc(f.heap, 2 * MiB, 0); /* 20 MiB segment, 18 MiB remainder */
    gs_block *b = xalloc(f.heap, 2 * MiB, 0);
    gs_block *c = xalloc(f.heap, 2 * MiB, 0);
    ck_assert_uint_eq(b->addr, a->addr + 2 * MiB);
    ck_assert_int_eq(STAT(f.heap, inactive_split, LARGE).current, 1);
    ck_assert_int_eq(STAT(f.heap, inactive_split_bytes, LARGE).current, 14 * MiB);
    xfree(f.heap, b); /* a hole between a and c */
    ck_assert_int_eq(STAT(f.heap, inactive_split, LARGE).current, 2);
    xfree(f.heap, c); /* c merges with b's hole and the tail */
    ck_assert_int_eq(STAT(f.heap, inactive_split, LARGE).current, 1);
    ck_assert_int_eq(STAT(f.heap, inactive_split_bytes, LARGE).current, 18 * MiB);
    xfree(f.heap, a); /* whole segment free again: not split, not inactive_split */
    ck_assert_int_eq(STAT(f.heap, inactive_split, LARGE).current, 0);
    ck_assert_int_eq(STAT(f.heap, inactive_split_bytes, LARGE).current, 0);
    ck_assert_int_eq(STAT(f.heap, inactive_split, LARGE).peak, 2);
    fx_free(&f);
}
END_TEST

START_TEST(empty_cache_releases_only_whole_free_segments)
{
    fixture f = fx_new("pytorch", DEV, 0);
    gs_block *a = xalloc(f.heap, 4096, 0);
    gs_block *b = xalloc(f.heap, 30 * MiB, 0);
    gs_block *c = xalloc(f.heap, 2 * MiB, 0);
    xfree(f.heap, b);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    check_heap(f.heap);
    /* b's 30 MiB segment went back; a's and c's segments are in use */
    ck_assert_int_eq(STAT(f.heap, segment, ALL).current, 2);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_device_free, 1);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_sync_all_streams, 1);
    xfree(f.heap, a);
    xfree(f.heap, c);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    check_heap(f.heap);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 0);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).peak, 52 * MiB);
    fx_free(&f);
}
END_TEST

START_TEST(limit_hit_releases_cache_and_counts_one_retry)
{
    fixture f = fx_new("pytorch", DEV, 100 * MiB);
    gs_block *a = xalloc(f.heap, 60 * MiB, 0);
    xfree(f.heap, a); /* 60 MiB cached */
    gs_block *b = xalloc(f.heap, 70 * MiB, 0); /* 60+70 > 100: flush the cache, retry */
    ck_assert_uint_eq(b->size, 70 * MiB);
    const gs_stats *s = gs_heap_stats(f.heap);
    ck_assert_int_eq(s->num_alloc_retries, 1);
    ck_assert_int_eq(s->num_ooms, 0);
    ck_assert_int_eq(s->num_device_free, 1);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).peak, 70 * MiB);
    /* now a request that cannot fit even after a flush */
    gs_block *c = NULL;
    ck_assert_int_eq(gs_heap_malloc(f.heap, 40 * MiB, 0, &c), GS_ERR_OOM);
    check_heap(f.heap);
    ck_assert_int_eq(s->num_alloc_retries, 2); /* the retry is counted even when it fails */
    ck_assert_int_eq(s->num_ooms, 1);
    fx_free(&f);
}
END_TEST

START_TEST(device_oom_without_limit)
{
    fixture f = fx_new("pytorch", 64 * MiB, 0);
    gs_block *a = xalloc(f.heap, 40 * MiB, 0);
    gs_block *b = NULL;
    ck_assert_int_eq(gs_heap_malloc(f.heap, 30 * MiB, 0, &b), GS_ERR_OOM);
    check_heap(f.heap);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_ooms, 1);
    ck_assert_int_eq(gs_heap_devcalls(f.heap)->failed[GS_CALL_MALLOC], 2); /* first try + retry */
    xfree(f.heap, a);
    fx_free(&f);
}
END_TEST

START_TEST(max_split_size_rules)
{
    fixture f = fx_new("pytorch:max_split_size_mb:100", DEV, 0);
    gs_block *big = xalloc(f.heap, 200 * MiB, 0);
    ck_assert_int_eq(gs_heap_stats(f.heap)->oversize_segments.current, 1);
    ck_assert_int_eq(gs_heap_stats(f.heap)->oversize_allocations.current, 1);
    xfree(f.heap, big);
    ck_assert_int_eq(gs_heap_stats(f.heap)->oversize_allocations.current, 0);
    /* a request below max_split_size never takes the oversize block */
    gs_block *small = xalloc(f.heap, 50 * MiB, 0);
    ck_assert_int_eq(STAT(f.heap, segment, ALL).current, 2);
    ck_assert_uint_eq(small->seg->size, 50 * MiB);
    /* a large request takes it only within 20 MiB: 181 MiB would waste 19 MiB: ok */
    gs_block *l1 = xalloc(f.heap, 181 * MiB, 0);
    ck_assert_uint_eq(l1->size, 200 * MiB); /* not split */
    ck_assert_int_eq(STAT(f.heap, segment, ALL).current, 2);
    xfree(f.heap, l1);
    gs_block *l2 = xalloc(f.heap, 180 * MiB, 0); /* would waste exactly 20 MiB: refused */
    ck_assert_uint_eq(l2->seg->size, 180 * MiB);
    ck_assert_int_eq(STAT(f.heap, segment, ALL).current, 3);
    xfree(f.heap, small);
    xfree(f.heap, l2);
    fx_free(&f);
}
END_TEST

START_TEST(release_available_frees_one_big_enough_oversize_block)
{
    /* limit 500 MiB: cached oversize blocks of 150 and 300 MiB; a 250 MiB request does not fit
     * (450 + 250 > 500) and cannot use the 300 MiB block (waste >= 20 MiB), so the policy frees
     * the smallest single oversize block >= 250 MiB (the 300) and grows without a counted retry. */
    fixture f = fx_new("pytorch:max_split_size_mb:100", DEV, 500 * MiB);
    gs_block *a = xalloc(f.heap, 150 * MiB, 0);
    gs_block *b = xalloc(f.heap, 300 * MiB, 0);
    xfree(f.heap, a);
    xfree(f.heap, b);
    gs_block *c = xalloc(f.heap, 250 * MiB, 0);
    ck_assert_uint_eq(c->size, 250 * MiB);
    const gs_stats *s = gs_heap_stats(f.heap);
    ck_assert_int_eq(s->num_alloc_retries, 0);
    ck_assert_int_eq(s->num_device_free, 1);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 400 * MiB);
    xfree(f.heap, c);
    fx_free(&f);
}
END_TEST

START_TEST(release_available_partial_release_goes_to_full_flush)
{
    /* Cached oversize blocks of 120 and 110 MiB (both < the 250 MiB request) and a cached
     * 40 MiB non-oversize segment. Limit 300 MiB. Releasing the oversize blocks from the largest
     * down frees 230 MiB < 250 MiB: release_some says no (though the frees stand), so PyTorch
     * goes straight to the full flush and the counted retry (docs/fidelity.md §1.2). */
    fixture f = fx_new("pytorch:max_split_size_mb:100", DEV, 300 * MiB);
    gs_block *a = xalloc(f.heap, 120 * MiB, 0);
    gs_block *b = xalloc(f.heap, 110 * MiB, 0);
    gs_block *c = xalloc(f.heap, 40 * MiB, 0);
    xfree(f.heap, a);
    xfree(f.heap, b);
    xfree(f.heap, c);
    gs_block *d = xalloc(f.heap, 250 * MiB, 0);
    const gs_stats *s = gs_heap_stats(f.heap);
    ck_assert_int_eq(s->num_alloc_retries, 1);
    ck_assert_int_eq(s->num_device_free, 3);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 250 * MiB);
    xfree(f.heap, d);
    fx_free(&f);
}
END_TEST

START_TEST(garbage_collection_frees_old_blocks_only_with_limit)
{
    /* Threshold 0.5 of 100 MiB. Cache two 30 MiB segments, then age one of them by serving
     * many requests from another segment; GC frees the old one before growing. */
    fixture f = fx_new("pytorch:garbage_collection_threshold:0.5", DEV, 100 * MiB);
    gs_block *old = xalloc(f.heap, 30 * MiB, 0);
    gs_block *keep = xalloc(f.heap, 24 * MiB, 0);
    xfree(f.heap, old);
    xfree(f.heap, keep);
    /* best fit serves each 24 MiB request from keep's block, never old's: old ages */
    for (int i = 0; i < 10; i++) xfree(f.heap, xalloc(f.heap, 24 * MiB, 0));
    /* 54 MiB reserved > 50 MiB threshold: a miss triggers GC; both blocks are unsplit; the old
     * one's age is far above average, the recent one's is not. */
    gs_block *x = xalloc(f.heap, 40 * MiB, 0);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_device_free, 1);
    ck_assert_int_eq(STAT(f.heap, segment, ALL).current, 2);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_alloc_retries, 0);
    xfree(f.heap, x);
    fx_free(&f);

    /* without a limit the threshold is ignored, as in PyTorch (issue #106660) */
    fixture g = fx_new("pytorch:garbage_collection_threshold:0.5", DEV, 0);
    gs_block *o = xalloc(g.heap, 30 * MiB, 0);
    xfree(g.heap, o);
    gs_block *y = xalloc(g.heap, 40 * MiB, 0);
    ck_assert_int_eq(gs_heap_stats(g.heap)->num_device_free, 0);
    xfree(g.heap, y);
    fx_free(&g);
}
END_TEST

START_TEST(deferred_free_is_not_reused_until_complete)
{
    fixture f = fx_new("pytorch", DEV, 0);
    gs_block *a = xalloc(f.heap, 4096, 0);
    gs_block *owner = a;
    gs_heap_free_request(f.heap, a, &owner);
    check_heap(f.heap);
    ck_assert_int_eq(STAT(f.heap, allocated_bytes, ALL).current, 0); /* dropped at request */
    ck_assert_int_eq(STAT(f.heap, active_bytes, ALL).current, 4096); /* still active */
    gs_block *b = xalloc(f.heap, 4096, 0);
    ck_assert_uint_ne(b->addr, a->addr); /* a is pending, not reusable */
    gs_heap_free_complete(f.heap, a);
    check_heap(f.heap);
    ck_assert_int_eq(STAT(f.heap, active_bytes, ALL).current, 4096);
    gs_block *c = xalloc(f.heap, 4096, 0);
    ck_assert_uint_eq(c->addr, b->addr - 4096); /* a's place, lowest address first */
    xfree(f.heap, b);
    xfree(f.heap, c);
    fx_free(&f);
}
END_TEST

/* active and active_bytes count pending frees as live: their peaks may exceed allocation's,
 * per pool type, and every cumulative figure balances (allocated - freed = current). */
START_TEST(active_peaks_count_pending_frees)
{
    fixture f = fx_new("pytorch", DEV, 0);
    gs_block *a = xalloc(f.heap, 4096, 0);         /* small pool */
    gs_block *big = xalloc(f.heap, 12 * MiB, 0);   /* large pool */
    gs_heap_free_request(f.heap, a, NULL);
    check_heap(f.heap);
    gs_heap_free_request(f.heap, big, NULL);
    check_heap(f.heap);
    gs_block *b = xalloc(f.heap, 8192, 0); /* allocation peaks at 2, active at 3 */
    const gs_stats *s = gs_heap_stats(f.heap);
    ck_assert_int_eq(s->allocation[GS_STAT_ALL].peak, 2);
    ck_assert_int_eq(s->active[GS_STAT_ALL].current, 3);
    ck_assert_int_eq(s->active[GS_STAT_ALL].peak, 3);
    ck_assert_int_eq(s->active[GS_STAT_SMALL].peak, 2);
    ck_assert_int_eq(s->active[GS_STAT_LARGE].peak, 1);
    ck_assert_int_eq(s->active_bytes[GS_STAT_ALL].peak, 4096 + 12 * MiB + 8192);
    ck_assert_int_eq(s->active_bytes[GS_STAT_SMALL].current, 4096 + 8192);
    ck_assert_int_eq(s->allocated_bytes[GS_STAT_ALL].peak, 4096 + 12 * MiB);
    gs_heap_free_complete(f.heap, a);
    gs_heap_free_complete(f.heap, big);
    check_heap(f.heap);
    xfree(f.heap, b);
    s = gs_heap_stats(f.heap);
    ck_assert_int_eq(s->active[GS_STAT_ALL].current, 0);
    ck_assert_int_eq(s->active[GS_STAT_ALL].peak, 3);
    ck_assert_int_eq(s->active[GS_STAT_ALL].allocated, 3);
    ck_assert_int_eq(s->active[GS_STAT_ALL].freed, 3);
    ck_assert_int_eq(s->active_bytes[GS_STAT_LARGE].freed, 12 * MiB);
    ck_assert_int_eq(s->allocation[GS_STAT_SMALL].freed, 2);
    ck_assert_int_eq(s->requested_bytes[GS_STAT_ALL].freed, 4096 + 12 * MiB + 8192);
    ck_assert_int_eq(s->inactive_split[GS_STAT_ALL].allocated - s->inactive_split[GS_STAT_ALL].freed,
                     s->inactive_split[GS_STAT_ALL].current);
    fx_free(&f);
}
END_TEST

START_TEST(flush_completes_pending_frees_and_clears_owner)
{
    fixture f = fx_new("pytorch", DEV, 0);
    gs_block *a = xalloc(f.heap, 30 * MiB, 0);
    gs_block *owner = a;
    gs_heap_free_request(f.heap, a, &owner);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    check_heap(f.heap);
    ck_assert_ptr_null(owner);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 0);
    ck_assert_int_eq(STAT(f.heap, active, ALL).current, 0);
    fx_free(&f);
}
END_TEST

/* A flush completes pending frees the oldest first, as synchronize_and_free_events walks a
 * stream's events from the front: three 2 MiB blocks of one 20 MiB segment freed a, b, c, then
 * a flush: a completes alone (a second inactive split block beside the segment's free rest), b
 * joins it, c merges all. Newest first, c merged at once and the peak stayed 1. */
START_TEST(flush_completes_pending_frees_oldest_first)
{
    fixture f = fx_new("pytorch", DEV, 0);
    gs_block *v[3];
    for (int i = 0; i < 3; i++) v[i] = xalloc(f.heap, 2 * MiB, 0);
    ck_assert_ptr_eq(v[0]->seg, v[2]->seg);
    ck_assert_int_eq(STAT(f.heap, inactive_split, ALL).current, 1); /* the segment's rest */
    for (int i = 0; i < 3; i++) gs_heap_free_request(f.heap, v[i], NULL);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    check_heap(f.heap);
    ck_assert_int_eq(STAT(f.heap, inactive_split, ALL).peak, 2);
    ck_assert_int_eq(STAT(f.heap, inactive_split, ALL).current, 0);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 0);
    fx_free(&f);
}
END_TEST

START_TEST(roundup_power2_divisions_change_allocated_bytes)
{
    fixture f = fx_new("pytorch:roundup_power2_divisions:4", DEV, 0);
    gs_block *a = xalloc(f.heap, 1200 * 1024, 0); /* between 1 and 2 MiB: steps of 256 KiB */
    ck_assert_uint_eq(a->size, 1280 * 1024);
    xfree(f.heap, a);
    fx_free(&f);
}
END_TEST

START_TEST(zero_size_request_gets_minimum_block)
{
    fixture f = fx_new("pytorch", DEV, 0);
    gs_block *a = xalloc(f.heap, 0, 0);
    ck_assert_uint_eq(a->size, 512);
    ck_assert_int_eq(STAT(f.heap, requested_bytes, ALL).current, 0);
    xfree(f.heap, a);
    fx_free(&f);
}
END_TEST

/* ---- device failures leave the heap consistent ---- */

static fixture faulty_fx(const char *spec, uint64_t limit, gs_call_kind kind, uint64_t nth,
                         gs_status status)
{
    gs_sim_config sc = {.total_bytes = DEV};
    gs_faulty_config fc = {.mask = 1u << kind, .fail_nth = nth, .status = status};
    return fx_new_on(spec, gs_faulty_backend_new(gs_sim_backend_new(&sc), &fc), limit);
}

START_TEST(malloc_oom_from_device_goes_through_ladder)
{
    /* the 2nd cudaMalloc reports OOM once: the ladder flushes the cache and retries */
    fixture f = faulty_fx("pytorch", 0, GS_CALL_MALLOC, 2, GS_ERR_OOM);
    gs_block *a = xalloc(f.heap, 30 * MiB, 0);
    xfree(f.heap, a);
    gs_block *b = xalloc(f.heap, 40 * MiB, 0);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_alloc_retries, 1);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_device_free, 1); /* a's segment was flushed */
    ck_assert_uint_eq(gs_faulty_injected(f.be), 1);
    xfree(f.heap, b);
    fx_free(&f);
}
END_TEST

START_TEST(malloc_device_error_propagates_and_heap_stays_consistent)
{
    fixture f = faulty_fx("pytorch", 0, GS_CALL_MALLOC, 2, GS_ERR_DEVICE);
    gs_block *a = xalloc(f.heap, 4096, 0);
    gs_block *b = NULL;
    ck_assert_int_eq(gs_heap_malloc(f.heap, 30 * MiB, 0, &b), GS_ERR_DEVICE);
    check_heap(f.heap);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_ooms, 0); /* not an OOM */
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_alloc_retries, 0);
    gs_block *c = xalloc(f.heap, 30 * MiB, 0); /* the device works again */
    xfree(f.heap, a);
    xfree(f.heap, c);
    fx_free(&f);
}
END_TEST

START_TEST(free_failure_during_flush_keeps_segment_cached)
{
    fixture f = faulty_fx("pytorch", 0, GS_CALL_FREE, 1, GS_ERR_DEVICE);
    gs_block *a = xalloc(f.heap, 30 * MiB, 0);
    xfree(f.heap, a);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_ERR_DEVICE);
    check_heap(f.heap);
    ck_assert_int_eq(STAT(f.heap, segment, ALL).current, 1);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_device_free, 0);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK); /* second try succeeds */
    check_heap(f.heap);
    ck_assert_int_eq(STAT(f.heap, segment, ALL).current, 0);
    fx_free(&f);
}
END_TEST

/* ---- the free-block index with thousands of blocks in one size class ---- */

/* The best fit for size on stream 0 of pool: the smallest free block of at least size, the
 * lowest address among equals, found by walking every segment (not the index). */
static const gs_block *brute_best_fit(const gs_heap *h, unsigned pool, uint64_t size)
{
    const gs_block *best = NULL;
    for (const gs_segment *s = gs_heap_segments(h); s; s = s->next)
        for (const gs_block *b = s->head; b; b = b->next)
            if (b->state == GS_BLOCK_FREE && b->pool == pool && b->stream == 0 &&
                b->size >= size &&
                (!best || b->size < best->size || (b->size == best->size && b->addr < best->addr)))
                best = b;
    return best;
}

/* Four sizes of one class (128 KiB + 0..1.5 KiB: 2 KiB classes there), 2400 blocks, every
 * other one freed in a shuffled order: about 1200 free blocks in one class's tree, several
 * levels deep, built by splits; then random frees (merges take blocks out anywhere in the
 * tree: merges and evening-out of its nodes) and allocations, each checked against a best fit
 * found without the index, with the heap check after every operation. */
START_TEST(index_holds_thousands_of_blocks_in_one_class)
{
    fixture f = fx_new("pytorch", DEV, 0);
    enum { N = 2400, SMALL = 1 }; /* pytorch's pools: 0 large, 1 small */
    gs_block **live = g_new0(gs_block *, N);
    uint64_t rng = 7;
    for (int i = 0; i < N; i++) {
        uint64_t size = (UINT64_C(128) << 10) + (uint64_t)(i % 4) * 512;
        ck_assert_int_eq(gs_heap_malloc(f.heap, size, 0, &live[i]), GS_OK);
    }
    check_heap(f.heap);
    int order[N / 2];
    for (int i = 0; i < N / 2; i++) order[i] = 2 * i;
    for (int i = N / 2 - 1; i > 0; i--) {
        rng = rng * 6364136223846793005u + 1442695040888963407u;
        int j = (int)((rng >> 33) % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int i = 0; i < N / 2; i++) {
        gs_heap_free(f.heap, live[order[i]]);
        live[order[i]] = NULL;
        if (i % 97 == 0) check_heap(f.heap);
    }
    check_heap(f.heap);
    ck_assert_uint_ge(gs_pool_count(f.heap, SMALL), N / 2 - 200);
    for (int op = 0; op < 3000; op++) {
        rng = rng * 6364136223846793005u + 1442695040888963407u;
        int i = (int)((rng >> 33) % N);
        if (live[i] && op % 3) {
            gs_heap_free(f.heap, live[i]);
            live[i] = NULL;
        } else if (!live[i]) {
            uint64_t size = (UINT64_C(128) << 10) + ((rng >> 20) % 4) * 512;
            const gs_block *want = brute_best_fit(f.heap, SMALL, size);
            uint64_t want_addr = want ? want->addr : 0;
            ck_assert_int_eq(gs_heap_malloc(f.heap, size, 0, &live[i]), GS_OK);
            if (want) ck_assert_uint_eq(live[i]->addr, want_addr);
        }
        if (op % 5 == 0) check_heap(f.heap);
    }
    for (int i = 0; i < N; i++)
        if (live[i]) gs_heap_free(f.heap, live[i]);
    check_heap(f.heap);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    ck_assert_uint_eq(gs_pool_count(f.heap, SMALL), 0);
    check_heap(f.heap);
    g_free(live);
    fx_free(&f);
}
END_TEST

START_TEST(check_detects_corruption)
{
    fixture f = fx_new("pytorch", DEV, 0);
    gs_block *a = xalloc(f.heap, 4096, 0);
    a->size += 512; /* blocks no longer tile the segment, stats disagree */
    char *why = NULL;
    ck_assert_int_gt(gs_heap_check(f.heap, &why), 0);
    ck_assert_ptr_nonnull(why);
    g_free(why);
    a->size -= 512;
    check_heap(f.heap);
    xfree(f.heap, a);
    fx_free(&f);
}
END_TEST

/* ---- the free state at peak reserved (external_frag), kept as the heap changes ---- */

/* Every free block of every pool, walked through the policies' view: their bytes and the
 * largest, as the core used to recount them at each new peak. */
static uint64_t walk_free(const gs_heap *h, uint64_t *largest)
{
    uint64_t total = 0;
    *largest = 0;
    for (unsigned p = 0; p < gs_heap_policy(h)->ops->npools; p++)
        for (gs_block *b = gs_pool_first(h, p); b; b = gs_pool_next(h, b)) {
            total += b->size;
            *largest = MAX(*largest, b->size);
        }
    return total;
}

/* Random allocations and frees on several streams, sizes in both pools: after each malloc that
 * raised reserved memory to a new peak, the recorded free state equals a walk; at all times
 * gs_heap_free_bytes does (and gs_heap_check, after each operation, insists on it too). */
static void free_state_follows_walk(const char *spec)
{
    fixture f = fx_new(spec, DEV, 0);
    enum { LIVE = 40, OPS = 900 };
    gs_block *live[LIVE] = {0};
    uint64_t rng = 12345;
    int peaks = 0;
    for (int i = 0; i < OPS; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        unsigned k = (unsigned)(rng % LIVE);
        if (live[k]) {
            xfree(f.heap, live[k]);
            live[k] = NULL;
        } else {
            uint64_t size = (rng >> 8) % 4 == 0 ? (rng >> 16) % (24 * MiB) + 1
                                                : (rng >> 16) % (768 * 1024) + 1;
            int64_t before = STAT(f.heap, reserved_bytes, ALL).peak;
            live[k] = xalloc(f.heap, size, (uint32_t)((rng >> 40) % 3));
            if (STAT(f.heap, reserved_bytes, ALL).peak > before) {
                uint64_t largest, total = walk_free(f.heap, &largest);
                ck_assert_uint_eq(gs_heap_stats(f.heap)->total_free_at_peak_reserved, total);
                ck_assert_uint_eq(gs_heap_stats(f.heap)->largest_free_at_peak_reserved, largest);
                peaks++;
            }
        }
        uint64_t largest, big, total = walk_free(f.heap, &largest);
        ck_assert_uint_eq(gs_heap_free_bytes(f.heap, &big), total);
        ck_assert_uint_eq(big, largest);
        if (i % 300 == 299) {
            ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
            check_heap(f.heap);
        }
    }
    ck_assert_int_gt(peaks, 10);
    for (unsigned k = 0; k < LIVE; k++)
        if (live[k]) xfree(f.heap, live[k]);
    uint64_t big;
    ck_assert_uint_eq(gs_heap_free_bytes(f.heap, &big), walk_free(f.heap, &big));
    fx_free(&f);
}

START_TEST(free_state_at_peak_reserved_equals_a_walk)
{
    free_state_follows_walk("pytorch");
    free_state_follows_walk("pytorch:max_split_size_mb:20");
    free_state_follows_walk("pytorch:expandable_segments:True");
    free_state_follows_walk("cupy");
}
END_TEST

START_TEST(free_bytes_of_an_empty_heap_are_zero)
{
    fixture f = fx_new("pytorch", DEV, 0);
    uint64_t big = 1;
    ck_assert_uint_eq(gs_heap_free_bytes(f.heap, &big), 0);
    ck_assert_uint_eq(big, 0);
    ck_assert_uint_eq(gs_heap_free_bytes(f.heap, NULL), 0);
    gs_block *a = xalloc(f.heap, 4096, 7);
    ck_assert_uint_eq(gs_heap_free_bytes(f.heap, &big), 2 * MiB - 4096);
    ck_assert_uint_eq(big, 2 * MiB - 4096);
    /* the peak was reached by a's segment: what was free right after a was served */
    ck_assert_uint_eq(gs_heap_stats(f.heap)->total_free_at_peak_reserved, 2 * MiB - 4096);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->largest_free_at_peak_reserved, 2 * MiB - 4096);
    xfree(f.heap, a);
    ck_assert_uint_eq(gs_heap_free_bytes(f.heap, &big), 2 * MiB);
    ck_assert_uint_eq(big, 2 * MiB);
    fx_free(&f);
}
END_TEST

/* ---- expandable segments (expandable_segments:True) ---- */

#define EXP "pytorch:expandable_segments:True"

static uint64_t ncalls(const gs_heap *h, gs_call_kind k) { return gs_heap_devcalls(h)->n[k]; }

START_TEST(expandable_grows_by_mapping_pages_at_the_lowest_address)
{
    fixture f = fx_new(EXP, DEV, 0);
    gs_block *a = xalloc(f.heap, 30 * MiB, 0);
    const gs_segment *s = a->seg;
    ck_assert(s->expandable);
    ck_assert_uint_eq(s->page, 20 * MiB);              /* large pool: 20 MiB handles */
    ck_assert_uint_eq(s->size, 4608 * 20 * MiB);       /* 9/8 of 80 GiB of address space */
    ck_assert_uint_eq(a->addr, s->addr);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 40 * MiB); /* two pages */
    ck_assert_int_eq(STAT(f.heap, segment, ALL).current, 0); /* maps are not segments */
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_device_alloc, 1);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_VA_RESERVE), 1);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_PAGE_CREATE), 2);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_MAP), 2);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_SET_ACCESS), 1); /* one call for the whole range */
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_MALLOC), 0);
    /* 15 MiB: the free 10 MiB at the end plus one more page, right after a */
    gs_block *b = xalloc(f.heap, 15 * MiB, 0);
    ck_assert_uint_eq(b->addr, s->addr + 30 * MiB);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 60 * MiB);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_device_alloc, 2);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_VA_RESERVE), 1); /* the same segment grew */
    ck_assert_int_eq(STAT(f.heap, inactive_split, ALL).current, 0); /* expandable: never counted */
    ck_assert_uint_eq(dev_used_bytes(f.be), 60 * MiB);
    xfree(f.heap, a);
    xfree(f.heap, b);
    ck_assert_uint_eq(gs_pool_count(f.heap, 0), 1); /* one free block, 60 MiB */
    ck_assert_uint_eq(gs_pool_first(f.heap, 0)->size, 60 * MiB);
    ck_assert_int_eq(STAT(f.heap, inactive_split_bytes, ALL).current, 0);
    fx_free(&f);
}
END_TEST

START_TEST(expandable_empty_cache_unmaps_whole_free_pages_only)
{
    fixture f = fx_new(EXP, DEV, 0);
    gs_block *a = xalloc(f.heap, 30 * MiB, 0);         /* [0,30) of pages [0,20) [20,40) */
    uint64_t base = a->seg->addr;
    gs_block *b = xalloc(f.heap, 8 * MiB, 0);          /* [30,38) */
    ck_assert_uint_eq(b->addr, base + 30 * MiB);
    xfree(f.heap, a);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    check_heap(f.heap);
    /* only page [0,20) lies wholly inside the free [0,30); [20,30) and [38,40) stay mapped */
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 20 * MiB);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_device_free, 1);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_UNMAP), 1);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_PAGE_RELEASE), 1);
    ck_assert_uint_eq(dev_used_bytes(f.be), 20 * MiB);
    const gs_segment *s = gs_heap_segments(f.heap);
    ck_assert_int_eq(s->head->state, GS_BLOCK_UNMAPPED);
    ck_assert_uint_eq(s->head->size, 20 * MiB);
    ck_assert_int_eq(s->head->next->state, GS_BLOCK_FREE);
    ck_assert_uint_eq(s->head->next->size, 10 * MiB);
    /* growth refills the hole first: 30 MiB = the unmapped [0,20) plus the free [20,30) */
    gs_block *c = xalloc(f.heap, 30 * MiB, 0);
    ck_assert_uint_eq(c->addr, base);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 40 * MiB);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_device_alloc, 2);
    xfree(f.heap, b);
    xfree(f.heap, c);
    /* all free: every page goes, and the reservation with it */
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    check_heap(f.heap);
    ck_assert_ptr_null(gs_heap_segments(f.heap));
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 0);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_device_free, 2);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_VA_RELEASE), 1);
    ck_assert_uint_eq(dev_used_bytes(f.be), 0);
    fx_free(&f);
}
END_TEST

START_TEST(expandable_best_fit_spares_the_growable_end)
{
    fixture f = fx_new(EXP, DEV, 0);
    gs_block *a = xalloc(f.heap, 40 * MiB, 0);         /* [0,40) */
    uint64_t base = a->seg->addr;
    gs_block *b = xalloc(f.heap, 20 * MiB, 0);         /* [40,60) */
    gs_block *c = xalloc(f.heap, 20 * MiB, 0);         /* [60,80) */
    gs_block *d = xalloc(f.heap, 10 * MiB, 0);         /* [80,90), free [90,100) before the unmapped rest */
    ck_assert_uint_eq(d->addr, base + 80 * MiB);
    xfree(f.heap, c);
    /* Plain best fit would take the 10 MiB at [90,100); counted with the space it can grow
     * into, that block is the largest, so the 20 MiB at [60,80) serves. */
    gs_block *e = xalloc(f.heap, 10 * MiB, 0);
    ck_assert_uint_eq(e->addr, base + 60 * MiB);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_device_alloc, 4);
    xfree(f.heap, a);
    xfree(f.heap, b);
    xfree(f.heap, d);
    xfree(f.heap, e);
    fx_free(&f);
}
END_TEST

/* A reservation spans 9/8 of the device (thousands of page slots); its handle table holds only
 * the slots up to the highest page mapped, growing as pages are mapped higher up, and slots
 * above it read as holding none (gs_heap_check verifies every page under every block). */
START_TEST(expandable_handle_table_grows_with_the_pages_mapped)
{
    fixture f = fx_new(EXP, DEV, 0);
    enum { N = 100 }; /* 20 MiB pages: past the table's first 64 slots and its first doubling */
    gs_block *b[N];
    for (int i = 0; i < N; i++) b[i] = xalloc(f.heap, 20 * MiB, 0);
    const gs_segment *s = gs_heap_segments(f.heap);
    ck_assert_ptr_null(s->next); /* one segment: every page in the same reservation */
    ck_assert_uint_eq(s->mapped_pages, N);
    ck_assert_uint_ge(s->nhandles, N);
    ck_assert_uint_lt(s->nhandles, s->size / s->page); /* not the whole reservation */
    for (int i = 0; i < N; i++) ck_assert_uint_ne(s->handles[i], 0);
    for (uint64_t i = N; i < s->nhandles; i++) ck_assert_uint_eq(s->handles[i], 0);
    for (int i = 0; i < N; i += 2) xfree(f.heap, b[i]);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK); /* unmaps every other page */
    check_heap(f.heap);
    ck_assert_uint_eq(dev_used_bytes(f.be), (uint64_t)N / 2 * 20 * MiB);
    for (int i = 1; i < N; i += 2) xfree(f.heap, b[i]);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    check_heap(f.heap);
    ck_assert_ptr_null(gs_heap_segments(f.heap));
    ck_assert_uint_eq(dev_used_bytes(f.be), 0);
    fx_free(&f);
}
END_TEST

/* Every gs_stat of a gs_stats, in no particular order (for the brute force below). */
#define ONE_ARRAY(name) +GS_STAT_TYPES
enum { NSTATS = 0 GS_STAT_ARRAYS(ONE_ARRAY) + 2 };
#undef ONE_ARRAY
static void stat_list(gs_stats *s, gs_stat *out[NSTATS])
{
    size_t n = 0;
#define LIST(name) for (int t = 0; t < GS_STAT_TYPES; t++) out[n++] = &s->name[t];
    GS_STAT_ARRAYS(LIST)
#undef LIST
    out[n++] = &s->oversize_allocations;
    out[n++] = &s->oversize_segments;
}

/* gs_stats_sums: after each event, each peak is the highest sum over the heaps of that stat's
 * current seen after any event so far, as a brute force over every heap finds it, and the
 * figures at the peaks of allocated and reserved bytes are those of that moment. Two heaps,
 * three and six (the other heaps are one, or a running sum), events in runs on one heap and
 * switches, deferred frees (active), oversize blocks, empty_cache, and changes to two heaps at
 * once marked with gs_stats_sums_dirty. A free is followed by gs_stats_sums_after_free (which
 * compares the inactive split counts only), under PyTorch's default with max_split_size_mb, with
 * expandable segments, and under stitch: no free raises another current, or a peak is missed. */
START_TEST(stats_sums_follow_the_sums_of_currents)
{
    enum { HMAX = 6, SLOTS = 64 };
    const int H = (int[]){2, 3, 6}[_i % 3]; /* two heaps (the thresholds' fast case), more */
    const char *spec = (const char *[]){"pytorch:max_split_size_mb:40",
                                        "pytorch:expandable_segments:True", "stitch"}[_i / 3];
    fixture f[HMAX];
    gs_heap *heaps[HMAX];
    gs_block *live[HMAX][SLOTS];
    memset(live, 0, sizeof live);
    for (int k = 0; k < H; k++) {
        f[k] = fx_new(spec, 2 * GiB, 0);
        heaps[k] = f[k].heap;
    }
    gs_stats_sums sums;
    gs_stats_sums_init(&sums);
    gs_stats want;
    memset(&want, 0, sizeof want);
    gs_stat *wl[NSTATS], *gl[NSTATS];
    stat_list(&want, wl);
    stat_list(&sums.peaks, gl);
    uint64_t rng = 11;
    int k = 0, rises = 0;
    for (int op = 0; op < 6000; op++) {
        rng = rng * 6364136223846793005u + 1442695040888963407u;
        if ((rng >> 60) < 3) k = (int)((rng >> 40) % H); /* mostly runs on one heap */
        int i = (int)((rng >> 20) % SLOTS);
        gs_block **b = &live[k][i];
        bool freed = true;
        if (op % 997 == 996) {
            freed = false;
            ck_assert_int_eq(gs_heap_empty_cache(heaps[k]), GS_OK);
            ck_assert_int_eq(gs_heap_empty_cache(heaps[(k + 1) % H]), GS_OK);
            gs_stats_sums_dirty(&sums); /* two heaps changed */
        } else if (!*b) {
            uint64_t size = (rng >> 33) % 8 ? (rng >> 33) % (4 * MiB) : (rng >> 33) % (60 * MiB);
            (void)gs_heap_malloc(heaps[k], size + 1, (uint32_t)((rng >> 50) % 2), b);
            freed = false;
        } else if ((*b)->state == GS_BLOCK_PENDING) {
            gs_heap_free_complete(heaps[k], *b);
            *b = NULL;
        } else if ((rng >> 45) % 4 == 0) {
            gs_heap_free_request(heaps[k], *b, b);
        } else {
            gs_heap_free(heaps[k], *b);
            *b = NULL;
        }
        if (freed) gs_stats_sums_after_free(&sums, heaps, H, (size_t)k);
        else gs_stats_sums_after(&sums, heaps, H, (size_t)k);
        int64_t allocated = 0, reserved = 0, requested = 0;
        uint64_t free_bytes = 0, largest = 0;
        for (int j = 0; j < H; j++) {
            const gs_stats *o = gs_heap_stats_now(heaps[j]);
            allocated += o->allocated_bytes[GS_STAT_ALL].current;
            reserved += o->reserved_bytes[GS_STAT_ALL].current;
            requested += o->requested_bytes[GS_STAT_ALL].current;
            uint64_t big;
            free_bytes += gs_heap_free_bytes(heaps[j], &big);
            largest = MAX(largest, big);
        }
        if (allocated > want.allocated_bytes[GS_STAT_ALL].peak)
            want.requested_at_peak_allocated = requested;
        if (reserved > want.reserved_bytes[GS_STAT_ALL].peak) {
            want.total_free_at_peak_reserved = free_bytes;
            want.largest_free_at_peak_reserved = largest;
        }
        for (int s = 0; s < NSTATS; s++) {
            int64_t sum = 0;
            for (int j = 0; j < H; j++) {
                gs_stat *hl[NSTATS];
                stat_list((gs_stats *)gs_heap_stats_now(heaps[j]), hl);
                sum += hl[s]->current;
            }
            if (sum > wl[s]->peak) {
                wl[s]->peak = sum;
                rises++;
            }
            ck_assert_msg(gl[s]->peak == wl[s]->peak, "op %d stat %d: peak %" G_GINT64_FORMAT
                          ", by brute force %" G_GINT64_FORMAT, op, s, gl[s]->peak, wl[s]->peak);
        }
        ck_assert_int_eq(sums.peaks.requested_at_peak_allocated, want.requested_at_peak_allocated);
        ck_assert_uint_eq(sums.peaks.total_free_at_peak_reserved, want.total_free_at_peak_reserved);
        ck_assert_uint_eq(sums.peaks.largest_free_at_peak_reserved,
                          want.largest_free_at_peak_reserved);
    }
    ck_assert_int_gt(rises, 100);
    ck_assert_uint_gt(want.total_free_at_peak_reserved, want.largest_free_at_peak_reserved);
    ck_assert_int_gt(want.active[GS_STAT_ALL].peak, want.allocation[GS_STAT_ALL].peak);
    if (_i / 3 == 0) { /* (expandable blocks are never inactive splits, as in PyTorch) */
        ck_assert_int_gt(want.oversize_allocations.peak, 0);
        ck_assert_int_gt(want.inactive_split[GS_STAT_ALL].peak, 0);
    }
    for (int j = 0; j < H; j++) {
        check_heap(heaps[j]);
        fx_free(&f[j]);
    }
    gs_stats_sums_clear(&sums);
}
END_TEST

/* gs_stats_sums over many heaps, each event on another one (20,000 one-event devices cost
 * minutes when every change of heap summed them all again): the calls read about two heaps an
 * event, not all of them, and the peaks are the sums' all the same. */
START_TEST(stats_sums_read_two_heaps_an_event)
{
    enum { H = 1000, ROUNDS = 3 };
    fixture *f = g_new(fixture, H);
    gs_heap **heaps = g_new(gs_heap *, H);
    gs_block **b = g_new0(gs_block *, H * ROUNDS);
    for (int k = 0; k < H; k++) {
        f[k] = fx_new("pytorch", 2 * GiB, 0);
        heaps[k] = f[k].heap;
    }
    gs_stats_sums sums;
    gs_stats_sums_init(&sums);
    int64_t allocated = 0, reserved = 0;
    size_t events = 0;
    for (int r = 0; r < ROUNDS; r++)
        for (int k = 0; k < H; k++) {
            ck_assert_int_eq(gs_heap_malloc(heaps[k], MiB + 512 * (uint64_t)r, 0, &b[r * H + k]),
                             GS_OK);
            gs_stats_sums_after(&sums, heaps, H, (size_t)k);
            events++;
        }
    for (int k = 0; k < H; k++) {
        const gs_stats *o = gs_heap_stats_now(heaps[k]);
        allocated += o->allocated_bytes[GS_STAT_ALL].current;
        reserved += o->reserved_bytes[GS_STAT_ALL].current;
    }
    ck_assert_int_eq(sums.peaks.allocated_bytes[GS_STAT_ALL].peak, allocated);
    ck_assert_int_eq(sums.peaks.reserved_bytes[GS_STAT_ALL].peak, reserved);
    ck_assert_int_eq(sums.peaks.allocation[GS_STAT_ALL].peak, H * ROUNDS);
    ck_assert_msg(sums.heaps_read <= 2 * events + H,
                  "%" G_GUINT64_FORMAT " heaps read for %zu "
                  "events of %d heaps",
                  sums.heaps_read, events, H);
    for (int k = 0; k < H; k++) {
        for (int r = 0; r < ROUNDS; r++) gs_heap_free(heaps[k], b[r * H + k]);
        fx_free(&f[k]);
    }
    gs_stats_sums_clear(&sums);
    g_free(b);
    g_free(heaps);
    g_free(f);
}
END_TEST

START_TEST(expandable_split_rule_is_512_bytes_in_both_pools)
{
    /* 11.5 MiB: a cudaMalloc'd 12 MiB segment keeps its 0.5 MiB remainder with the block
     * (large pool: split only above 1 MiB); in an expandable segment it is split off. */
    fixture g = fx_new("pytorch", DEV, 0);
    gs_block *x = xalloc(g.heap, 11 * MiB + 512 * 1024, 0);
    ck_assert_uint_eq(x->size, 12 * MiB);
    xfree(g.heap, x);
    fx_free(&g);
    fixture f = fx_new(EXP, DEV, 0);
    gs_block *a = xalloc(f.heap, 11 * MiB + 512 * 1024, 0);
    ck_assert_uint_eq(a->size, 11 * MiB + 512 * 1024);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, LARGE).current, 20 * MiB);
    gs_block *b = xalloc(f.heap, 4096, 0); /* small pool: its own segment of 2 MiB handles */
    ck_assert_uint_eq(b->seg->page, 2 * MiB);
    ck_assert_ptr_ne(b->seg, a->seg);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, SMALL).current, 2 * MiB);
    ck_assert_uint_eq(b->size, 4096);
    xfree(f.heap, a);
    xfree(f.heap, b);
    fx_free(&f);
}
END_TEST

START_TEST(expandable_oom_ladder_unmaps_then_retries)
{
    /* 100 MiB device; address space per segment: 9/8 of it, rounded up to 20 MiB pages */
    fixture f = fx_new(EXP, 100 * MiB, 0);
    gs_block *a = xalloc(f.heap, 60 * MiB, 0);
    xfree(f.heap, a); /* 60 MiB stays mapped, cached on stream 0 */
    /* stream 1 gets its own segment; its third page finds no memory: the two created in that
     * call are released, the cache is flushed (stream 0's pages unmapped, its reservation
     * freed), and the counted retry maps all three */
    gs_block *b = xalloc(f.heap, 60 * MiB, 1);
    ck_assert_uint_eq(b->addr, b->seg->addr);
    ck_assert_uint_eq(b->seg->size, 120 * MiB);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_alloc_retries, 1);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_device_free, 1);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_ooms, 0);
    ck_assert_uint_eq(gs_heap_devcalls(f.heap)->failed[GS_CALL_PAGE_CREATE], 1);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_VA_RESERVE), 2);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_VA_RELEASE), 1);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 60 * MiB);
    ck_assert_uint_eq(dev_used_bytes(f.be), 60 * MiB);
    /* nothing left to give: a second 60 MiB on stream 0 is an OOM, and the heap is intact */
    gs_block *c = NULL;
    ck_assert_int_eq(gs_heap_malloc(f.heap, 60 * MiB, 0, &c), GS_ERR_OOM);
    check_heap(f.heap);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_ooms, 1);
    ck_assert_uint_eq(dev_used_bytes(f.be), 60 * MiB);
    xfree(f.heap, b);
    fx_free(&f);
}
END_TEST

START_TEST(expandable_with_max_split_size_release_passes_expandable_blocks_over)
{
    /* release_available_cached_blocks frees only cudaMalloc'd oversize blocks (PyTorch 2.9+);
     * the full flush is what unmaps expandable ones */
    fixture f = fx_new(EXP ",max_split_size_mb:20", DEV, 100 * MiB);
    gs_block *a = xalloc(f.heap, 60 * MiB, 0);
    xfree(f.heap, a);
    gs_block *b = xalloc(f.heap, 80 * MiB, 0); /* 60 + 80 > 100: the limit refuses growth */
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_alloc_retries, 1);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_device_free, 1);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_FREE), 0);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_VA_RESERVE), 2);
    ck_assert_int_eq(gs_heap_stats(f.heap)->oversize_segments.allocated, 0);
    ck_assert_int_eq(gs_heap_stats(f.heap)->oversize_allocations.current, 1);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 80 * MiB);
    xfree(f.heap, b);
    fx_free(&f);
}
END_TEST

START_TEST(expandable_failed_map_gives_back_its_pages)
{
    fixture f = faulty_fx(EXP, 0, GS_CALL_MAP, 2, GS_ERR_DEVICE);
    gs_block *a = NULL;
    ck_assert_int_eq(gs_heap_malloc(f.heap, 30 * MiB, 0, &a), GS_ERR_DEVICE);
    check_heap(f.heap);
    ck_assert_uint_eq(dev_used_bytes(f.be), 0); /* page 0 unmapped, both handles released */
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 0);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_device_alloc, 0);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_UNMAP), 1);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_PAGE_RELEASE), 2);
    a = xalloc(f.heap, 30 * MiB, 0); /* the device works again */
    ck_assert_uint_eq(a->addr, a->seg->addr);
    ck_assert_uint_eq(dev_used_bytes(f.be), 40 * MiB);
    xfree(f.heap, a);
    fx_free(&f);
}
END_TEST

START_TEST(expandable_create_oom_goes_through_the_ladder)
{
    fixture f = faulty_fx(EXP, 0, GS_CALL_PAGE_CREATE, 2, GS_ERR_OOM);
    gs_block *a = xalloc(f.heap, 30 * MiB, 0);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_alloc_retries, 1);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_PAGE_CREATE), 4);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_PAGE_RELEASE), 1); /* the first page of the failed call */
    ck_assert_uint_eq(dev_used_bytes(f.be), 40 * MiB);
    xfree(f.heap, a);
    fx_free(&f);
}
END_TEST

START_TEST(expandable_needs_a_backend_with_vmm)
{
    static const gs_backend_ops no_vmm_ops = {.version = GS_BACKEND_VERSION, .name = "novmm"};
    gs_backend be = {.ops = &no_vmm_ops};
    gs_policy *p = gs_policy_new(EXP, NULL);
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_null(gs_heap_new(p, &be, NULL));
    gs_policy_free(p);
}
END_TEST

/* ---- several heaps on one device (the replay's --clients) ---- */

typedef struct {
    gs_heap *other;  /* the heap the reclaim callback empties */
    int calls;
    int64_t reserved[2]; /* on_reserve's running sums by segment tag */
    uint64_t ops;        /* on_reserve's calls */
} two_heaps;

static bool release_other(void *ud, gs_heap *h, uint64_t bytes, gs_status *st)
{
    two_heaps *th = ud;
    th->calls++;
    ck_assert_ptr_ne(h, th->other);
    uint64_t before = gs_heap_reserved(th->other);
    *st = gs_heap_release_cached(th->other);
    check_heap(th->other);
    return gs_heap_reserved(th->other) < before;
}

static void count_reserve(void *ud, const gs_segment *s, uint64_t addr, int64_t bytes)
{
    two_heaps *th = ud;
    ck_assert_uint_lt(s->tag, 2);
    uint64_t n = bytes > 0 ? (uint64_t)bytes : (uint64_t)-bytes;
    ck_assert(addr >= s->addr && addr + n <= s->addr + s->size); /* what changed, in s */
    th->reserved[s->tag] += bytes;
    th->ops++;
}

/* The device refuses heap b while heap a caches 40 of its 64 MiB: without a reclaim callback
 * b fails exactly as before; with one, a releases its cache, b tries once more (counted apart
 * from PyTorch's retry) and succeeds. */
START_TEST(reclaim_asks_the_other_heap_then_retries_once)
{
    for (int with = 0; with < 2; with++) {
        gs_sim_config sc = {.total_bytes = 64 * MiB};
        gs_backend *be = gs_sim_backend_new(&sc);
        GError *err = NULL;
        gs_policy *p = gs_policy_new("pytorch", &err);
        two_heaps th = {0};
        gs_heap_config hc = {.ud = &th, .reclaim = with ? release_other : NULL};
        gs_heap *a = gs_heap_new(p, be, &hc), *b = gs_heap_new(p, be, &hc);
        th.other = a;
        xfree(a, xalloc(a, 40 * MiB, 0));
        gs_block *x = NULL;
        gs_status st = gs_heap_malloc(b, 30 * MiB, 0, &x);
        check_heap(a);
        check_heap(b);
        const gs_stats *s = gs_heap_stats(b);
        ck_assert_uint_eq(s->num_alloc_retries, 1); /* its own flush and retry come first */
        if (!with) {
            ck_assert_int_eq(st, GS_ERR_OOM);
            ck_assert_uint_eq(s->num_ooms, 1);
            ck_assert_uint_eq(s->num_reclaim_retries, 0);
            ck_assert_uint_eq(gs_heap_reserved(a), 40 * MiB);
        } else {
            ck_assert_int_eq(st, GS_OK);
            ck_assert_int_eq(th.calls, 1);
            ck_assert_uint_eq(s->num_ooms, 0);
            ck_assert_uint_eq(s->num_reclaim_retries, 1);
            ck_assert_uint_eq(gs_heap_reserved(a), 0);
            ck_assert_uint_eq(gs_heap_stats(a)->num_device_free, 1);
            xfree(b, x);
        }
        gs_heap_free_all(a);
        gs_heap_free_all(b);
        gs_policy_free(p);
        gs_backend_destroy(be);
    }
}
END_TEST

/* A heap's own limit is not the device's refusal: the others are not asked. */
START_TEST(reclaim_not_asked_for_the_heap_limit)
{
    gs_sim_config sc = {.total_bytes = 1 * GiB};
    gs_backend *be = gs_sim_backend_new(&sc);
    GError *err = NULL;
    gs_policy *p = gs_policy_new("pytorch", &err);
    two_heaps th = {0};
    gs_heap_config hc = {.limit = 50 * MiB, .ud = &th, .reclaim = release_other};
    gs_heap *a = gs_heap_new(p, be, &hc), *b = gs_heap_new(p, be, &hc);
    th.other = a;
    xfree(a, xalloc(a, 40 * MiB, 0));
    gs_block *x = NULL;
    ck_assert_int_eq(gs_heap_malloc(b, 60 * MiB, 0, &x), GS_ERR_OOM);
    check_heap(b);
    ck_assert_int_eq(th.calls, 0);
    ck_assert_uint_eq(gs_heap_reserved(a), 40 * MiB);
    gs_heap_free_all(a);
    gs_heap_free_all(b);
    gs_policy_free(p);
    gs_backend_destroy(be);
}
END_TEST

/* on_reserve sees every change of reserved bytes, with the tag of the segment's maker; for
 * cudaMalloc segments and for the pages of expandable ones; once per device operation, as
 * num_device_alloc and num_device_free count them (the memory_viz export's entries). */
START_TEST(on_reserve_follows_reserved_bytes_by_tag)
{
    const char *specs[] = {"pytorch", "pytorch:expandable_segments:True"};
    for (size_t i = 0; i < G_N_ELEMENTS(specs); i++) {
        two_heaps th = {0};
        gs_sim_config sc = {.total_bytes = 1 * GiB};
        gs_backend *be = gs_sim_backend_new(&sc);
        GError *err = NULL;
        gs_policy *p = gs_policy_new(specs[i], &err);
        gs_heap_config hc = {.ud = &th, .on_reserve = count_reserve};
        gs_heap *h = gs_heap_new(p, be, &hc);
        gs_heap_set_tag(h, 0);
        gs_block *a = xalloc(h, 30 * MiB, 0);
        gs_block *b = xalloc(h, 4096, 0);
        gs_heap_set_tag(h, 1);
        gs_block *c = xalloc(h, 100 * MiB, 1);
        /* under tag 1 on stream 0: a new segment of tag 1's, or, with expandable segments, pages
         * mapped into tag 0's reservation and charged to tag 0 */
        gs_block *d = xalloc(h, 30 * MiB, 0);
        ck_assert_int_eq(th.reserved[0] + th.reserved[1], (int64_t)gs_heap_reserved(h));
        ck_assert_int_gt(th.reserved[1], 0);
        xfree(h, a);
        xfree(h, b);
        xfree(h, c);
        ck_assert_int_eq(gs_heap_empty_cache(h), GS_OK);
        check_heap(h);
        ck_assert_int_eq(th.reserved[0] + th.reserved[1], (int64_t)gs_heap_reserved(h));
        xfree(h, d);
        ck_assert_int_eq(gs_heap_empty_cache(h), GS_OK);
        ck_assert_int_eq(th.reserved[0], 0);
        ck_assert_int_eq(th.reserved[1], 0);
        const gs_stats *st = gs_heap_stats(h);
        ck_assert_uint_eq(th.ops, st->num_device_alloc + st->num_device_free);
        gs_heap_free_all(h);
        gs_policy_free(p);
        gs_backend_destroy(be);
    }
}
END_TEST

/* ---- private pools (docs/pytorch-allocator.md §3) ---- */

START_TEST(private_pool_serves_only_its_routed_stream)
{
    fixture f = fx_new("pytorch", DEV, 0);
    ck_assert_int_eq(gs_heap_pool_begin(f.heap, 7, false, 1), GS_OK);
    gs_block *p = xalloc(f.heap, 4096, 1);     /* the capture stream: the private pool */
    gs_block *o = xalloc(f.heap, 4096, 0);     /* another stream: the ordinary pool */
    ck_assert_uint_eq(gs_pool_private(p->pool), 1);
    ck_assert_uint_eq(gs_pool_kind(p->pool), 1);  /* the policy's small pool */
    ck_assert_uint_eq(gs_heap_pool_id(f.heap, 1), 7);
    ck_assert_uint_eq(gs_pool_private(o->pool), 0);
    ck_assert_ptr_ne(p->seg, o->seg);
    check_heap(f.heap);
    gs_heap_pool_end(f.heap, 7);
    xfree(f.heap, p);                          /* back to the private pool */
    gs_block *q = xalloc(f.heap, 4096, 1);     /* no route: the ordinary pool, a new segment */
    ck_assert_uint_eq(gs_pool_private(q->pool), 0);
    ck_assert_int_eq(STAT(f.heap, segment, SMALL).current, 3);
    check_heap(f.heap);
    fx_free(&f);
}
END_TEST

START_TEST(private_pool_every_stream_and_reuse_within)
{
    fixture f = fx_new("pytorch", DEV, 0);
    ck_assert_int_eq(gs_heap_pool_begin(f.heap, 3, true, 0), GS_OK);
    gs_block *a = xalloc(f.heap, 30 * MiB, 0);
    gs_block *b = xalloc(f.heap, 4096, 5);     /* every stream: the pool too */
    ck_assert_uint_eq(gs_pool_private(a->pool), 1);
    ck_assert_uint_eq(gs_pool_private(b->pool), 1);
    uint64_t addr = a->addr;
    xfree(f.heap, a);
    gs_block *c = xalloc(f.heap, 30 * MiB, 0); /* served from the pool's own cache */
    ck_assert_uint_eq(c->addr, addr);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_device_alloc, 2);
    check_heap(f.heap);
    fx_free(&f);
}
END_TEST

START_TEST(empty_cache_leaves_pools_in_use_and_frees_released_ones)
{
    fixture f = fx_new("pytorch", DEV, 0);
    ck_assert_int_eq(gs_heap_pool_begin(f.heap, 1, false, 0), GS_OK);
    gs_block *a = xalloc(f.heap, 30 * MiB, 0);
    gs_heap_pool_end(f.heap, 1);
    gs_block *o = xalloc(f.heap, 30 * MiB, 0);
    xfree(f.heap, a);
    xfree(f.heap, o);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    /* the ordinary segment goes; the pool's stays while the pool is in use */
    ck_assert_int_eq(STAT(f.heap, segment, LARGE).current, 1);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 30 * MiB);
    check_heap(f.heap);
    /* released (a graph's destruction): freeable, but nothing is freed until empty_cache */
    ck_assert_int_eq(gs_heap_pool_release(f.heap, 1, false), GS_OK);
    ck_assert_int_eq(STAT(f.heap, segment, LARGE).current, 1);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    ck_assert_int_eq(STAT(f.heap, segment, LARGE).current, 0);
    ck_assert_uint_eq(gs_heap_pool_id(f.heap, 1), 0); /* no segment left: the pool is gone */
    ck_assert_int_eq(gs_heap_pool_release(f.heap, 1, false), GS_ERR_INVALID);
    check_heap(f.heap);
    fx_free(&f);
}
END_TEST

/* A capture forked onto a side stream: PyTorch's filter takes both streams, so the side
 * stream joins the recording, with no use of its own; the end closes both routes. */
START_TEST(side_stream_joins_the_recording_without_a_use)
{
    fixture f = fx_new("pytorch", DEV, 0);
    ck_assert_int_eq(gs_heap_pool_begin(f.heap, 5, false, 1), GS_OK);
    ck_assert_int_eq(gs_heap_pool_begin(f.heap, 5, false, 3), GS_OK);          /* joins */
    ck_assert_int_eq(gs_heap_pool_begin(f.heap, 5, false, 3), GS_ERR_INVALID); /* already */
    ck_assert_int_eq(gs_heap_pool_begin(f.heap, 5, true, 0), GS_ERR_INVALID);
    ck_assert_uint_ne(gs_heap_route_of(f.heap, 3), 0);
    gs_block *side = xalloc(f.heap, 30 * MiB, 3); /* the capture's, on the side stream */
    ck_assert_uint_ne(gs_pool_private(side->pool), 0);
    gs_heap_pool_end(f.heap, 5);
    ck_assert_uint_eq(gs_heap_route_of(f.heap, 1), 0);
    ck_assert_uint_eq(gs_heap_route_of(f.heap, 3), 0);
    xfree(f.heap, side);
    gs_block *eager = xalloc(f.heap, 30 * MiB, 3); /* not the capture's freed block */
    ck_assert_uint_eq(gs_pool_private(eager->pool), 0);
    xfree(f.heap, eager);
    ck_assert_int_eq(gs_heap_pool_release(f.heap, 5, true), GS_OK); /* its one use */
    ck_assert_int_eq(gs_heap_pool_release(f.heap, 5, false), GS_ERR_INVALID);
    ck_assert_int_eq(STAT(f.heap, segment, LARGE).current, 1); /* the ordinary one stays */
    check_heap(f.heap);
    fx_free(&f);
}
END_TEST

/* A pool released while still recorded to (out of PyTorch's order, as a careless caller may):
 * its segments go at the flush, but its routes still lead to it until the end closes them,
 * and then nothing is left behind (the fuzzer found requests routed to a forgotten pool,
 * which no release could empty). */
START_TEST(pool_released_while_recorded_to_is_not_lost)
{
    fixture f = fx_new("pytorch", DEV, 0);
    ck_assert_int_eq(gs_heap_pool_begin(f.heap, 4, false, 1), GS_OK);
    ck_assert_int_eq(gs_heap_pool_release(f.heap, 4, false), GS_OK); /* freeable, routed */
    gs_block *a = xalloc(f.heap, 2 * MiB, 1);
    xfree(f.heap, a);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 0);
    gs_heap_pool_end(f.heap, 4);
    ck_assert_uint_eq(gs_heap_route_of(f.heap, 1), 0); /* the end found the pool */
    gs_block *b = xalloc(f.heap, 2 * MiB, 1);          /* the ordinary pools' */
    ck_assert_uint_eq(gs_pool_private(b->pool), 0);
    xfree(f.heap, b);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 0);
    ck_assert_uint_eq(gs_heap_pool_id(f.heap, 1), 0); /* forgotten now */
    check_heap(f.heap);
    fx_free(&f);
}
END_TEST

/* Captures that allocate nothing, each released: a pool that holds nothing and that no route
 * leads to is gone at its last release, so they never use up the 15 slots (a review found the
 * sixteenth capture refused, its blocks then in the ordinary pools). */
START_TEST(empty_captures_give_their_slots_back)
{
    fixture f = fx_new("pytorch", DEV, 0);
    for (uint32_t id = 1; id <= 3 * GS_MAX_PRIVATE_POOLS; id++) {
        ck_assert_int_eq(gs_heap_pool_begin(f.heap, id, false, 1), GS_OK);
        gs_heap_pool_end(f.heap, id);
        ck_assert_int_eq(gs_heap_pool_release(f.heap, id, false), GS_OK);
        ck_assert_uint_eq(gs_heap_pool_id(f.heap, 1), 0);
    }
    ck_assert_int_eq(gs_heap_pool_begin(f.heap, 1000, false, 1), GS_OK);
    gs_block *a = xalloc(f.heap, 8 * MiB, 1);
    ck_assert_uint_ne(gs_pool_private(a->pool), 0);
    gs_heap_pool_end(f.heap, 1000);
    xfree(f.heap, a);
    ck_assert_int_eq(gs_heap_pool_release(f.heap, 1000, false), GS_OK); /* holds a segment */
    ck_assert_uint_eq(gs_heap_pool_id(f.heap, 1), 1000);                /* until a flush */
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    ck_assert_uint_eq(gs_heap_pool_id(f.heap, 1), 0);
    check_heap(f.heap);
    fx_free(&f);
}
END_TEST

START_TEST(shared_pool_counts_uses_and_mempool_release_empties_now)
{
    fixture f = fx_new("pytorch", DEV, 0);
    /* two captures into one pool (torch.cuda.graph(g2, pool=g1.pool())) */
    ck_assert_int_eq(gs_heap_pool_begin(f.heap, 9, false, 2), GS_OK);
    ck_assert_int_eq(gs_heap_pool_begin(f.heap, 9, false, 2), GS_ERR_INVALID); /* already */
    gs_block *a = xalloc(f.heap, 30 * MiB, 2);
    gs_heap_pool_end(f.heap, 9);
    ck_assert_int_eq(gs_heap_pool_begin(f.heap, 9, false, 2), GS_OK);
    gs_block *b = xalloc(f.heap, 30 * MiB, 2);
    gs_heap_pool_end(f.heap, 9);
    gs_block *o = xalloc(f.heap, 30 * MiB, 0);
    xfree(f.heap, a);
    xfree(f.heap, b);
    xfree(f.heap, o);
    ck_assert_int_eq(gs_heap_pool_release(f.heap, 9, true), GS_OK); /* one use left */
    ck_assert_int_eq(STAT(f.heap, segment, LARGE).current, 3);
    ck_assert_int_eq(gs_heap_pool_release(f.heap, 9, true), GS_OK); /* none: emptied now */
    ck_assert_int_eq(STAT(f.heap, segment, LARGE).current, 1);    /* the ordinary one stays */
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_device_free, 2);
    check_heap(f.heap);
    fx_free(&f);
}
END_TEST

START_TEST(block_freed_after_release_returns_to_its_pool)
{
    fixture f = fx_new("pytorch", DEV, 0);
    ck_assert_int_eq(gs_heap_pool_begin(f.heap, 4, false, 0), GS_OK);
    gs_block *a = xalloc(f.heap, 30 * MiB, 0);
    gs_heap_pool_end(f.heap, 4);
    ck_assert_int_eq(gs_heap_pool_release(f.heap, 4, true), GS_OK); /* a is still held */
    ck_assert_int_eq(STAT(f.heap, segment, LARGE).current, 1);
    ck_assert_uint_eq(gs_heap_pool_id(f.heap, 1), 4);
    xfree(f.heap, a);                           /* into the freeable pool, not the ordinary one */
    gs_block *o = xalloc(f.heap, 30 * MiB, 0);
    ck_assert_uint_eq(gs_pool_private(o->pool), 0); /* no reuse across pools: a new segment */
    ck_assert_int_eq(STAT(f.heap, segment, LARGE).current, 2);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    ck_assert_int_eq(STAT(f.heap, segment, LARGE).current, 1);
    check_heap(f.heap);
    fx_free(&f);
}
END_TEST

START_TEST(no_full_flush_while_routing)
{
    /* A 40 MiB limit: the ordinary 30 MiB segment is cached; during a capture PyTorch skips
     * the full flush, so a 30 MiB request of the pool fails with no retry. */
    fixture f = fx_new("pytorch", DEV, 40 * MiB);
    gs_block *o = xalloc(f.heap, 30 * MiB, 0);
    xfree(f.heap, o);
    ck_assert_int_eq(gs_heap_pool_begin(f.heap, 1, false, 0), GS_OK);
    gs_block *b = NULL;
    ck_assert_int_eq(gs_heap_malloc(f.heap, 30 * MiB, 0, &b), GS_ERR_OOM);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_alloc_retries, 0);
    gs_heap_pool_end(f.heap, 1);
    check_heap(f.heap);
    fx_free(&f);
}
END_TEST

START_TEST(private_pool_expandable_has_its_own_reservation)
{
    fixture f = fx_new("pytorch:expandable_segments:True", DEV, 0);
    gs_block *o = xalloc(f.heap, 4 * MiB, 0);
    ck_assert_int_eq(gs_heap_pool_begin(f.heap, 2, false, 0), GS_OK);
    gs_block *p = xalloc(f.heap, 4 * MiB, 0);
    gs_heap_pool_end(f.heap, 2);
    ck_assert(p->expandable && o->expandable);
    ck_assert_ptr_ne(p->seg, o->seg);
    xfree(f.heap, p);
    xfree(f.heap, o);
    ck_assert_int_eq(gs_heap_pool_release(f.heap, 2, true), GS_OK);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, LARGE).current, 20 * MiB); /* o's page */
    check_heap(f.heap);
    fx_free(&f);
}
END_TEST

/* ---- stitch (policies/stitch.c, core/stitch.c) ---- */

/* The mechanism's tests name the eager setting (every growth past the slack stitches first, by
 * exactly what is missing, as one handle of any size); the default is the lazy one, tested by
 * name below. */
#define EAGER "stitch:headroom:0,grow:0,ahead:0,fine:0,max_handle_frac:0"

START_TEST(stitch_growth_is_one_handle_of_the_size_needed)
{
    fixture f = fx_new(EAGER, DEV, 0);
    gs_block *a = xalloc(f.heap, 30 * MiB, 0);
    const gs_segment *s = a->seg;
    ck_assert(s->expandable && s->hpages);
    ck_assert_uint_eq(s->page, 2 * MiB);
    ck_assert_uint_eq(a->addr, s->addr);
    ck_assert_uint_eq(s->hpages[0], 15); /* one handle of 15 pages */
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_PAGE_CREATE), 1);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_MAP), 1);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_SET_ACCESS), 1);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 30 * MiB);
    xfree(f.heap, a);
    fx_free(&f);
}
END_TEST

START_TEST(stitch_moves_free_handles_instead_of_creating)
{
    fixture f = fx_new(EAGER, DEV, 0);
    gs_block *a = xalloc(f.heap, 10 * MiB, 0);  /* handle A: [0,10) */
    gs_block *b = xalloc(f.heap, 4 * MiB, 0);   /* handle B: [10,14) */
    gs_block *c = xalloc(f.heap, 10 * MiB, 0);  /* handle C: [14,24) */
    uint64_t base = a->seg->addr;
    xfree(f.heap, a);
    xfree(f.heap, c); /* free: [0,10) and [14,24), neither holds 20 MiB */
    uint64_t created = ncalls(f.heap, GS_CALL_PAGE_CREATE);
    /* 20 MiB: the free tail [14,24) is where it grows; handle A moves to [24,34) and C stays */
    gs_block *d = xalloc(f.heap, 20 * MiB, 0);
    ck_assert_uint_eq(d->addr, base + 14 * MiB);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_PAGE_CREATE), created); /* nothing created */
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_UNMAP), 1);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 24 * MiB);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).peak, 24 * MiB);
    ck_assert_uint_eq(dev_used_bytes(f.be), 24 * MiB);
    const gs_segment *s = d->seg;
    ck_assert_int_eq(s->head->state, GS_BLOCK_UNMAPPED); /* A's old range: a hole */
    ck_assert_uint_eq(s->head->size, 10 * MiB);
    /* the hole is mapped again by the next growth that fits it; b's free handle lies beside
     * the hole, so it does not move (that would change the place): 10 MiB are created */
    xfree(f.heap, b);
    gs_block *e = xalloc(f.heap, 10 * MiB, 0);
    ck_assert_uint_eq(e->addr, base);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_PAGE_CREATE), created + 1);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_UNMAP), 1);
    xfree(f.heap, d);
    xfree(f.heap, e);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    check_heap(f.heap);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 0);
    ck_assert_uint_eq(dev_used_bytes(f.be), 0);
    fx_free(&f);
}
END_TEST

/* slack (gs_stitch_conf): while reserved memory after the growth stays within 1 + slack times
 * the peak allocated, a growth creates and moves nothing (a move waits for the whole device on
 * the real driver); slack 0 moves as above. */
START_TEST(stitch_plentiful_memory_creates_instead_of_moving)
{
    for (int slack0 = 0; slack0 < 2; slack0++) {
        fixture f = fx_new(slack0 ? EAGER ",slack:0" : EAGER ",slack:1", DEV, 0);
        gs_block *a = xalloc(f.heap, 10 * MiB, 0);
        gs_block *b = xalloc(f.heap, 4 * MiB, 0);
        gs_block *c = xalloc(f.heap, 10 * MiB, 0); /* peak allocated 24 MiB */
        xfree(f.heap, a);
        xfree(f.heap, c);
        uint64_t created = ncalls(f.heap, GS_CALL_PAGE_CREATE);
        /* 20 MiB where c was: 24 + 20 = 44 MiB <= 2 x 24 under slack 1, so 10 MiB are
         * created beside c's free 10; under slack 0 handle A moves there instead */
        gs_block *d = xalloc(f.heap, 20 * MiB, 0);
        check_heap(f.heap);
        ck_assert_uint_eq(ncalls(f.heap, GS_CALL_UNMAP), slack0 ? 1 : 0);
        ck_assert_uint_eq(ncalls(f.heap, GS_CALL_PAGE_CREATE), created + (slack0 ? 0 : 1));
        ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, slack0 ? 24 * MiB : 34 * MiB);
        xfree(f.heap, d);
        xfree(f.heap, b);
        fx_free_emptied(&f);
    }
    GError *err = NULL;
    ck_assert_ptr_null(gs_policy_new("stitch:slack:1.5", &err));
    ck_assert(strstr(err->message, "from 0 to 1"));
    g_clear_error(&err);
}
END_TEST

/* headroom (gs_stitch_conf): memory is plentiful while reserved memory stays within 1 - headroom
 * times the limit, the device's memory when there is none, and past that bound a growth still
 * creates while what it creates fits the limit; free handles move only when it would not. The
 * slack's scenario above: under a limit of 100 MiB (bound 50: 44 MiB is plentiful, 10 MiB are
 * created), of 60 MiB (bound 30: 34 MiB fit the limit, so 10 MiB are created, nothing moves;
 * before moves waited for the limit, handle A moved here), of 30 MiB (bound 15; 44 MiB would
 * not fit: handle A moves) and with no limit (80 GiB: created). */
START_TEST(stitch_headroom_moves_only_near_the_limit)
{
    const uint64_t limits[] = {100 * MiB, 60 * MiB, 30 * MiB, 0};
    for (int k = 0; k < 4; k++) {
        fixture f =
            fx_new("stitch:headroom:0.5,grow:0,ahead:0,fine:0,max_handle_frac:0", DEV, limits[k]);
        gs_block *a = xalloc(f.heap, 10 * MiB, 0);
        gs_block *b = xalloc(f.heap, 4 * MiB, 0);
        gs_block *c = xalloc(f.heap, 10 * MiB, 0);
        xfree(f.heap, a);
        xfree(f.heap, c);
        gs_block *d = xalloc(f.heap, 20 * MiB, 0);
        bool moved = k == 2;
        ck_assert_uint_eq(ncalls(f.heap, GS_CALL_UNMAP), moved ? 1 : 0);
        ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, moved ? 24 * MiB : 34 * MiB);
        xfree(f.heap, d);
        xfree(f.heap, b);
        fx_free_emptied(&f);
    }
}
END_TEST

/* grow: while plentiful, a large-pool growth creates at least that much, one handle; fine:
 * once not plentiful, a growth of at most that much is one handle per page. */
START_TEST(stitch_grow_floor_and_fine_handles)
{
    fixture f =
        fx_new("stitch:headroom:0.5,grow:20MiB,ahead:0,fine:8MiB,max_handle_frac:0", DEV, 60 * MiB);
    gs_block *a = xalloc(f.heap, 4 * MiB, 0); /* 4 MiB <= 30: plentiful, 20 MiB created */
    const gs_segment *s = a->seg;
    ck_assert_uint_eq(s->hpages[0], 10);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 20 * MiB);
    gs_block *b = xalloc(f.heap, 16 * MiB, 0); /* served by the 16 MiB left */
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 20 * MiB);
    uint64_t created = ncalls(f.heap, GS_CALL_PAGE_CREATE);
    gs_block *c = xalloc(f.heap, 6 * MiB, 0); /* 26 MiB <= 30: plentiful, the floor, capped by
                                               * the room left: 30 - 20 = 10 MiB, one handle */
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_PAGE_CREATE), created + 1);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 30 * MiB);
    /* 10 MiB: c's handle has 4 MiB free at the end, so 6 MiB more: 36 > 30, not plentiful, no
     * free whole handle to move: 3 pages created after the free tail, one handle each */
    gs_block *d = xalloc(f.heap, 10 * MiB, 0);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_PAGE_CREATE), created + 4);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 36 * MiB);
    uint64_t slot = (d->addr + 4 * MiB - d->seg->addr) / (2 * MiB);
    ck_assert_uint_eq(d->seg->hpages[slot], 1);
    ck_assert_uint_eq(d->seg->hpages[slot + 1], 1);
    ck_assert_uint_eq(d->seg->hpages[slot + 2], 1);
    check_heap(f.heap);
    xfree(f.heap, a);
    xfree(f.heap, b);
    xfree(f.heap, c);
    xfree(f.heap, d);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    ck_assert_uint_eq(dev_used_bytes(f.be), 0);
    fx_free(&f);
}
END_TEST

/* ahead: what a plentiful growth creates ahead of need stays within the peak reserved so far;
 * only what it needs raises the peak (no floor here: grow:0). */
START_TEST(stitch_ahead_stays_within_the_peak)
{
    fixture f = fx_new("stitch:headroom:0.5,grow:0,ahead:1,fine:0,max_handle_frac:0", DEV, 0);
    gs_block *a = xalloc(f.heap, 10 * MiB, 0); /* a new peak: nothing ahead (20 MiB before) */
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 10 * MiB);
    gs_block *b = xalloc(f.heap, 20 * MiB, 0); /* a new peak again: 30 MiB */
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 30 * MiB);
    xfree(f.heap, a);
    xfree(f.heap, b);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 0);
    /* 4 MiB under a peak of 30: ahead doubles it, one handle of 8 MiB */
    uint64_t created = ncalls(f.heap, GS_CALL_PAGE_CREATE);
    gs_block *c = xalloc(f.heap, 4 * MiB, 0);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_PAGE_CREATE), created + 1);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 8 * MiB);
    /* 22 MiB: 4 MiB free at the top serve part, 9 pages needed, ahead clipped at the peak:
     * 26 + 4 = 30 MiB */
    gs_block *d = xalloc(f.heap, 22 * MiB, 0);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 30 * MiB);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).peak, 30 * MiB);
    check_heap(f.heap);
    xfree(f.heap, c);
    xfree(f.heap, d);
    fx_free_emptied(&f);
}
END_TEST

START_TEST(stitch_pinned_handle_stays_and_limit_counts_only_new_memory)
{
    fixture f = fx_new(EAGER, DEV, 40 * MiB);
    gs_block *a = xalloc(f.heap, 30 * MiB, 0);  /* one handle of 30 MiB */
    gs_block *p = xalloc(f.heap, 2 * MiB, 0);   /* one of 2 MiB */
    xfree(f.heap, a);
    /* 36 MiB: the free 30 MiB handle moves; 6 MiB more fit the limit of 40 */
    gs_block *b = xalloc(f.heap, 36 * MiB, 0);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 38 * MiB);
    ck_assert_int_eq(gs_heap_stats(f.heap)->num_alloc_retries, 0);
    /* a small block pins the rest of b's first handle: freeing b and asking 40 MiB fails */
    gs_block *pin = xalloc(f.heap, 512, 0); /* small pool: its own 2 MiB handle (the limit) */
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 40 * MiB);
    xfree(f.heap, b);
    gs_block *c = NULL;
    ck_assert_int_eq(gs_heap_malloc(f.heap, 40 * MiB, 0, &c), GS_ERR_OOM);
    check_heap(f.heap);
    xfree(f.heap, p);
    xfree(f.heap, pin);
    fx_free(&f);
}
END_TEST

/* max_handle_frac: handles of at most that share of the limit, so a live block left where a
 * large request was pins one of them, not the whole request's memory. Under a limit of 64 MiB,
 * a freed 40 MiB block gets a 4 MiB block at its start; a 56 MiB request must then move the
 * rest of the old block's memory: with handles of 4 MiB, 36 MiB move and 20 are created (62
 * MiB); with one 40 MiB handle nothing can move and the 56 MiB do not fit. */
START_TEST(stitch_handles_sized_by_the_limit)
{
    for (int capped = 0; capped < 2; capped++) {
        fixture f = fx_new(capped ? "stitch:headroom:0,grow:0,ahead:0,fine:0,max_handle_frac:0.0625"
                                  : EAGER,
                           DEV, 64 * MiB);
        gs_block *a = xalloc(f.heap, 40 * MiB, 0);
        gs_block *b = xalloc(f.heap, 2 * MiB, 0); /* keeps the place above a's */
        ck_assert_uint_eq(a->seg->hpages[0], capped ? 2 : 20);
        xfree(f.heap, a);
        gs_block *p = xalloc(f.heap, 4 * MiB, 0);
        ck_assert_uint_eq(p->addr, b->seg->addr); /* at the start of a's old block */
        gs_block *c = NULL;
        ck_assert_int_eq(gs_heap_malloc(f.heap, 56 * MiB, 0, &c), capped ? GS_OK : GS_ERR_OOM);
        check_heap(f.heap);
        if (capped) {
            ck_assert_uint_eq(ncalls(f.heap, GS_CALL_UNMAP), 9);
            ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 62 * MiB);
            xfree(f.heap, c);
        }
        xfree(f.heap, p);
        xfree(f.heap, b);
        ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
        ck_assert_uint_eq(dev_used_bytes(f.be), 0);
        fx_free(&f);
    }
    /* the default: with no limit, 0.004 of 80 GiB is 163 pages, so a 1 GiB growth is 4 handles */
    fixture f = fx_new("stitch", DEV, 0);
    gs_block *a = xalloc(f.heap, 1 * GiB, 0);
    ck_assert_uint_eq(a->seg->hpages[0], 163);
    xfree(f.heap, a);
    fx_free(&f);
}
END_TEST

/* A growth maps a hole whole when that joins the free blocks on both sides into one that holds
 * the request: fewer pages than a growth at the top. Handles of 6 MiB at [0,6) [6,12) [12,18)
 * and 2 MiB at [18,20); the middle one moves up for an 8 MiB request, leaving a hole at
 * [6,12); then the handles on either side each keep a live block and a free part beside the
 * hole, [2,6) and [12,16), which no move can take. A 14 MiB request maps the hole's 6 MiB (28
 * MiB reserved), where at the top it would create 14 (36). */
START_TEST(stitch_growth_fills_a_hole_between_free_blocks)
{
    fixture f = fx_new(EAGER ",slack:0", DEV, 0);
    gs_block *a1 = xalloc(f.heap, 6 * MiB, 0);
    gs_block *a2 = xalloc(f.heap, 6 * MiB, 0);
    gs_block *a3 = xalloc(f.heap, 6 * MiB, 0);
    gs_block *g = xalloc(f.heap, 2 * MiB, 0);
    uint64_t base = a1->seg->addr;
    xfree(f.heap, a2);
    gs_block *y = xalloc(f.heap, 8 * MiB, 0); /* a2's handle moves to [20,26), 2 MiB created */
    ck_assert_uint_eq(y->addr, base + 20 * MiB);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_UNMAP), 1);
    xfree(f.heap, a1);
    xfree(f.heap, a3);
    gs_block *r1 = xalloc(f.heap, 4 * MiB, 0);
    gs_block *r2 = xalloc(f.heap, 2 * MiB, 0);
    gs_block *q1 = xalloc(f.heap, 2 * MiB, 0);
    gs_block *q2 = xalloc(f.heap, 4 * MiB, 0);
    ck_assert_uint_eq(r1->addr, base + 12 * MiB);
    ck_assert_uint_eq(r2->addr, base + 16 * MiB);
    ck_assert_uint_eq(q1->addr, base);
    ck_assert_uint_eq(q2->addr, base + 2 * MiB);
    xfree(f.heap, r1);
    xfree(f.heap, q2);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 22 * MiB);
    gs_block *d = xalloc(f.heap, 14 * MiB, 0);
    ck_assert_uint_eq(d->addr, base + 2 * MiB);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 28 * MiB);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_UNMAP), 1);
    check_heap(f.heap);
    xfree(f.heap, d);
    xfree(f.heap, q1);
    xfree(f.heap, r2);
    xfree(f.heap, y);
    xfree(f.heap, g);
    fx_free_emptied(&f);
}
END_TEST

/* A growth takes its handles from the highest free block first: the free blocks near the top,
 * where growths go, are the recent ones; an older one below stays whole for best fit. */
START_TEST(stitch_takes_handles_from_the_highest_free_block)
{
    fixture f = fx_new(EAGER ",slack:0", DEV, 0);
    gs_block *a = xalloc(f.heap, 4 * MiB, 0);  /* handle A: [0,4) */
    gs_block *g1 = xalloc(f.heap, 2 * MiB, 0); /* [4,6) */
    gs_block *b = xalloc(f.heap, 4 * MiB, 0);  /* handle B: [6,10) */
    gs_block *g2 = xalloc(f.heap, 2 * MiB, 0); /* [10,12) */
    gs_block *t = xalloc(f.heap, 2 * MiB, 0);  /* [12,14) */
    uint64_t base = a->seg->addr;
    xfree(f.heap, a);
    xfree(f.heap, b);
    xfree(f.heap, t); /* free: [0,4), [6,10) and the top [12,14); none holds 6 MiB */
    uint64_t created = ncalls(f.heap, GS_CALL_PAGE_CREATE);
    /* 6 MiB at the top: [12,14) and 2 pages, B's (the higher of two free handles alike) */
    gs_block *d = xalloc(f.heap, 6 * MiB, 0);
    ck_assert_uint_eq(d->addr, base + 12 * MiB);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_PAGE_CREATE), created);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_UNMAP), 1);
    const gs_segment *s = d->seg;
    ck_assert_int_eq(s->head->state, GS_BLOCK_FREE); /* A stays where it was */
    ck_assert_uint_eq(s->head->size, 4 * MiB);
    ck_assert_int_eq(g1->next->state, GS_BLOCK_UNMAPPED); /* B's old range: a hole */
    ck_assert_uint_eq(g1->next->addr, base + 6 * MiB);
    check_heap(f.heap);
    gs_block *e = xalloc(f.heap, 4 * MiB, 0); /* best fit: A, no growth */
    ck_assert_uint_eq(e->addr, base);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_UNMAP), 1);
    xfree(f.heap, e);
    xfree(f.heap, d);
    xfree(f.heap, g1);
    xfree(f.heap, g2);
    fx_free_emptied(&f);
}
END_TEST

START_TEST(stitch_streams_keep_their_memory)
{
    fixture f = fx_new(EAGER, DEV, 0);
    gs_block *a = xalloc(f.heap, 20 * MiB, 0);
    xfree(f.heap, a);
    gs_block *b = xalloc(f.heap, 20 * MiB, 1); /* below the limit stream 1 makes its own */
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 40 * MiB);
    ck_assert_uint_eq(ncalls(f.heap, GS_CALL_UNMAP), 0);
    xfree(f.heap, b);
    fx_free(&f);
}
END_TEST

/* The settings the tests at the limit run in: the eager one and the lazy default (with growths
 * of what they need, so the sizes below are the handles'). */
static const char *const at_limit_specs[] = {EAGER, "stitch:grow:0,ahead:0,max_handle_frac:0"};

/* At the limit, what the growth's own stream gives and what it may create short of the request,
 * a growth takes another stream's free handles (its own first) rather than fail into the
 * out-of-memory ladder, which would release the whole cache and make a retry: in the eager
 * setting and in the lazy default alike. */
START_TEST(stitch_takes_other_streams_handles_at_the_limit)
{
    for (unsigned k = 0; k < G_N_ELEMENTS(at_limit_specs); k++) {
        fixture f = fx_new(at_limit_specs[k], DEV, 20 * MiB);
        gs_block *a = xalloc(f.heap, 6 * MiB, 0); /* stream 0's handle: 6 MiB */
        gs_block *o = xalloc(f.heap, 4 * MiB, 1); /* stream 1: [0,4) */
        gs_block *p = xalloc(f.heap, 2 * MiB, 1); /* [4,6) */
        gs_block *c = xalloc(f.heap, 6 * MiB, 1); /* [6,12), the top */
        uint64_t base1 = o->seg->addr;
        xfree(f.heap, a);
        xfree(f.heap, o);
        xfree(f.heap, c); /* free: stream 0's 6 MiB; stream 1's [0,4) and [6,12) */
        uint64_t created = ncalls(f.heap, GS_CALL_PAGE_CREATE);
        /* 16 MiB on stream 1 at [6,22): 6 MiB free there, its own 4 MiB handle of [0,4)
         * moves first, 6 MiB created would pass 20 MiB: stream 0's handle covers the rest */
        gs_block *d = xalloc(f.heap, 16 * MiB, 1);
        ck_assert_uint_eq(d->addr, base1 + 6 * MiB);
        ck_assert_uint_eq(ncalls(f.heap, GS_CALL_PAGE_CREATE), created);
        ck_assert_uint_eq(ncalls(f.heap, GS_CALL_UNMAP), 2);
        ck_assert_int_eq(gs_heap_stats(f.heap)->num_alloc_retries, 0);
        ck_assert_int_eq(gs_heap_stats(f.heap)->num_ooms, 0);
        ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 18 * MiB);
        ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).peak, 18 * MiB);
        ck_assert_int_eq(d->seg->head->state, GS_BLOCK_UNMAPPED); /* [0,4): a hole */
        check_heap(f.heap);
        xfree(f.heap, d);
        xfree(f.heap, p);
        fx_free_emptied(&f);
    }
}
END_TEST

/* At the limit a growth takes a free handle even when it is far larger than what is missing
 * (below the limit such a handle stays where it is: one small block at its new place would pin
 * it whole): the ladder would release it anyway, with the whole cache, and count a retry. */
START_TEST(stitch_takes_a_larger_handle_at_the_limit)
{
    for (unsigned k = 0; k < G_N_ELEMENTS(at_limit_specs); k++) {
        fixture f = fx_new(at_limit_specs[k], DEV, 32 * MiB);
        gs_block *x = xalloc(f.heap, 16 * MiB, 0); /* [0,16): one handle of 8 pages */
        gs_block *y = xalloc(f.heap, 2 * MiB, 0);  /* [16,18), live */
        gs_block *z = xalloc(f.heap, 14 * MiB, 0); /* [18,32), the top */
        uint64_t base = x->seg->addr;
        xfree(f.heap, x);
        xfree(f.heap, z);
        uint64_t created = ncalls(f.heap, GS_CALL_PAGE_CREATE);
        /* 18 MiB at [18,36): 2 pages missing, x's handle of 8 covers them */
        gs_block *d = xalloc(f.heap, 18 * MiB, 0);
        ck_assert_uint_eq(d->addr, base + 18 * MiB);
        ck_assert_uint_eq(ncalls(f.heap, GS_CALL_PAGE_CREATE), created);
        ck_assert_int_eq(gs_heap_stats(f.heap)->num_alloc_retries, 0);
        ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current, 32 * MiB);
        check_heap(f.heap);
        xfree(f.heap, d);
        xfree(f.heap, y);
        fx_free_emptied(&f);
    }
}
END_TEST

/* During a capture no handle moves, its own stream's or another's: on the GPU a move waits for
 * the device, which a capture forbids (a review's trace: with the move, it completed). PyTorch
 * fails both requests too: no release during a capture. */
START_TEST(stitch_moves_no_handle_in_a_capture)
{
    for (unsigned k = 0; k < G_N_ELEMENTS(at_limit_specs); k++) {
        for (int other = 0; other < 2; other++) {
            fixture f = fx_new(at_limit_specs[k], DEV, 100 * MiB);
            ck_assert_int_eq(gs_heap_pool_begin(f.heap, 1, true, 0), GS_OK);
            /* free below a live block (its own stream), or on stream 1 */
            gs_block *x = xalloc(f.heap, other ? 60 * MiB : 40 * MiB, other ? 1 : 0);
            gs_block *live = other ? NULL : xalloc(f.heap, 20 * MiB, 0), *b = NULL;
            xfree(f.heap, x);
            ck_assert_int_eq(gs_heap_malloc(f.heap, other ? 60 * MiB : 70 * MiB, 0, &b),
                             GS_ERR_OOM);
            ck_assert_uint_eq(ncalls(f.heap, GS_CALL_UNMAP), 0);
            if (live) xfree(f.heap, live);
            gs_heap_pool_end(f.heap, 1);
            check_heap(f.heap);
            fx_free(&f);
        }
    }
}
END_TEST

/* The release stitch skips at the limit (a request no release could serve; a growth served by
 * another stream's handles) is made when the next capture begins: inside it nothing can be
 * released, and under PyTorch's ladder these programs complete (a review's traces). */
START_TEST(stitch_owes_the_skipped_release_to_the_next_capture)
{
    for (unsigned k = 0; k < G_N_ELEMENTS(at_limit_specs); k++) {
        for (int way = 0; way < 2; way++) {
            fixture f = fx_new(at_limit_specs[k], DEV, 100 * MiB);
            gs_block *keep, *b = NULL;
            if (way == 0) { /* an OOM caught: 30 MiB live, 60 cached, 80 asked */
                keep = xalloc(f.heap, 30 * MiB, 0);
                xfree(f.heap, xalloc(f.heap, 60 * MiB, 0));
                ck_assert_int_eq(gs_heap_malloc(f.heap, 80 * MiB, 0, &b), GS_ERR_OOM);
            } else { /* 90 MiB cached on stream 1; stream 0's 20 MiB moves some of it */
                gs_block *x = xalloc(f.heap, 60 * MiB, 1), *y = xalloc(f.heap, 30 * MiB, 1);
                xfree(f.heap, x);
                xfree(f.heap, y);
                keep = xalloc(f.heap, 20 * MiB, 0);
            }
            ck_assert_int_eq(gs_heap_stats(f.heap)->num_alloc_retries, 0);
            ck_assert_int_eq(gs_heap_pool_begin(f.heap, 1, false, 0), GS_OK);
            gs_block *g = xalloc(f.heap, (way == 0 ? 60 : 70) * MiB, 0); /* in the pool */
            gs_heap_pool_end(f.heap, 1);
            xfree(f.heap, g);
            xfree(f.heap, keep);
            check_heap(f.heap);
            fx_free(&f);
        }
    }
}
END_TEST

/* A request that no release could serve (with the bytes still allocated it passes the limit)
 * fails at once under stitch, its cache kept: PyTorch's ladder releases the whole cache first
 * and counts a retry, as the default still does here. */
START_TEST(stitch_request_no_release_can_serve_fails_without_a_retry)
{
    const char *specs[] = {"pytorch", "stitch"};
    for (unsigned k = 0; k < G_N_ELEMENTS(specs); k++) {
        fixture f = fx_new(specs[k], DEV, 64 * MiB);
        gs_block *a = xalloc(f.heap, 20 * MiB, 0);
        gs_block *b = xalloc(f.heap, 20 * MiB, 0);
        xfree(f.heap, b); /* 20 MiB cached */
        int64_t reserved = STAT(f.heap, reserved_bytes, ALL).current;
        gs_block *c = NULL;
        /* 20 MiB allocated + 46 MiB > 64 MiB: no release can serve it */
        ck_assert_int_eq(gs_heap_malloc(f.heap, 46 * MiB, 0, &c), GS_ERR_OOM);
        ck_assert_int_eq(gs_heap_stats(f.heap)->num_ooms, 1);
        ck_assert_int_eq(gs_heap_stats(f.heap)->num_alloc_retries, k == 0 ? 1 : 0);
        ck_assert_int_eq(STAT(f.heap, reserved_bytes, ALL).current,
                         k == 0 ? (int64_t)(20 * MiB) : reserved);
        /* one that a release could serve still climbs the whole ladder */
        gs_block *d = xalloc(f.heap, 40 * MiB, 1);
        ck_assert_int_eq(gs_heap_stats(f.heap)->num_ooms, 1);
        check_heap(f.heap);
        xfree(f.heap, d);
        xfree(f.heap, a);
        fx_free(&f);
    }
}
END_TEST

START_TEST(stitch_failed_map_keeps_the_heap_whole)
{
    fixture f = faulty_fx(EAGER, 0, GS_CALL_MAP, 3, GS_ERR_DEVICE);
    gs_block *a = xalloc(f.heap, 10 * MiB, 0);
    gs_block *b = xalloc(f.heap, 10 * MiB, 0);
    xfree(f.heap, a);
    gs_block *c = NULL;
    /* the third map (moving a's handle) fails: the handle is given back, the heap is whole */
    ck_assert_int_eq(gs_heap_malloc(f.heap, 16 * MiB, 0, &c), GS_ERR_DEVICE);
    check_heap(f.heap);
    c = xalloc(f.heap, 16 * MiB, 0);
    xfree(f.heap, c);
    xfree(f.heap, b);
    fx_free(&f);
}
END_TEST

START_TEST(stitch_check_catches_a_handle_mapped_twice)
{
    fixture f = fx_new(EAGER, DEV, 0);
    gs_block *a = xalloc(f.heap, 4 * MiB, 0);
    gs_block *b = xalloc(f.heap, 4 * MiB, 0);
    gs_segment *s = a->seg;
    uint64_t keep = s->handles[2];
    s->handles[2] = s->handles[3] = s->handles[0]; /* b's handle now says a's */
    char *why = NULL;
    ck_assert_int_gt(gs_heap_check(f.heap, &why), 0);
    ck_assert_ptr_nonnull(strstr(why, "mapped twice"));
    g_free(why);
    s->handles[2] = s->handles[3] = keep;
    check_heap(f.heap);
    xfree(f.heap, a);
    xfree(f.heap, b);
    fx_free(&f);
}
END_TEST

static Suite *core_suite(void)
{
    Suite *s = suite_create("core");
    TCase *tc = tcase_create("pytorch");
    tcase_add_test(tc, small_request_takes_low_end_of_2mib_segment);
    tcase_add_test(tc, stitch_growth_is_one_handle_of_the_size_needed);
    tcase_add_test(tc, stitch_moves_free_handles_instead_of_creating);
    tcase_add_test(tc, stitch_plentiful_memory_creates_instead_of_moving);
    tcase_add_test(tc, stitch_headroom_moves_only_near_the_limit);
    tcase_add_test(tc, stitch_grow_floor_and_fine_handles);
    tcase_add_test(tc, stitch_ahead_stays_within_the_peak);
    tcase_add_test(tc, stitch_pinned_handle_stays_and_limit_counts_only_new_memory);
    tcase_add_test(tc, stitch_handles_sized_by_the_limit);
    tcase_add_test(tc, stitch_growth_fills_a_hole_between_free_blocks);
    tcase_add_test(tc, stitch_takes_handles_from_the_highest_free_block);
    tcase_add_test(tc, stitch_streams_keep_their_memory);
    tcase_add_test(tc, stitch_takes_other_streams_handles_at_the_limit);
    tcase_add_test(tc, stitch_request_no_release_can_serve_fails_without_a_retry);
    tcase_add_test(tc, stitch_takes_a_larger_handle_at_the_limit);
    tcase_add_test(tc, stitch_moves_no_handle_in_a_capture);
    tcase_add_test(tc, stitch_owes_the_skipped_release_to_the_next_capture);
    tcase_add_test(tc, stitch_failed_map_keeps_the_heap_whole);
    tcase_add_test(tc, stitch_check_catches_a_handle_mapped_twice);
    tcase_add_loop_test(tc, stats_sums_follow_the_sums_of_currents, 0, 9);
    tcase_add_test(tc, stats_sums_read_two_heaps_an_event);
    tcase_add_test(tc, segment_sizes_follow_pytorch);
    tcase_add_test(tc, best_fit_prefers_smallest_then_lowest_address);
    tcase_add_test(tc, streams_do_not_share_free_blocks);
    tcase_add_test(tc, split_and_merge_keep_inactive_split_stats);
    tcase_add_test(tc, empty_cache_releases_only_whole_free_segments);
    tcase_add_test(tc, limit_hit_releases_cache_and_counts_one_retry);
    tcase_add_test(tc, device_oom_without_limit);
    tcase_add_test(tc, max_split_size_rules);
    tcase_add_test(tc, release_available_frees_one_big_enough_oversize_block);
    tcase_add_test(tc, release_available_partial_release_goes_to_full_flush);
    tcase_add_test(tc, garbage_collection_frees_old_blocks_only_with_limit);
    tcase_add_test(tc, deferred_free_is_not_reused_until_complete);
    tcase_add_test(tc, flush_completes_pending_frees_and_clears_owner);
    tcase_add_test(tc, flush_completes_pending_frees_oldest_first);
    tcase_add_test(tc, active_peaks_count_pending_frees);
    tcase_add_test(tc, roundup_power2_divisions_change_allocated_bytes);
    tcase_add_test(tc, zero_size_request_gets_minimum_block);
    tcase_add_test(tc, free_bytes_of_an_empty_heap_are_zero);
    suite_add_tcase(s, tc);
    TCase *tp = tcase_create("free state at peak");
    tcase_add_test(tp, free_state_at_peak_reserved_equals_a_walk);
    tcase_add_test(tp, index_holds_thousands_of_blocks_in_one_class);
    tcase_set_timeout(tp, 60); /* a heap check and a walk after each of 3600 operations:
                                * slow under the sanitizers on a loaded machine */
    suite_add_tcase(s, tp);
    TCase *tf = tcase_create("device-failures");
    tcase_add_test(tf, malloc_oom_from_device_goes_through_ladder);
    tcase_add_test(tf, malloc_device_error_propagates_and_heap_stays_consistent);
    tcase_add_test(tf, free_failure_during_flush_keeps_segment_cached);
    tcase_add_test(tf, check_detects_corruption);
    TCase *te = tcase_create("expandable");
    tcase_add_test(te, expandable_grows_by_mapping_pages_at_the_lowest_address);
    tcase_add_test(te, expandable_empty_cache_unmaps_whole_free_pages_only);
    tcase_add_test(te, expandable_best_fit_spares_the_growable_end);
    tcase_add_test(te, expandable_split_rule_is_512_bytes_in_both_pools);
    tcase_add_test(te, expandable_handle_table_grows_with_the_pages_mapped);
    tcase_add_test(te, expandable_oom_ladder_unmaps_then_retries);
    tcase_add_test(te, expandable_with_max_split_size_release_passes_expandable_blocks_over);
    tcase_add_test(te, expandable_failed_map_gives_back_its_pages);
    tcase_add_test(te, expandable_create_oom_goes_through_the_ladder);
    tcase_add_test(te, expandable_needs_a_backend_with_vmm);
    suite_add_tcase(s, te);
    suite_add_tcase(s, tf);
    TCase *tm = tcase_create("several heaps");
    tcase_add_test(tm, reclaim_asks_the_other_heap_then_retries_once);
    tcase_add_test(tm, reclaim_not_asked_for_the_heap_limit);
    tcase_add_test(tm, on_reserve_follows_reserved_bytes_by_tag);
    tcase_add_test(tm, private_pool_serves_only_its_routed_stream);
    tcase_add_test(tm, private_pool_every_stream_and_reuse_within);
    tcase_add_test(tm, empty_cache_leaves_pools_in_use_and_frees_released_ones);
    tcase_add_test(tm, shared_pool_counts_uses_and_mempool_release_empties_now);
    tcase_add_test(tm, side_stream_joins_the_recording_without_a_use);
    tcase_add_test(tm, pool_released_while_recorded_to_is_not_lost);
    tcase_add_test(tm, empty_captures_give_their_slots_back);
    tcase_add_test(tm, block_freed_after_release_returns_to_its_pool);
    tcase_add_test(tm, no_full_flush_while_routing);
    tcase_add_test(tm, private_pool_expandable_has_its_own_reservation);
    suite_add_tcase(s, tm);
    return s;
}

int main(void) { return run_suite(core_suite()); }
