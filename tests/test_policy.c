/* test_policy.c - the pytorch policy's size rules and its config parser (PyTorch syntax). */
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

START_TEST(registry_lists_pytorch)
{
    const gs_policy_ops *const *r = gs_policy_registry();
    ck_assert_ptr_nonnull(r[0]);
    ck_assert_str_eq(r[0]->name, "pytorch");
    ck_assert_int_eq(r[0]->version, GS_POLICY_VERSION);
}
END_TEST

static Suite *policy_suite(void)
{
    Suite *s = suite_create("policy");
    TCase *tc = tcase_create("pytorch");
    tcase_add_test(tc, round_size_default);
    tcase_add_test(tc, round_size_power2_divisions);
    tcase_add_test(tc, divisions_list_intervals);
    tcase_add_test(tc, config_parses_pytorch_syntax);
    tcase_add_test(tc, config_errors_name_the_key);
    tcase_add_test(tc, registry_lists_pytorch);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return run_suite(policy_suite()); }
