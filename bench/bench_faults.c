/* bench_faults.c - the fault-injection sweep: every device call of a replay failed in turn.
 *
 *   build/bench/bench_faults [--every N] [--first K] [--status device|oom|both]
 *                            [--capacity SIZE|none] [--clients MODE] [-p SPEC]... [TRACE...]
 *
 * For each trace (default: the five bundled traces of traces/data/) and policy (default:
 * the six of tests/faultsweep.c), at the capacity given (default: the trace's own, below, where
 * the policies retry, collect garbage and run out of memory), a clean replay counts the device
 * calls of each kind; then each call is failed in turn, once with GS_ERR_DEVICE and once with
 * GS_ERR_OOM (--status), and tests/faultsweep.c checks the heap, the report and the device
 * ledger. --every N fails only the first K (--first, default 3) calls of each kind, every Nth
 * and the last (what tests/test_faults.c does in CI). Prints a line per trace and policy and the
 * totals; exit status 1 when any promise broke (the first few are listed). bench/faults.sh runs
 * the whole sweep; docs/robustness.md has its figures.
 */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faultsweep.h"

/* A bundled trace and the cap it is swept at: where the policies retry, collect garbage or run
 * out of memory part way (resnet50 at 5.75 GiB replays as the real run did, 4 retries). */
static const struct {
    const char *file;
    const char *cap;
} bundled[] = {
    {"resnet50.gstrace.gz", "5.75GiB"},
    {"gpt2.gstrace.gz", "18GiB"},
    {"batch-alternate.gstrace.gz", "5.875GiB"},
    /* two clients, each allocator without a cap: they compete for the device's memory */
    {"producer-consumer.gstrace.gz", "none"},
    {"dataframe-then-torch.gstrace.gz", "none"},
};

