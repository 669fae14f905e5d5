/* test_faults.c - Check suite: device calls failed during replays of the bundled traces, under
 * every standard policy, and what must hold after each (tests/faultsweep.h: the heap, the
 * report at the right event with the backend's message, every byte back on the device or the
 * teardown failure counted). A subset of bench/faults.sh's sweep: of each kind of call a run
 * makes, the first few, every Nth and the last, each failed once with a device error and once
 * with an OOM. argv[1]: traces/data.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "faultsweep.h"

static const char *data_dir;

/* Sweep trace at cap (0: none), arranged as mode, under the given policies (NULL: the six
 * standard ones): the first `first` calls of each kind, every `every`th and the last. */
static void sweep(const char *trace, uint64_t cap, gs_clients_mode mode, const char *const *specs,
                  uint64_t first, uint64_t every, gs_call_kind only)
{
    char *path = g_build_filename(data_dir, trace, NULL);
    GError *err = NULL;
    gs_trace *t = gs_trace_load(path, 0, NULL, NULL, &err);
    ck_assert_msg(t != NULL, "%s", err ? err->message : "?");
    gs_fault_tally y;
    gs_fault_tally_init(&y);
    size_t n_specs = 0;
    while (specs ? specs[n_specs] != NULL : n_specs < gs_fault_n_policies) n_specs++;
    for (size_t i = 0; i < n_specs; i++) {
        gs_policy *p = gs_policy_new(specs ? specs[i] : gs_fault_policies[i], &err);
        ck_assert_msg(p != NULL, "%s", err ? err->message : "?");
        gs_fault_target x = {.name = trace, .t = t, .p = p, .capacity = cap, .clients = mode};
        uint64_t calls[GS_CALL_COUNT];
        gs_fault_count(&x, calls);
        for (int k = 0; k < GS_CALL_COUNT; k++) {
            if (k == GS_CALL_MEM_INFO || (only != GS_CALL_COUNT && k != (int)only)) continue;
            uint64_t *nth = g_new(uint64_t, calls[k] ? calls[k] : 1);
            size_t m = gs_fault_pick(calls[k], first, every, nth);
            for (size_t j = 0; j < m; j++) {
                gs_fault_one(&x, (gs_call_kind)k, nth[j], GS_ERR_DEVICE, &y);
                gs_fault_one(&x, (gs_call_kind)k, nth[j], GS_ERR_OOM, &y);
            }
            g_free(nth);
        }
        gs_policy_free(p);
    }
    ck_assert_msg(y.broken == 0, "%zu of %zu runs broke a promise:\n%s", y.broken, y.runs, y.why->str);
    /* the sweep reached both places a call can fail, and both outcomes of a failure */
    ck_assert_uint_gt(y.in_replay, 0);
    ck_assert_uint_gt(y.reported, 0);
    ck_assert_uint_eq(y.runs, y.in_replay + y.in_teardown);
    gs_fault_tally_clear(&y);
    gs_trace_free(t);
    g_free(path);
}

/* The synthetic trace PyTorch's note on expandable segments describes, at a cap where every
 * policy retries: all six policies. */
START_TEST(batch_alternate_every_policy)
{
    sweep("batch-alternate.gstrace.gz", 6016 * GS_MiB, GS_CLIENTS_SEPARATE, NULL,
          3, 10, GS_CALL_COUNT);
}
END_TEST

/* The real ResNet-50 run at the cap where it retries 4 times: all six policies. */
START_TEST(resnet50_capped)
{
    sweep("resnet50.gstrace.gz", 5888 * GS_MiB, GS_CLIENTS_SEPARATE, NULL, 2, 60, GS_CALL_COUNT);
}
END_TEST

/* Two clients filling the device, each allocator on its own, then cooperating (the others
 * release their caches when one is refused). */
START_TEST(two_clients)
{
    static const char *const specs[] = {"pytorch", "pytorch:expandable_segments:True", NULL};
    sweep("producer-consumer.gstrace.gz", 0, GS_CLIENTS_SEPARATE, specs, 2, 40, GS_CALL_COUNT);
    sweep("producer-consumer.gstrace.gz", 0, GS_CLIENTS_COOPERATIVE, specs, 2, 40, GS_CALL_COUNT);
}
END_TEST

/* Regression (found by this sweep): a cuMemRelease failing while the pages of a cuMemCreate
 * that ran out of memory were given back was dropped (the run went on to an OOM outcome) and
 * its page forgotten (20 MiB never given back to the device). */
START_TEST(release_failing_after_create_oom)
{
    static const char *const specs[] = {"pytorch:expandable_segments:True", NULL};
    sweep("dataframe-then-torch.gstrace.gz", 0, GS_CLIENTS_SEPARATE, specs, 4, 500,
          GS_CALL_PAGE_RELEASE);
}
END_TEST

int main(int argc, char **argv)
{
    data_dir = argc > 1 ? argv[1] : "traces/data";
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("sweep");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, batch_alternate_every_policy);
    tcase_add_test(tc, resnet50_capped);
    tcase_add_test(tc, two_clients);
    tcase_add_test(tc, release_failing_after_create_oom);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
