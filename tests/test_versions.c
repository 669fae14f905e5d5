/* test_versions.c - the PyTorch releases the pytorch policy emulates (policies/pytorch_versions.c):
 * pytorch@RELEASE, the keys each release has, the rules that differ (large_segment_size_mb and
 * per_process_memory_fraction of 2.11, throw_on_cudamalloc_oom of 2.12, the rounded fraction
 * of 2.13, the reserves of 2.14), and plain pytorch following the release a trace names. Each
 * case states the rule of PyTorch's source it checks (docs/pytorch-allocator.md §9). */
#include <string.h>

#include "replay.h"
#include "testutil.h"

static gs_policy *policy(const char *spec)
{
    GError *err = NULL;
    gs_policy *p = gs_policy_new(spec, &err);
    ck_assert_msg(p != NULL, "%s: %s", spec, err ? err->message : "");
    return p;
}

/* spec must be refused with a message holding every one of want (NULL-terminated). */
static void expect_error(const char *spec, const char *want, const char *want2)
{
    GError *err = NULL;
    gs_policy *p = gs_policy_new(spec, &err);
    ck_assert_msg(p == NULL, "%s: accepted", spec);
    ck_assert_msg(strstr(err->message, want), "%s: '%s' lacks '%s'", spec, err->message, want);
    ck_assert_msg(!want2 || strstr(err->message, want2), "%s: '%s' lacks '%s'", spec, err->message,
                  want2);
    g_error_free(err);
}

/* The warnings of spec (with or without a limit) joined, for strstr. */
static char *warnings(const char *spec, bool has_limit)
{
    gs_policy *p = policy(spec);
    GPtrArray *w = g_ptr_array_new_with_free_func(g_free);
    p->ops->warnings(p->cfg, has_limit, w);
    g_ptr_array_add(w, NULL);
    char *all = g_strjoinv("\n", (char **)w->pdata);
    g_ptr_array_free(w, TRUE);
    gs_policy_free(p);
    return all;
}

START_TEST(release_names)
{
    /* torch.__version__'s forms: "2.13.0+cu130", a nightly's "2.14.0a0+4fdf77b" */
    ck_assert_uint_eq(gs_pytorch_release_parse("2.13.0+cu130"), 13);
    ck_assert_uint_eq(gs_pytorch_release_parse("2.14.0a0+4fdf77b"), 14);
    ck_assert_uint_eq(gs_pytorch_release_parse("2.11"), 11);
    ck_assert_uint_eq(gs_pytorch_release_parse("2.9.1"), 9);
    ck_assert_uint_eq(gs_pytorch_release_parse("1.13.1"), 0);
    ck_assert_uint_eq(gs_pytorch_release_parse("2."), 0);
    ck_assert_uint_eq(gs_pytorch_release_parse("12"), 0);
    ck_assert_uint_eq(gs_pytorch_release_parse(NULL), 0);
    /* plain pytorch: 2.9 and 2.10 allocate as 2.11; past 2.14, the newest known */
    ck_assert_uint_eq(gs_pytorch_release_of_trace("2.10.0"), 11);
    ck_assert_uint_eq(gs_pytorch_release_of_trace("2.16.0"), 14);
    ck_assert_uint_eq(gs_pytorch_release_of_trace("unknown"), 0);
}
END_TEST

START_TEST(at_release_in_specs)
{
    for (int r = GS_PYTORCH_FIRST; r <= GS_PYTORCH_LAST; r++) {
        char *spec = g_strdup_printf("pytorch@2.%d:max_split_size_mb:128", r);
        gs_policy *p = policy(spec);
        ck_assert_str_eq(p->spec, spec); /* reports name it as given */
        gs_policy_free(p);
        g_free(spec);
    }
    gs_policy_free(policy("pytorch@2.12.1")); /* a patch release allocates as its release */
    expect_error("pytorch@2.10", "2.11 to 2.14", NULL);
    expect_error("pytorch@2.15:expandable_segments:True", "2.11 to 2.14", "not newer");
    expect_error("pytorch@latest", "not a release", NULL);
    expect_error("pytorch@2.12x", "not a release", NULL);
    expect_error("cupy@2.12", "cupy takes no '@RELEASE'", NULL);
}
END_TEST

/* A key a release lacks: PyTorch refuses it ("Unrecognized key ... in CUDA allocator config",
 * CUDAAllocatorConfig::parseArgs), and so does gpusim, naming the release that has it. */