int main(int argc, char **argv)
{
    gint every = 1, first = 3;
    char *status = NULL, *capacity = NULL, *clients = NULL;
    char **specs = NULL;
    GOptionEntry opts[] = {
        {"every", 0, 0, G_OPTION_ARG_INT, &every, "fail every Nth call of a kind (and the first K, the last); 1: all", "N"},
        {"first", 0, 0, G_OPTION_ARG_INT, &first, "with --every: the first K calls of each kind too", "K"},
        {"status", 0, 0, G_OPTION_ARG_STRING, &status, "device, oom or both (default)", "S"},
        {"capacity", 0, 0, G_OPTION_ARG_STRING, &capacity, "the cap for every trace (default: each trace's own; none: no cap)", "SIZE"},
        {"policy", 'p', 0, G_OPTION_ARG_STRING_ARRAY, &specs, "a policy (repeat; default: the six standard ones)", "SPEC"},
        {"clients", 0, 0, G_OPTION_ARG_STRING, &clients, "several clients: separate (default), shared or cooperative", "MODE"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    GOptionContext *ctx = g_option_context_new("[TRACE...] - fail each device call of a replay in turn");
    g_option_context_add_main_entries(ctx, opts, NULL);
    GError *err = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &err)) {
        fprintf(stderr, "bench_faults: %s\n", err->message);
        return 2;
    }
    g_option_context_free(ctx);
    gs_status sts[2] = {GS_ERR_DEVICE, GS_ERR_OOM};
    size_t n_sts = 2;
    if (status && strcmp(status, "device") == 0) n_sts = 1;
    else if (status && strcmp(status, "oom") == 0) sts[0] = GS_ERR_OOM, n_sts = 1;
    else if (status && strcmp(status, "both") != 0) {
        fprintf(stderr, "bench_faults: --status device|oom|both\n");
        return 2;
    }

    gs_clients_mode mode = GS_CLIENTS_SEPARATE;
    if (clients && !gs_clients_mode_parse(clients, &mode)) {
        fprintf(stderr, "bench_faults: --clients separate|shared|cooperative\n");
        return 2;
    }
    GPtrArray *paths = g_ptr_array_new_with_free_func(g_free), *caps = g_ptr_array_new();
    if (argc > 1) {
        for (int i = 1; i < argc; i++) {
            g_ptr_array_add(paths, g_strdup(argv[i]));
            g_ptr_array_add(caps, capacity ? capacity : "none");
        }
    } else {
        for (size_t i = 0; i < G_N_ELEMENTS(bundled); i++) {
            g_ptr_array_add(paths, g_build_filename(GS_SOURCE_ROOT, "traces", "data", bundled[i].file, NULL));
            g_ptr_array_add(caps, capacity ? capacity : (char *)bundled[i].cap);
        }
    }
    GPtrArray *pols = g_ptr_array_new_with_free_func((GDestroyNotify)gs_policy_free);
    for (size_t i = 0; specs ? specs[i] != NULL : i < gs_fault_n_policies; i++) {
        gs_policy *p = gs_policy_new(specs ? specs[i] : gs_fault_policies[i], &err);
        if (!p) {
            fprintf(stderr, "bench_faults: %s\n", err->message);
            return 2;
        }
        g_ptr_array_add(pols, p);
    }

    gs_fault_tally all;
    gs_fault_tally_init(&all);
    uint64_t all_calls = 0;
    gint64 t0 = g_get_monotonic_time();
    printf("%-32s %-42s %9s %7s %7s %8s %8s %8s %7s %6s %7s\n", "trace @cap", "policy", "calls",
           "runs", "event", "teardown", "reported", "handled", "oom", "broken", "seconds");
    for (guint ti = 0; ti < paths->len; ti++) {
        const char *path = paths->pdata[ti];
        uint64_t cap = 0;
        if (strcmp(caps->pdata[ti], "none") != 0 && !gs_parse_size(caps->pdata[ti], &cap, &err)) {
            fprintf(stderr, "bench_faults: %s\n", err->message);
            return 2;
        }
        gs_trace *t = gs_trace_load(path, 0, NULL, NULL, &err);
        if (!t) {
            fprintf(stderr, "bench_faults: %s\n", err->message);
            return 2;
        }
        char *base = g_path_get_basename(path);
        for (guint pi = 0; pi < pols->len; pi++) {
            gs_fault_target x = {.name = base, .t = t, .p = pols->pdata[pi], .capacity = cap,
                                 .clients = mode};
            gs_fault_tally y;
            gs_fault_tally_init(&y);
            gint64 t1 = g_get_monotonic_time();
            uint64_t calls[GS_CALL_COUNT], n_calls = 0;
            gs_fault_count(&x, calls);
            for (int k = 0; k < GS_CALL_COUNT; k++) {
                /* cudaMemGetInfo is the ledger's own instrument, not an allocator's call */
                if (k == GS_CALL_MEM_INFO) continue;
                n_calls += calls[k];
                uint64_t *nth = g_new(uint64_t, calls[k] ? calls[k] : 1);
                size_t m = gs_fault_pick(calls[k], (uint64_t)first, (uint64_t)every, nth);
                for (size_t i = 0; i < m; i++)
                    for (size_t s = 0; s < n_sts; s++) gs_fault_one(&x, (gs_call_kind)k, nth[i], sts[s], &y);
                g_free(nth);
            }
            char *label = g_strdup_printf("%s @%s", base, (char *)caps->pdata[ti]);
            printf("%-32s %-42s %9" G_GUINT64_FORMAT " %7zu %7zu %8zu %8zu %8zu %7zu %6zu %7.1f\n", label,
                   x.p->spec, n_calls, y.runs, y.in_replay, y.in_teardown, y.reported, y.handled,
                   y.oom_outcome, y.broken, (double)(g_get_monotonic_time() - t1) / 1e6);
            fflush(stdout);
            g_free(label);
            all_calls += n_calls;
            all.runs += y.runs;
            all.in_replay += y.in_replay;
            all.in_teardown += y.in_teardown;
            all.reported += y.reported;
            all.handled += y.handled;
            all.oom_outcome += y.oom_outcome;
            all.heap_checks += y.heap_checks;
            all.broken += y.broken;
            g_string_append(all.why, y.why->str);
            gs_fault_tally_clear(&y);
        }
        g_free(base);
        gs_trace_free(t);
    }
    printf("%-75s %9" G_GUINT64_FORMAT " %7zu %7zu %8zu %8zu %8zu %7zu %6zu %7.1f\n", "total", all_calls,
           all.runs, all.in_replay, all.in_teardown, all.reported, all.handled, all.oom_outcome,
           all.broken, (double)(g_get_monotonic_time() - t0) / 1e6);
    printf("faults injected: %zu (one per run), heap checks: %zu, broken promises: %zu\n", all.runs,
           all.heap_checks, all.broken);
    if (all.broken) fprintf(stderr, "%s", all.why->str);
    int rc = all.broken ? 1 : 0;
    gs_fault_tally_clear(&all);
    g_ptr_array_free(pols, TRUE);
    g_ptr_array_free(paths, TRUE);
    g_ptr_array_free(caps, TRUE);
    g_strfreev(specs);
    g_free(status);
    g_free(capacity);
    g_free(clients);
    return rc;
}
