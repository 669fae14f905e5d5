/* test_policy.c - the pytorch policy's size rules and its config parser (PyTorch syntax); the
 * cupy policy (CuPy 14's MemoryPool) on a heap: rounding, a cudaMalloc per miss, best fit with
 * split and merge, per-stream arenas, free_all_blocks and its OOM path. */
#include <inttypes.h>
#include <string.h>

#include "testutil.h"

static gs_policy *policy(const char *spec)
{
    GError *err = NULL;
    gs_policy *p = gs_policy_new(spec, &err);
    ck_assert_msg(p != NULL, "%s: %s", spec, err ? err->message : "");
    return p;
}

/* The config error for spec must mention every word in want. */
static void expect_error(const char *spec, const char *want)
{
    GError *err = NULL;
    gs_policy *p = gs_policy_new(spec, &err);
    ck_assert_msg(p == NULL, "%s: accepted", spec);
    ck_assert_msg(strstr(err->message, want) != NULL, "%s: message '%s' lacks '%s'", spec,
                  err->message, want);
    g_error_free(err);
}

START_TEST(round_size_default)
{
    gs_policy *p = policy("pytorch");
    ck_assert_uint_eq(gs_pytorch_round_size(p->cfg, 0), 512);
    ck_assert_uint_eq(gs_pytorch_round_size(p->cfg, 1), 512);
    ck_assert_uint_eq(gs_pytorch_round_size(p->cfg, 512), 512);
    ck_assert_uint_eq(gs_pytorch_round_size(p->cfg, 513), 1024);
    ck_assert_uint_eq(gs_pytorch_round_size(p->cfg, 37632), 37888);
    ck_assert_uint_eq(gs_pytorch_round_size(p->cfg, 1200 * 1024), 1200 * 1024);
    gs_policy_free(p);
}
END_TEST

START_TEST(round_size_power2_divisions)
{
    gs_policy *p = policy("pytorch:roundup_power2_divisions:4");
    /* 1200 KiB in [1 MiB, 2 MiB) with 4 divisions: steps of 256 KiB */
    ck_assert_uint_eq(gs_pytorch_round_size(p->cfg, 1200 * 1024), 1280 * 1024);
    /* powers of two stay */
    ck_assert_uint_eq(gs_pytorch_round_size(p->cfg, 4 * MiB), 4 * MiB);
    /* 5 MiB + 1 in [4, 8) MiB: steps of 1 MiB -> 6 MiB */
    ck_assert_uint_eq(gs_pytorch_round_size(p->cfg, 5 * MiB + 1), 6 * MiB);
    /* the docs' example (1200 bytes -> 1280) never fires: size must exceed 512 * divisions */
    ck_assert_uint_eq(gs_pytorch_round_size(p->cfg, 1200), 1536);
    gs_policy_free(p);
}
END_TEST

START_TEST(divisions_list_intervals)
{
    gs_policy *p = policy("pytorch:roundup_power2_divisions:[256:1,512:2,1024:4,>:8]");
    /* the first entry fills every interval below it */
    ck_assert_uint_eq(gs_pytorch_divisions(p->cfg, 1 * MiB), 1);
    ck_assert_uint_eq(gs_pytorch_divisions(p->cfg, 300 * MiB), 1);
    ck_assert_uint_eq(gs_pytorch_divisions(p->cfg, 600 * MiB), 2);
    ck_assert_uint_eq(gs_pytorch_divisions(p->cfg, 1500 * MiB), 4);
    ck_assert_uint_eq(gs_pytorch_divisions(p->cfg, 3 * GiB), 8);
    ck_assert_uint_eq(gs_pytorch_divisions(p->cfg, 40 * GiB), 8);
    gs_policy_free(p);
}
END_TEST

START_TEST(config_parses_pytorch_syntax)
{
    gs_policy *p = policy("pytorch:max_split_size_mb:128, garbage_collection_threshold:0.6,"
                          "expandable_segments:False,backend:native,pinned_num_register_threads:8");
    ck_assert_uint_eq(p->ops->oversize(p->cfg), 128 * MiB);
    gs_policy_free(p);
    p = policy("pytorch:");
    ck_assert_uint_eq(p->ops->oversize(p->cfg), UINT64_MAX);
    gs_policy_free(p);
    p = policy("pytorch:max_split_size_mb:20"); /* PyTorch 2.9+: >= 20 */
    gs_policy_free(p);
    /* white space anywhere is dropped, as PyTorch's ConfigTokenizer drops it ("key: 64" was
     * refused as "' 64' is not a whole number of MB") */
    p = policy("pytorch:max_split_size_mb: 6 4 ,\tgarbage_collection_threshold :0.6");
    ck_assert_uint_eq(p->ops->oversize(p->cfg), 64 * MiB);
    gs_policy_free(p);
    p = policy("pytorch:roundup_power2_divisions:[ 256 : 1 , > : 8 ]");
    ck_assert_uint_eq(gs_pytorch_divisions(p->cfg, 40 * GiB), 8);
    gs_policy_free(p);
}
END_TEST