START_TEST(newer_keys_refused_by_older_releases)
{
    expect_error("pytorch@2.11:throw_on_cudamalloc_oom:True", "PyTorch 2.12 and later",
                 "PyTorch 2.11 refuses it");
    expect_error("pytorch@2.13:expandable_segments_reserve:0.5", "PyTorch 2.14 and later", "2.13");
    expect_error("pytorch@2.12:expandable_segments_reserve_by_class:[a:0.5]", "2.14", NULL);
    gs_policy_free(policy("pytorch@2.12:throw_on_cudamalloc_oom:True"));
    gs_policy_free(policy("pytorch@2.14:expandable_segments_reserve:40G"));
    /* 2.11's own keys (2.10 and 2.11 added them) are every release's */
    gs_policy_free(policy("pytorch@2.11:large_segment_size_mb:32,per_process_memory_fraction:0.5"));
    /* pasted bare, a key of a newer release is still the pytorch policy's */
    gs_policy *p = policy("throw_on_cudamalloc_oom:True");
    ck_assert_str_eq(p->spec, "pytorch:throw_on_cudamalloc_oom:True");
    gs_policy_free(p);
}
END_TEST

/* large_segment_size_mb (2.11, AcceleratorAllocatorConfig::parseLargeSegmentSize): more than
 * kMinLargeAlloc (10 MB); get_allocation_size gives it to a 1-10 MiB miss. */
START_TEST(large_segment_size_sets_the_segment)
{
    expect_error("pytorch:large_segment_size_mb:10", "must be > 10", NULL);
    expect_error("pytorch:large_segment_size_mb:x", "whole number of MB", NULL);
    fixture f = fx_new("pytorch:large_segment_size_mb:32", 8 * GiB, 0);
    gs_block *b = xalloc(f.heap, 5 * MiB, 0);
    ck_assert_int_eq(gs_heap_stats(f.heap)->reserved_bytes[GS_STAT_ALL].current, 32 * MiB);
    xfree(f.heap, b);
    /* 10 MiB and up: the request rounded to 2 MiB, as before */
    b = xalloc(f.heap, 40 * MiB + 1, 0);
    ck_assert_int_eq(gs_heap_stats(f.heap)->reserved_bytes[GS_STAT_ALL].current, 74 * MiB);
    xfree(f.heap, b);
    fx_free(&f);
    /* the default is kLargeBuffer */
    fixture g = fx_new("pytorch", 8 * GiB, 0);
    xalloc(g.heap, 5 * MiB, 0);
    ck_assert_int_eq(gs_heap_stats(g.heap)->reserved_bytes[GS_STAT_ALL].current, 20 * MiB);
    fx_free(&g);
}
END_TEST

/* AcceleratorAllocatorConfig::parseArgs reads large_segment_size_mb first; the least
 * max_split_size_mb and max_non_split_rounding_mb are its size, and the rounding's default is
 * it. */
START_TEST(large_segment_size_bounds_the_oversize_keys)
{
    expect_error("pytorch:max_split_size_mb:25,large_segment_size_mb:30", "max_split_size_mb",
                 "must be >= 30");
    expect_error("pytorch:large_segment_size_mb:32,max_non_split_rounding_mb:24",
                 "max_non_split_rounding_mb", "must be >= 32");
    /* a smaller large segment lowers the least, wherever it stands */
    gs_policy *p = policy("pytorch:max_split_size_mb:15,large_segment_size_mb:12");
    gs_fit_rule rule;
    ck_assert(p->ops->fit_rule(p->cfg, &rule));
    ck_assert_uint_eq(rule.oversize, 15 * MiB);
    ck_assert_uint_eq(rule.oversize_waste, 12 * MiB); /* max_non_split_rounding follows */
    gs_policy_free(p);
    p = policy("pytorch:large_segment_size_mb:64,max_non_split_rounding_mb:100");
    ck_assert(p->ops->fit_rule(p->cfg, &rule));
    ck_assert_uint_eq(rule.oversize_waste, 100 * MiB);
    gs_policy_free(p);
    expect_error("pytorch:max_split_size_mb:19", "must be >= 20", NULL); /* 2.11's default */
}
END_TEST