/* Two settings decide alike on a trace when they differ in max_split_size_mb alone and no block
 * of it reaches either threshold: its largest segment, the largest request rounded to 2 MiB (a
 * block of exactly the threshold is oversize), or the 20 MiB floor of the large pool. */
START_TEST(same_decisions_below_max_split_size)
{
    gs_policy *d = policy("pytorch"), *m256 = policy("pytorch:max_split_size_mb:256"),
              *m64 = policy("pytorch:max_split_size_mb:64"),
              *es = policy("pytorch:expandable_segments:True"),
              *es256 = policy("pytorch:expandable_segments:True,max_split_size_mb:256"),
              *gc = policy("pytorch:max_split_size_mb:256,garbage_collection_threshold:0.8"),
              *r4 = policy("pytorch:max_split_size_mb:256,roundup_power2_divisions:4"),
              *cupy = policy("cupy");
    ck_assert(gs_policy_same_decisions(d, m256, 200 * MiB));
    ck_assert(gs_policy_same_decisions(m256, d, 254 * MiB));      /* a 254 MiB segment */
    ck_assert(!gs_policy_same_decisions(m256, d, 254 * MiB + 1)); /* 256 MiB: oversize */
    ck_assert(gs_policy_same_decisions(m256, m64, 62 * MiB));
    ck_assert(!gs_policy_same_decisions(m256, m64, 62 * MiB + 1));
    ck_assert(gs_policy_same_decisions(d, d, 80 * GiB));      /* no threshold at all */
    ck_assert(!gs_policy_same_decisions(es, es256, 1 * MiB)); /* a segment grows */
    ck_assert(!gs_policy_same_decisions(m256, gc, 1 * MiB));
    ck_assert(!gs_policy_same_decisions(m256, r4, 1 * MiB));
    ck_assert(!gs_policy_same_decisions(d, cupy, 1 * MiB));
    /* a request past GS_MAX_REQUEST, whose rounding would wrap, says nothing of the others */
    ck_assert(!gs_policy_same_decisions(d, m256, UINT64_MAX));
    ck_assert(!gs_policy_same_decisions(d, m256, GS_MAX_REQUEST + 1));
    gs_policy *both[] = {d, m256, m64, es, es256, gc, r4, cupy};
    for (size_t i = 0; i < G_N_ELEMENTS(both); i++) gs_policy_free(both[i]);
}
END_TEST

START_TEST(config_errors_name_the_key)
{
    expect_error("pytorch:max_split_sise_mb:128", "unknown key 'max_split_sise_mb'");
    expect_error("pytorch:max_split_size_mb:19", "must be >= 20");
    expect_error("pytorch:max_split_size_mb:abc", "max_split_size_mb");
    expect_error("pytorch:max_split_size_mb", "expected key:value");
    expect_error("pytorch:garbage_collection_threshold:1.0", "garbage_collection_threshold");
    expect_error("pytorch:garbage_collection_threshold:0", "0 < x < 1");
    expect_error("pytorch:roundup_power2_divisions:3", "power of two");
    expect_error("pytorch:roundup_power2_divisions:[256:1,300:2]", "'300'");
    expect_error("pytorch:roundup_power2_divisions:[256:1", "unterminated");
    expect_error("pytorch:expandable_segments:true", "True or False");
    expect_error("pytorch:backend:cudaMallocAsync", "cudaMallocAsync");
    expect_error("tensorflow", "unknown policy 'tensorflow'");
    expect_error("tensorflow:x:1", "known: pytorch");
}
END_TEST

/* The keys table serves both the parser and --help: every key --help lists is one the
 * parser takes, the ones it does not list are still accepted, and an unknown key is refused. */