/* The expandable segment of the large pool maps pages of the large segment's size. */
START_TEST(large_segment_size_sets_the_page)
{
    gs_policy *p = policy("pytorch:expandable_segments:True,large_segment_size_mb:64");
    ck_assert_uint_eq(p->ops->expandable_page(p->cfg, 0), 64 * MiB);
    ck_assert_uint_eq(p->ops->expandable_page(p->cfg, 1), 2 * MiB);
    gs_policy_free(p);
    fixture f = fx_new("pytorch:expandable_segments:True,large_segment_size_mb:64", 8 * GiB, 0);
    xalloc(f.heap, 3 * MiB, 0);
    ck_assert_int_eq(gs_heap_stats(f.heap)->reserved_bytes[GS_STAT_ALL].current, 64 * MiB);
    fx_free(&f);
    /* an odd page: the driver takes whole 2 MiB granules only (cuMemCreate), and says so */
    char *w = warnings("pytorch:expandable_segments:True,large_segment_size_mb:11", false);
    ck_assert_ptr_nonnull(strstr(w, "2 MiB granularity"));
    g_free(w);
    fixture g = fx_new("pytorch:expandable_segments:True,large_segment_size_mb:11", 8 * GiB, 0);
    gs_block *b = NULL;
    ck_assert_int_eq(gs_heap_malloc(g.heap, 3 * MiB, 0, &b), GS_ERR_INVALID);
    fx_free(&g);
}
END_TEST

/* per_process_memory_fraction (2.10+, CUDAAllocatorConfig::parsePerProcessMemoryFraction,
 * [0, 1]): the limit setMemoryFraction sets, fraction x the device's memory; 1 means none. */
START_TEST(fraction_sets_the_limit)
{
    expect_error("pytorch:per_process_memory_fraction:1.5", "0 <= x <= 1", NULL);
    expect_error("pytorch:per_process_memory_fraction:-0.1", "0 <= x <= 1", NULL);
    gs_policy *p = policy("pytorch:per_process_memory_fraction:0.25");
    ck_assert_uint_eq(p->ops->limit(p->cfg, 8 * GiB), 2 * GiB);
    gs_policy_free(p);
    p = policy("pytorch:per_process_memory_fraction:1.0");
    ck_assert_uint_eq(p->ops->limit(p->cfg, 8 * GiB), 0);
    gs_policy_free(p);
    p = policy("pytorch:per_process_memory_fraction:0");
    ck_assert_uint_eq(p->ops->limit(p->cfg, 8 * GiB), 1); /* nothing fits */
    gs_policy_free(p);
    /* the heap takes it: a 3 GiB request past 2 GiB fails, through the whole ladder */
    fixture f = fx_new("pytorch:per_process_memory_fraction:0.25", 8 * GiB, 0);
    gs_block *b = NULL;
    ck_assert_int_eq(gs_heap_malloc(f.heap, 3 * GiB, 0, &b), GS_ERR_OOM);
    ck_assert_uint_eq(gs_heap_stats(f.heap)->num_alloc_retries, 1);
    fx_free(&f);
    /* a limit of the caller's (--capacity) wins: a later set_per_process_memory_fraction */
    fixture g = fx_new("pytorch:per_process_memory_fraction:0.25", 8 * GiB, 4 * GiB);
    ck_assert_int_eq(gs_heap_malloc(g.heap, 3 * GiB, 0, &b), GS_OK);
    fx_free(&g);
    char *w = warnings("pytorch:per_process_memory_fraction:0.25", true);
    ck_assert_ptr_nonnull(strstr(w, "--capacity replaces it"));
    g_free(w);
}
END_TEST

/* 2.11 and 2.12 truncate fraction x total to size_t; 2.13 rounds it ("Round per-process memory
 * fraction cap to avoid spurious OOM"). 0.5 of an odd total lands on a half byte. */
START_TEST(fraction_rounds_from_2_13)
{
    const uint64_t total = 85017493505; /* odd */
    const char *specs[] = {"pytorch@2.11:per_process_memory_fraction:0.5",
                           "pytorch@2.12:per_process_memory_fraction:0.5",
                           "pytorch@2.13:per_process_memory_fraction:0.5",
                           "pytorch@2.14:per_process_memory_fraction:0.5",
                           "pytorch:per_process_memory_fraction:0.5"};
    const uint64_t want[] = {total / 2, total / 2, total / 2 + 1, total / 2 + 1, total / 2};
    for (size_t i = 0; i < G_N_ELEMENTS(specs); i++) {
        gs_policy *p = policy(specs[i]);
        ck_assert_msg(p->ops->limit(p->cfg, total) == want[i], "%s", specs[i]);
        gs_policy_free(p);
    }
}
END_TEST

/* throw_on_cudamalloc_oom (2.12): a growth whose new segment would take the reserved bytes past
 * per_process_memory_fraction x the device fails at once, before any driver call, skipping the
 * release of cached blocks and the retry that 2.11 climbs through. */
START_TEST(throw_on_oom_skips_the_ladder)
{
    const char *conf = "per_process_memory_fraction:0.1";
    for (int rel = 11; rel <= 12; rel++) {
        char *spec = g_strdup_printf("pytorch@2.%d:%s%s", rel, conf,
                                     rel == 12 ? ",throw_on_cudamalloc_oom:True" : "");
        fixture f = fx_new(spec, 1000 * MiB, 0); /* a limit of 100 MiB */
        gs_block *a = xalloc(f.heap, 60 * MiB, 0);
        xfree(f.heap, a); /* 60 MiB cached */
        gs_block *b = NULL;
        gs_status st = gs_heap_malloc(f.heap, 80 * MiB, 0, &b);
        const gs_stats *s = gs_heap_stats(f.heap);
        if (rel == 11) {
            /* 2.11: the limit refuses, the flush frees the cached 60 MiB, the retry fits */
            ck_assert_int_eq(st, GS_OK);
            ck_assert_uint_eq(s->num_alloc_retries, 1);
            ck_assert_uint_eq(s->num_oom_rejections, 0);
            ck_assert_int_eq(s->reserved_bytes[GS_STAT_ALL].current, 80 * MiB);
        } else {
            ck_assert_int_eq(st, GS_ERR_OOM);
            ck_assert_uint_eq(s->num_alloc_retries, 0);
            ck_assert_uint_eq(s->num_oom_rejections, 1);
            ck_assert_uint_eq(s->num_ooms, 1);
            /* nothing was released: the cache is as it was */
            ck_assert_int_eq(s->reserved_bytes[GS_STAT_ALL].current, 60 * MiB);
            ck_assert_uint_eq(s->num_device_free, 0);
        }
        check_heap(f.heap);
        fx_free(&f);
        g_free(spec);
    }
    /* the bound is the setting's, not a caller's limit: with no fraction, the whole device */
    gs_policy *p = policy("pytorch@2.12:throw_on_cudamalloc_oom:True");
    ck_assert_uint_eq(p->ops->reject_above(p->cfg, 8 * GiB), 8 * GiB);
    gs_policy_free(p);
    p = policy("pytorch@2.12:throw_on_cudamalloc_oom:False,per_process_memory_fraction:0.5");
    ck_assert_uint_eq(p->ops->reject_above(p->cfg, 8 * GiB), 0);
    gs_policy_free(p);
}
END_TEST

/* expandable_segments_reserve and _by_class (2.14): accepted, not simulated, each with a
 * warning that says what differs; a malformed reserve PyTorch ignores with a warning
 * (parseReserveSpec), a class list must have its brackets. */
START_TEST(reserves_are_accepted_and_noted)
{
    char *w =
        warnings("pytorch@2.14:expandable_segments:True,expandable_segments_reserve:0.5", false);
    ck_assert_ptr_nonnull(strstr(w, "expandable_segments_reserve is not simulated"));
    g_free(w);
    /* without expandable segments it reserves for none: said so, not "differs" */
    w = warnings("pytorch@2.14:expandable_segments_reserve:0.5", false);
    ck_assert_ptr_nonnull(strstr(w, "there is no expandable segment to reserve for"));
    ck_assert_ptr_null(strstr(w, "is not simulated"));
    g_free(w);
    w = warnings("pytorch@2.14:expandable_segments_reserve:-1", false);
    ck_assert_ptr_nonnull(strstr(w, "PyTorch ignores it"));
    g_free(w);
    w = warnings("pytorch@2.14:expandable_segments_reserve_by_class:[serve:0.25,load:40G]", false);
    ck_assert_ptr_nonnull(strstr(w, "setExpandableSegmentReserveClassForStream"));
    g_free(w);
    expect_error("pytorch@2.14:expandable_segments_reserve_by_class:serve", "[CLASS:X", NULL);
}
END_TEST

/* Plain pytorch follows the release the trace was recorded with; a key that release lacks is
 * refused, naming both releases. */