START_TEST(keys_table_serves_parser_and_help)
{
    char *help = gs_policy_keys_help(&gs_policy_pytorch);
    static const char *const listed[][2] = {
        {"max_split_size_mb", "128"}, {"max_non_split_rounding_mb", "40"},
        {"roundup_power2_divisions", "4"}, {"garbage_collection_threshold", "0.6"},
        {"expandable_segments", "True"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(listed); i++) {
        char *line = g_strdup_printf("%s:", listed[i][0]);
        ck_assert_msg(g_str_has_prefix(help, line) || strstr(help, line), "--help lacks %s", line);
        char *spec = g_strdup_printf("pytorch:%s:%s", listed[i][0], listed[i][1]);
        GError *err = NULL;
        gs_policy *p = gs_policy_new(spec, &err);
        ck_assert_msg(p != NULL, "%s: %s", spec, err ? err->message : "");
        gs_policy_free(p);
        g_free(spec);
        g_free(line);
    }
    /* accepted, not listed: PyTorch's keys that change nothing in a replay */
    ck_assert_ptr_null(strstr(help, "release_lock_on_cudamalloc"));
    gs_policy *p = gs_policy_new("pytorch:release_lock_on_cudamalloc:True,pinned_num_register_threads:8,"
                                 "backend:native", NULL);
    ck_assert_ptr_nonnull(p);
    gs_policy_free(p);
    GError *err = NULL;
    ck_assert_ptr_null(gs_policy_new("pytorch:expandable_segment:True", &err));
    ck_assert(strstr(err->message, "unknown key 'expandable_segment'"));
    g_error_free(err);
    g_free(help);
}
END_TEST

START_TEST(registry_lists_pytorch)
{
    const gs_policy_ops *const *r = gs_policy_registry();
    ck_assert_ptr_nonnull(r[0]);
    ck_assert_str_eq(r[0]->name, "pytorch");
    ck_assert_int_eq(r[0]->version, GS_POLICY_VERSION);
}
END_TEST

/* A policy's fit_rule (the rule the core applies inline) must say exactly what its fits and
 * should_split hooks say, at and around every threshold the rules have. */
static void check_fit_rule(const char *spec)
{
    gs_policy *p = policy(spec);
    const gs_policy_ops *o = p->ops;
    gs_fit_rule r;
    if (!o->fit_rule || !o->fit_rule(p->cfg, &r)) {
        gs_policy_free(p);
        return;
    }
    const uint64_t MiB_ = 1048576;
    const uint64_t sizes[] = {512, 1024, MiB_ - 512, MiB_, MiB_ + 512, 2 * MiB_, 10 * MiB_,
                              20 * MiB_, 64 * MiB_, 128 * MiB_ - 512, 128 * MiB_,
                              128 * MiB_ + 512, 192 * MiB_, 256 * MiB_, 300 * MiB_, 1024 * MiB_};
    const uint64_t extra[] = {0, 1, 511, 512, 1024, MiB_ - 512, MiB_, MiB_ + 512, 2 * MiB_,
                              20 * MiB_ - 512, 20 * MiB_, 20 * MiB_ + 512, 64 * MiB_ - 512,
                              64 * MiB_, 128 * MiB_, 512 * MiB_};
    for (unsigned pool = 0; pool < o->npools; pool++)
        for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++)
            for (size_t j = 0; j < G_N_ELEMENTS(extra); j++) {
                gs_block b = {.size = sizes[i] + extra[j], .pool = (uint8_t)pool};
                uint64_t n = sizes[i];
                bool fits = n < r.oversize ? b.size < r.oversize : b.size < n + r.oversize_waste;
                bool split = n < r.split[pool].below && b.size - n >= r.split[pool].min_rest;
                ck_assert_msg(fits == o->fits(p->cfg, &b, n), "%s: fits(%" PRIu64 ", %" PRIu64
                              ") in pool %u", spec, b.size, n, pool);
                ck_assert_msg(split == o->should_split(p->cfg, &b, n), "%s: should_split(%" PRIu64
                              ", %" PRIu64 ") in pool %u", spec, b.size, n, pool);
            }
    gs_policy_free(p);
}

START_TEST(fit_rule_agrees_with_hooks)
{
    const char *specs[] = {
        "pytorch",
        "pytorch:max_split_size_mb:128",
        "pytorch:max_split_size_mb:256,max_non_split_rounding_mb:64",
        "pytorch:expandable_segments:True",
        "pytorch:expandable_segments:True,max_split_size_mb:128",
        "pytorch:roundup_power2_divisions:4,garbage_collection_threshold:0.6",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(specs); i++) check_fit_rule(specs[i]);
    /* every registered policy with its defaults */
    for (const gs_policy_ops *const *r = gs_policy_registry(); *r; r++) check_fit_rule((*r)->name);
    /* the policies of the hot path declare one */
    gs_fit_rule r;
    gs_policy *p = policy("pytorch");
    ck_assert(p->ops->fit_rule && p->ops->fit_rule(p->cfg, &r));
    gs_policy_free(p);
    p = policy("cupy");
    ck_assert(p->ops->fit_rule && p->ops->fit_rule(p->cfg, &r));
    gs_policy_free(p);
}
END_TEST

/* ---- cupy ---- */

#define DEV (1 * GiB)

START_TEST(cupy_rounds_to_512_and_mallocs_exactly_that)
{
    fixture f = fx_new("cupy", DEV, 0);
    const gs_policy_ops *P = f.policy->ops;
    ck_assert_uint_eq(P->round_size(f.policy->cfg, 1), 512);
    ck_assert_uint_eq(P->round_size(f.policy->cfg, 512), 512);
    ck_assert_uint_eq(P->round_size(f.policy->cfg, 513), 1024);
    ck_assert_uint_eq(P->round_size(f.policy->cfg, 0), 512);
    gs_block *a = xalloc(f.heap, 1000, 0);
    gs_block *b = xalloc(f.heap, 3 * MiB + 1, 0);
    ck_assert_uint_eq(a->size, 1024);
    ck_assert_uint_eq(a->seg->size, 1024); /* no 2 MiB small-pool segment: CuPy has none */
    ck_assert_uint_eq(b->seg->size, 3 * MiB + 512);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_device_alloc, 2);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, LARGE).current, 3 * MiB + 1536);
    ck_assert_int_eq(STAT(f.heap, reserved_bytes, SMALL).current, 0);
    xfree(f.heap, a);
    xfree(f.heap, b);
    fx_free(&f);
}
END_TEST

START_TEST(cupy_best_fit_splits_and_merges)
{
    fixture f = fx_new("cupy", DEV, 0);
    gs_block *big = xalloc(f.heap, 10 * MiB, 0);
    gs_block *small = xalloc(f.heap, 4 * MiB, 0);
    xfree(f.heap, big);
    xfree(f.heap, small);
    /* 5 MiB: the 10 MiB chunk is the only one large enough; split, rest cached */
    gs_block *a = xalloc(f.heap, 5 * MiB, 0);
    ck_assert_uint_eq(a->seg->size, 10 * MiB);
    ck_assert(gs_block_is_split(a));
    /* 3 MiB: best fit is the 4 MiB chunk, not the 5 MiB rest */
    gs_block *b = xalloc(f.heap, 3 * MiB, 0);
    ck_assert_uint_eq(b->seg->size, 4 * MiB);
    gs_block *c = xalloc(f.heap, 5 * MiB, 0); /* exactly the rest: no split */
    ck_assert_ptr_eq(c->seg, a->seg);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_device_alloc, 2); /* no miss */
    xfree(f.heap, a);
    xfree(f.heap, c);
    /* the two halves merged back into one whole 10 MiB chunk */
    ck_assert_ptr_eq(gs_pool_last(f.heap, 0)->seg->head, gs_pool_last(f.heap, 0));
    ck_assert_uint_eq(gs_pool_last(f.heap, 0)->size, 10 * MiB);
    xfree(f.heap, b);
    fx_free(&f);
}
END_TEST

START_TEST(cupy_arenas_are_per_stream)
{
    fixture f = fx_new("cupy", DEV, 0);
    gs_block *a = xalloc(f.heap, 8 * MiB, 1);
    xfree(f.heap, a);
    gs_block *b = xalloc(f.heap, 8 * MiB, 2); /* stream 1's free chunk is not for stream 2 */
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_device_alloc, 2);
    gs_block *c = xalloc(f.heap, 8 * MiB, 1);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_device_alloc, 2);
    xfree(f.heap, b);
    xfree(f.heap, c);
    fx_free(&f);
}
END_TEST

START_TEST(cupy_free_all_blocks_releases_only_unsplit_chunks)
{
    fixture f = fx_new("cupy", DEV, 0);
    gs_block *whole = xalloc(f.heap, 6 * MiB, 0);
    gs_block *split = xalloc(f.heap, 8 * MiB, 0);
    xfree(f.heap, whole);
    xfree(f.heap, split);
    gs_block *part = xalloc(f.heap, 7 * MiB, 0); /* best fit: the 8 MiB chunk, split */
    ck_assert_uint_eq(part->seg->size, 8 * MiB);
    ck_assert_int_eq(gs_heap_empty_cache(f.heap), GS_OK);
    check_heap(f.heap);
    /* the whole 6 MiB chunk went back; the free 1 MiB piece of the split one cannot */
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_device_free, 1);
    ck_assert_uint_eq(gs_heap_reserved(f.heap), 8 * MiB);
    ck_assert_uint_eq(gs_pool_count(f.heap, 0), 1);
    xfree(f.heap, part);
    fx_free(&f);
}
END_TEST