START_TEST(plain_follows_the_trace)
{
    GError *err = NULL;
    gs_policy *p = policy("pytorch:per_process_memory_fraction:0.5");
    ck_assert_ptr_null(gs_policy_at_release(p, NULL, &err)); /* 2.11: as it is */
    ck_assert_ptr_null(gs_policy_at_release(p, "2.11.0+cu130", &err));
    ck_assert_ptr_null(gs_policy_at_release(p, "2.9.1", &err));
    ck_assert_ptr_null(err);
    gs_policy *q = gs_policy_at_release(p, "2.13.0+cu130", &err);
    ck_assert_ptr_nonnull(q);
    ck_assert_str_eq(q->spec, p->spec);
    ck_assert_uint_eq(q->ops->limit(q->cfg, 85017493505), 85017493505 / 2 + 1); /* 2.13 rounds */
    gs_policy_free(q);
    gs_policy_free(p);
    /* a spec that names its release keeps it */
    p = policy("pytorch@2.12");
    ck_assert_ptr_null(gs_policy_at_release(p, "2.14.0", &err));
    gs_policy_free(p);
    p = policy("cupy");
    ck_assert_ptr_null(gs_policy_at_release(p, "2.14.0", &err));
    gs_policy_free(p);
    /* a 2.12 key on a 2.11 trace, or one that does not say */
    p = policy("pytorch:throw_on_cudamalloc_oom:True");
    ck_assert_ptr_null(gs_policy_at_release(p, "2.11.0", &err));
    ck_assert_ptr_nonnull(strstr(err->message, "2.12 and later"));
    ck_assert_ptr_nonnull(strstr(err->message, "recorded with PyTorch 2.11.0"));
    ck_assert_ptr_nonnull(strstr(err->message, "pytorch@2.12:throw_on_cudamalloc_oom:True"));
    g_clear_error(&err);
    ck_assert_ptr_null(gs_policy_at_release(p, NULL, &err));
    ck_assert_ptr_nonnull(strstr(err->message, "no release is known"));
    g_clear_error(&err);
    q = gs_policy_at_release(p, "2.12.0", &err);
    ck_assert_ptr_nonnull(q);
    gs_policy_free(q);
    gs_policy_free(p);
}
END_TEST

/* A replay of a trace whose header says 2.12: plain pytorch takes 2.12's throw_on_cudamalloc_oom,
 * the report's limit is the fraction's, and without the header the replay is refused. */
START_TEST(replay_takes_the_trace_release)
{
    gs_trace *t = gs_trace_new();
    uint32_t a = gs_trace_add_alloc(t, "torch", 0, 60 * MiB);
    gs_trace_add_free(t, a);
    gs_trace_add_alloc(t, "torch", 0, 80 * MiB);
    gs_policy *p = policy("pytorch:per_process_memory_fraction:0.1,throw_on_cudamalloc_oom:True");
    gs_replay_opts o = {.device_total = 1000 * MiB};
    gs_result r;
    GError *err = NULL;
    ck_assert(!gs_replay_run(t, p, &o, &r, &err));
    ck_assert_ptr_nonnull(strstr(err->message, "2.12 and later"));
    g_clear_error(&err);
    gs_trace_set_meta(t, "pytorch_version", "2.12.0+cu130");
    ck_assert(gs_replay_run(t, p, &o, &r, &err));
    ck_assert(r.oom);
    ck_assert_uint_eq(r.capacity, 100 * MiB);
    ck_assert_uint_eq(r.stats.num_oom_rejections, 1);
    ck_assert_str_eq(r.policy, p->spec);
    gs_result_clear(&r);
    gs_policy_free(p);
    /* the same trace, 2.11's setting: the retry after the flush serves it */
    p = policy("pytorch@2.11:per_process_memory_fraction:0.1");
    ck_assert(gs_replay_run(t, p, &o, &r, &err));
    ck_assert(!r.oom);
    ck_assert_uint_eq(r.stats.num_alloc_retries, 1);
    gs_result_clear(&r);
    gs_policy_free(p);
    gs_trace_free(t);
}
END_TEST

static Suite *versions_suite(void)
{
    Suite *s = suite_create("versions");
    TCase *tc = tcase_create("releases");
    tcase_add_test(tc, release_names);
    tcase_add_test(tc, at_release_in_specs);
    tcase_add_test(tc, newer_keys_refused_by_older_releases);
    tcase_add_test(tc, plain_follows_the_trace);
    tcase_add_test(tc, replay_takes_the_trace_release);
    suite_add_tcase(s, tc);
    TCase *tk = tcase_create("keys");
    tcase_add_test(tk, large_segment_size_sets_the_segment);
    tcase_add_test(tk, large_segment_size_bounds_the_oversize_keys);
    tcase_add_test(tk, large_segment_size_sets_the_page);
    tcase_add_test(tk, fraction_sets_the_limit);
    tcase_add_test(tk, fraction_rounds_from_2_13);
    tcase_add_test(tk, throw_on_oom_skips_the_ladder);
    tcase_add_test(tk, reserves_are_accepted_and_noted);
    suite_add_tcase(s, tk);
    return s;
}

int main(void)
{
    return run_suite(versions_suite());
}