START_TEST(cupy_oom_frees_all_blocks_then_retries_once)
{
    fixture f = fx_new("cupy", 64 * MiB, 0);
    gs_block *a = xalloc(f.heap, 40 * MiB, 0);
    xfree(f.heap, a);
    /* 50 MiB: no cached chunk is large enough, cudaMalloc fails (40 of 64 MiB cached),
     * free_all_blocks, the retry succeeds */
    gs_block *b = xalloc(f.heap, 50 * MiB, 0);
    const gs_stats *s = gs_heap_stats(f.heap);
    ck_assert_uint_eq(s->num_alloc_retries, 1);
    ck_assert_uint_eq(s->num_device_free, 1);
    ck_assert_uint_eq(gs_heap_devcalls(f.heap)->failed[GS_CALL_MALLOC], 1);
    /* a split chunk cannot be released: split b's chunk, leaving 40 MiB of it cached, and ask
     * for 45 MiB, which only the device could give */
    xfree(f.heap, b);
    gs_block *c = xalloc(f.heap, 10 * MiB, 0);
    gs_block *d = NULL;
    ck_assert_int_eq(gs_heap_malloc(f.heap, 45 * MiB, 0, &d), GS_ERR_OOM);
    check_heap(f.heap);
    ck_assert_uint_eq(s->num_alloc_retries, 2);
    ck_assert_uint_eq(s->num_ooms, 1);
    ck_assert_uint_eq(s->num_device_free, 1); /* nothing more could go back */
    xfree(f.heap, c);
    fx_free(&f);
}
END_TEST

START_TEST(cupy_limit_is_set_limit)
{
    fixture f = fx_new("cupy", DEV, 100 * MiB);
    gs_block *a = xalloc(f.heap, 60 * MiB, 0);
    xfree(f.heap, a);
    gs_block *b = xalloc(f.heap, 70 * MiB, 0); /* 60 + 70 > 100: free_all_blocks, retry */
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_alloc_retries, 1);
    ck_assert_uint_eq(gs_heap_devcalls(f.heap)->failed[GS_CALL_MALLOC], 0); /* never asked */
    xfree(f.heap, b);
    fx_free(&f);
}
END_TEST

START_TEST(cupy_has_no_config_keys)
{
    expect_error("cupy:max_split_size_mb:128", "no config keys");
    gs_policy *p = policy("cupy");
    ck_assert_str_eq(p->spec, "cupy");
    gs_policy_free(p);
    const gs_policy_ops *const *r = gs_policy_registry();
    ck_assert_str_eq(r[1]->name, "cupy");
}
END_TEST

static Suite *policy_suite(void)
{
    Suite *s = suite_create("policy");
    TCase *tc = tcase_create("pytorch");
    tcase_add_test(tc, round_size_default);
    tcase_add_test(tc, same_decisions_below_max_split_size);
    tcase_add_test(tc, round_size_power2_divisions);
    tcase_add_test(tc, divisions_list_intervals);
    tcase_add_test(tc, config_parses_pytorch_syntax);
    tcase_add_test(tc, config_errors_name_the_key);
    tcase_add_test(tc, registry_lists_pytorch);
    tcase_add_test(tc, keys_table_serves_parser_and_help);
    tcase_add_test(tc, fit_rule_agrees_with_hooks);
    suite_add_tcase(s, tc);
    TCase *tcu = tcase_create("cupy");
    tcase_add_test(tcu, cupy_rounds_to_512_and_mallocs_exactly_that);
    tcase_add_test(tcu, cupy_best_fit_splits_and_merges);
    tcase_add_test(tcu, cupy_arenas_are_per_stream);
    tcase_add_test(tcu, cupy_free_all_blocks_releases_only_unsplit_chunks);
    tcase_add_test(tcu, cupy_oom_frees_all_blocks_then_retries_once);
    tcase_add_test(tcu, cupy_limit_is_set_limit);
    tcase_add_test(tcu, cupy_has_no_config_keys);
    suite_add_tcase(s, tcu);
    return s;
}

int main(void) { return run_suite(policy_suite()); }
